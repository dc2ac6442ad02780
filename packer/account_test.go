package packer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Contract: Offload, Preflight, Box CLI missing or signed out: "both
// accounts shown when they differ". The user's claude here (a script in
// PATH answering auth status as claude 2.1 does) and the box's differ: a
// warning names both; the same account, or one unknown, says nothing.
func TestBothAccountsShownWhenTheyDiffer(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\n[ \"$1 $2\" = 'auth status' ] && echo '{\"loggedIn\":true,\"authMethod\":\"claude.ai\",\"email\":\"me@home.example\"}'\n"
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	host := HostAccount(context.Background(), "claude")
	if host != "me@home.example" {
		t.Fatalf("HostAccount = %q", host)
	}
	f := AccountFinding("claude", "work@box.example", host)
	if f == nil || f.Outcome != Warn || !strings.Contains(f.Detail, "work@box.example") || !strings.Contains(f.Detail, "me@home.example") {
		t.Errorf("accounts differ: %+v, want a warning naming both", f)
	}
	if f := AccountFinding("claude", host, host); f != nil {
		t.Errorf("the same account: %+v", f)
	}
	if f := AccountFinding("claude", "work@box.example", ""); f != nil {
		t.Errorf("no account here: %+v", f)
	}
}
