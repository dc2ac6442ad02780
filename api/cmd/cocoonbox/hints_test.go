package main

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
)

// Issue 45, Deliver 5: a refused $COCOONBOX_TOKEN is named, and not
// answered with "run cocoonbox login" (the variable wins over any login).
func TestARefusedEnvironmentTokenIsNamed(t *testing.T) {
	a := apitest.New(t, apitest.WithoutSession())
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("0", 64))
	for _, args := range [][]string{{"devices"}, {"boxes"}, {"rsh", "web", "true"}} {
		_, err := runCLI(t, "", append([]string{args[0], "--endpoint", a.URL}, args[1:]...)...)
		if err == nil || !strings.Contains(err.Error(), "$COCOONBOX_TOKEN") || strings.Contains(err.Error(), "run cocoonbox login") {
			t.Errorf("cocoonbox %v with a bad $COCOONBOX_TOKEN: %v, want it named and no login hint", args, err)
		}
	}
}

// Issue 45, Deliver 5: after logout, the next command names the api the
// user signed out of, not the default endpoint they never used.
func TestAfterLogoutMessagesNameTheSameAPI(t *testing.T) {
	a := apitest.New(t, apitest.WithoutSession())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("COCOONBOX_TOKEN", "")
	if _, err := runCLI(t, string(a.PersonalToken(a.User.ID))+"\n", "login", "--token-stdin", "--endpoint", a.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "", "logout"); err != nil {
		t.Fatal(err)
	}
	_, err := runCLI(t, "", "devices")
	if err == nil || !strings.Contains(err.Error(), a.URL) || strings.Contains(err.Error(), DefaultEndpoint) {
		t.Fatalf("devices after logout: %v, want it to name %s", err, a.URL)
	}
}

// Issue 45, Deliver 5: keys rotate without a value says how to rotate,
// not how to add.
func TestKeysRotateWithoutAValueShowsRotate(t *testing.T) {
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("0", 64))
	_, err := runCLI(t, "", "keys", "rotate", "OPENAI_API_KEY", "--endpoint", "http://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "cocoonbox keys rotate OPENAI_API_KEY") || strings.Contains(err.Error(), "keys add") {
		t.Fatalf("keys rotate with an empty stdin: %v", err)
	}
}
