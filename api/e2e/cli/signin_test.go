package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client/login"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// Must show: the CLI's whole browser sign-in with real headless Chromium
// signing in to the console and clicking Allow; then the device is listed
// with its name, and the token works on gRPC.
func TestCLIBrowserSignInThroughChromium(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	cli := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir()}

	out, err := cli.Login(e.ctx, b, e.api.URL, "alice", password, "--device-name", "test laptop")
	if err != nil || !strings.Contains(out, `Signed in to `+e.api.URL+` as device "test laptop"`) {
		t.Fatalf("cocoonbox login: %v\n%s", err, out)
	}
	if err := b.WaitFor(e.ctx, "the CLI's page", func(url, text string) bool {
		return strings.HasPrefix(url, "http://127.0.0.1:") && strings.Contains(text, "You can close this page")
	}); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(cli.ConfigDir, "cocoonbox", "cli.json")
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("cli.json: %v %v, want mode 0600", st, err)
	}
	f, err := login.LoadConfig(path)
	saved := f.Endpoints[e.api.URL]
	if err != nil || saved.Source != login.SourceBrowser || !regexp.MustCompile(`^cb_[0-9a-f]{64}$`).MatchString(saved.Token) {
		t.Fatalf("cli.json login %+v, %v", saved, err)
	}

	out, err = cli.Run(e.ctx, "", "devices", "--endpoint", e.api.URL)
	if err != nil || !regexp.MustCompile(`(?m)^\* dev_[0-9a-f]{16}\s+cocoonbox-cli\s+test laptop`).MatchString(out) {
		t.Fatalf("cocoonbox devices: %v\n%s", err, out)
	}

	resp, err := harness.Account(e.api.URL, saved.Token).ListDevices(e.ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
	if err != nil {
		t.Fatalf("ListDevices over gRPC with the device token: %v", err)
	}
	if d := resp.Msg.Devices; len(d) != 1 || !d[0].Current || d[0].Label != "test laptop" || d[0].Client != "cocoonbox-cli" {
		t.Fatalf("ListDevices: %v", d)
	}
	first := saved.Token

	// Contract: a new CLI login revokes the browser token it replaces. The
	// browser's console session is still there: only the Allow click.
	out, err = cli.Login(e.ctx, b, e.api.URL, "alice", password, "--device-name", "test laptop 2")
	if err != nil {
		t.Fatalf("second cocoonbox login: %v\n%s", err, out)
	}
	if ok, saw := e.refused(e.api.URL, first); !ok {
		t.Fatalf("the token the second login replaced still works: %s", saw)
	}
	out, err = cli.Run(e.ctx, "", "devices", "--json", "--endpoint", e.api.URL)
	var list []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0]["label"] != "test laptop 2" || list[0]["current"] != true {
		t.Fatalf("cocoonbox devices --json: %v\n%s", err, out)
	}

	// The console's Devices page lists it and revokes it with a click.
	id := list[0]["id"].(string)
	if err := b.Go(e.ctx, e.api.URL+"/cb/devices"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(e.ctx, "the device on the Devices page", func(_, text string) bool { return strings.Contains(text, "test laptop 2") }); err != nil {
		t.Fatal(err)
	}
	if err := b.Click(e.ctx, "#device-"+id+" button.revoke"); err != nil {
		t.Fatal(err)
	}
	if err := b.Click(e.ctx, "#confirm-ok"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(e.ctx, "the empty device list", func(_, text string) bool { return strings.Contains(text, "No devices are signed in") }); err != nil {
		t.Fatal(err)
	}
	if out, err := cli.Run(e.ctx, "", "devices", "--endpoint", e.api.URL); err == nil || !strings.Contains(out, "run cocoonbox login") {
		t.Fatalf("the CLI after its device was revoked on the Devices page: %v\n%s", err, out)
	}

	// Sign out everywhere from the page ends this console session too.
	if err := b.Click(e.ctx, "#sign-out-everywhere"); err != nil {
		t.Fatal(err)
	}
	if err := b.Click(e.ctx, "#confirm-ok"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(e.ctx, "the console's sign-in", func(url, _ string) bool { return strings.HasSuffix(url, "/cb/") }); err != nil {
		t.Fatal(err)
	}
	b.Go(e.ctx, e.api.URL+"/cb/devices")
	if err := b.WaitFor(e.ctx, "the sign-in instead of the Devices page", func(url, _ string) bool { return strings.Contains(url, "return_to=/cb/devices") }); err != nil {
		t.Fatal(err)
	}
}

// The demo's story: a device revoked with cocoonbox devices revoke, and
// the CLI's next call refused with what to do; logout of a browser token
// revokes it, logout of a pasted one does not.
func TestCLIRevokeAndLogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console("alice")
	other := e.device(c, "other machine")
	cli := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir()}

	// $COCOONBOX_TOKEN, as in a box: used without any login, stored nowhere.
	envCLI := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir(), Env: []string{"COCOONBOX_TOKEN=" + other}}
	if out, err := envCLI.Run(e.ctx, "", "devices", "--endpoint", e.api.URL); err != nil || !strings.Contains(out, "* dev_") {
		t.Fatalf("devices with COCOONBOX_TOKEN: %v\n%s", err, out)
	}

	// A pasted token: kept as paste, and logout leaves it valid.
	if out, err := cli.Run(e.ctx, other+"\n", "login", "--token-stdin", "--endpoint", e.api.URL); err != nil {
		t.Fatalf("login --token-stdin: %v\n%s", err, out)
	}
	if out, err := cli.Run(e.ctx, "", "logout", "--endpoint", e.api.URL); err != nil || !strings.Contains(out, "stays valid") {
		t.Fatalf("logout of a pasted token: %v\n%s", err, out)
	}
	if _, err := harness.Account(e.api.URL, other).ListDevices(e.ctx, connect.NewRequest(&controlv1.ListDevicesRequest{})); err != nil {
		t.Fatalf("the pasted token stopped working after logout: %v", err)
	}

	// Revoke the other device from the CLI signed in with it; its next call is refused.
	cli.Run(e.ctx, other+"\n", "login", "--token-stdin", "--endpoint", e.api.URL)
	list, _ := harness.Account(e.api.URL, other).ListDevices(e.ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
	if len(list.Msg.GetDevices()) != 1 {
		t.Fatalf("devices: %v", list)
	}
	id := list.Msg.Devices[0].Id
	if out, err := cli.Run(e.ctx, "", "devices", "revoke", id, "--endpoint", e.api.URL); err != nil || !strings.Contains(out, "Revoked "+id) {
		t.Fatalf("devices revoke: %v\n%s", err, out)
	}
	out, err := cli.Run(e.ctx, "", "devices", "--endpoint", e.api.URL)
	if err == nil || !strings.Contains(out, "run cocoonbox login") {
		t.Fatalf("the CLI's call after its device was revoked: %v\n%s", err, out)
	}
	if out, err := cli.Run(e.ctx, "", "devices", "revoke", id, "--endpoint", e.api.URL); err == nil {
		t.Fatalf("revoking a device gone succeeded:\n%s", out)
	}

	// A browser token (made here through the token endpoint, as the CLI
	// does) is revoked by logout.
	mine := e.device(c, "this machine")
	writeLogin(t, cli, e.api.URL, mine, login.SourceBrowser)
	if out, err := cli.Run(e.ctx, "", "logout", "--endpoint", e.api.URL); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("logout of a browser token: %v\n%s", err, out)
	}
	_, err = harness.Account(e.api.URL, mine).ListDevices(e.ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("the browser token after logout: %v, want UNAUTHENTICATED", err)
	}
}

func writeLogin(t *testing.T, cli harness.CLI, endpoint, token, source string) {
	t.Helper()
	path := filepath.Join(cli.ConfigDir, "cocoonbox", "cli.json")
	f, err := login.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Endpoint = endpoint
	f.Endpoints[endpoint] = login.Saved{Token: token, Source: source}
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
}

// Deny in the browser: the CLI says so and what to do, stores nothing, and
// no device is made.
func TestCLIBrowserSignInDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cli := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir()}
	out, err := cli.LoginDenied(e.ctx, e.browser(), e.api.URL, "alice", password)
	if err == nil || !strings.Contains(out, "denied in the browser") || !strings.Contains(out, "cocoonbox login again") {
		t.Fatalf("cocoonbox login, denied: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cli.ConfigDir, "cocoonbox", "cli.json")); err == nil {
		t.Fatal("a denied login wrote cli.json")
	}
	status, body, _ := e.console("alice").Do(e.ctx, "GET", "/cb/api/devices", nil)
	if status != 200 || strings.TrimSpace(body) != "[]" {
		t.Fatalf("devices after a denied login: %d %s", status, body)
	}
}
