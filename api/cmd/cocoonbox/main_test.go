package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/command"
	"github.com/cocoonbox/cocoonbox/internal/version"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
)

// runCLI runs the CLI in-process with its own cli.json directory.
func runCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out)
	return out.String(), err
}

// asCLI set in a test binary's environment makes it the cocoonbox CLI
// (main with the arguments after the test flags' "--"), so a test runs
// the CLI as a process of its own, with an environment of its own
// (SSL_CERT_FILE), without building it.
const asCLI = "COCOONBOX_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		main()
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "cocoonbox-cli-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	os.Unsetenv("COCOONBOX_ENDPOINT")
	os.Unsetenv("COCOONBOX_INVITE_TOKEN")
	os.Unsetenv("COCOONBOX_INVITE_TOKEN_FILE")
	// The invite tests run the api's signup on real PostgreSQL (a
	// throwaway cluster unless make test names one).
	code := dbtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestUsageErrorsNameTheInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"login", "--bogus"}, "bogus"},
		{[]string{"login", "extra"}, `unexpected argument "extra"`},
		{[]string{"login", "--invite", "cbi_12"}, `--invite "cbi_12"`},
		{[]string{"login", "--device-name", strings.Repeat("x", 65)}, "--device-name"},
		{[]string{"login", "--endpoint", "ftp://x"}, `"ftp://x"`},
		{[]string{"devices", "remove", "dev_1"}, `unknown devices subcommand "remove"; did you mean revoke?`},
		{[]string{"boxs"}, `unknown command "boxs" for "cocoonbox"; did you mean box or boxes?`},
		{[]string{"devices", "revoke", "dev_1", "--endpoint", "ftp://x"}, `"ftp://x"`}, // flags after the arguments
		{[]string{"box"}, "box needs a subcommand"},
		{[]string{"box", "reboot"}, `unknown box subcommand "reboot" (want create, delete, ensure`},
		{[]string{"box", "create"}, "box create needs the box's NAME"},
		{[]string{"box", "delete", "--confirm"}, "box delete needs the box's NAME"},
		{[]string{"box", "delete", "demo"}, `box delete "demo" needs --confirm`},
		{[]string{"box", "upgrade", "demo"}, "box upgrade needs --confirm"},
		{[]string{"box", "save", "a", "b"}, `unexpected argument "b"`},
		{[]string{"box", "hibernate", "--image", "cbdesk:v1-base"}, "image"}, // only create takes --image
		{[]string{"boxes", "demo"}, `unexpected argument "demo"`},
		{[]string{"images", "--bogus"}, "bogus"},
		{[]string{"screen", "a", "b"}, "one box at a time"},
		{[]string{"screen", "--port", "70000", "desk"}, "--port 70000: a TCP port is 1 to 65535"},
		{[]string{"screen", "--port", "-1"}, "--port -1"},
	} {
		_, err := runCLI(t, "", c.args...)
		var ue command.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cocoonbox %v: %v, want a usage error naming %q", c.args, err, c.want)
		}
	}
}

func TestHelpAnswers(t *testing.T) {
	out, err := runCLI(t, "", "--help")
	if err != nil || !strings.Contains(out, "login") || !strings.Contains(out, "devices") || !strings.Contains(out, "completion") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"boxes", "--help"}, {"images", "-h"}, {"box", "--help"}, {"box", "status", "--help"},
		{"box", "create", "--help"}, {"box", "ensure", "-h"}, {"box", "hibernate", "--help"}, {"box", "save", "--help"},
		{"box", "upgrade", "--help"}, {"box", "delete", "--help"}, {"screen", "--help"}} {
		out, err := runCLI(t, "", args...)
		if err != nil || !strings.Contains(out, "Usage:\n  cocoonbox "+args[0]) {
			t.Errorf("cocoonbox %v: %v\n%s", args, err, out)
		}
	}
}

// Without a login the commands that need a token say how to get one, and
// nothing is written.
func TestNotSignedInSaysToLogIn(t *testing.T) {
	for _, args := range [][]string{{"devices"}, {"logout"}, {"devices", "revoke", "dev_0123456789abcdef"},
		{"boxes"}, {"images"}, {"box", "status"}, {"box", "create", "demo"}, {"box", "delete", "demo", "--confirm"}, {"screen", "demo"}} {
		_, err := runCLI(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), "run cocoonbox login") {
			t.Errorf("cocoonbox %v: %v, want it to say to log in", args, err)
		}
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "cocoonbox", "cli.json")); err == nil {
		t.Fatal("cli.json was written by a command that failed")
	}
}

func TestTokenStdinRefusesWhatIsNoToken(t *testing.T) {
	for _, in := range []string{"", "hello\n", "cb_123\n", "cbit_" + strings.Repeat("a", 64)} {
		_, err := runCLI(t, in, "login", "--token-stdin")
		if err == nil || !strings.Contains(err.Error(), "cb_ and 64 hex") {
			t.Errorf("--token-stdin with %q: %v", in, err)
		}
	}
}

func TestHostNameIsCutToTheDeviceNameBound(t *testing.T) {
	if n := hostName(); n == "" || len(n) > 64 {
		t.Fatalf("hostName() = %q", n)
	}
}

// An api that does not answer fails the login at once, before any browser.
func TestLoginToAnUnreachableAPIFailsAtOnce(t *testing.T) {
	endpoint := closedEndpoint(t)
	_, err := runCLI(t, "", "login", "--no-browser", "--endpoint", endpoint)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the api at "+endpoint) {
		t.Fatalf("login to a closed port: %v", err)
	}
}

func TestVersionNamesItself(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		if out, err := runCLI(t, "", arg); err != nil || out != version.String("cocoonbox")+"\n" {
			t.Errorf("cocoonbox %s: %q, %v, want %q", arg, out, err, version.String("cocoonbox"))
		}
	}
}

// closedEndpoint is the URL of a port nothing listens on: a dead api.
func closedEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}
