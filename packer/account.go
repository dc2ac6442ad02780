package packer

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// HostAccount is the account the user's own CLI of kind is signed in to
// here, by the commands begin runs in the box (Contract: Offload,
// Preflight: claude auth status, codex login status); empty when it is
// not installed or not signed in.
func HostAccount(ctx context.Context, kind string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch kind {
	case "claude":
		out, err := exec.CommandContext(ctx, "claude", "auth", "status").Output()
		var st struct {
			LoggedIn bool   `json:"loggedIn"`
			Email    string `json:"email"`
			Account  struct {
				Email string `json:"email"`
			} `json:"account"`
		}
		if err != nil || json.Unmarshal(out, &st) != nil || !st.LoggedIn {
			return ""
		}
		if st.Email != "" {
			return st.Email
		}
		return st.Account.Email
	case "codex":
		out, err := exec.CommandContext(ctx, "codex", "login", "status").CombinedOutput()
		if s := strings.TrimSpace(string(out)); err == nil && !strings.Contains(s, "Not logged in") {
			return s
		}
	}
	return ""
}

// AccountFinding is the sign-in finding's "both accounts shown when they
// differ" (Contract: Offload, Preflight, Box CLI missing or signed out):
// a warning naming the box CLI's account and the user's here, when both
// are known and differ; nil otherwise.
func AccountFinding(kind, box, host string) *Finding {
	if box == "" || host == "" || box == host {
		return nil
	}
	f := offload.Found("Box CLI missing or signed out", Warn, fmt.Sprintf("the box's %s is signed in as %s, yours here as %s: the box works under the other account (Sign in in the box to change it)", kind, box, host))
	return &f
}
