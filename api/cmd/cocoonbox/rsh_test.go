package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// rsh reads its command line as ssh's is read: flags, then HOST, then the
// command, either as words (rsync -e) or as one string (git's simple
// variant); --box wins over HOST; the command's own flags stay its own.
func TestRshCommandLineAsRsyncAndGitGiveIt(t *testing.T) {
	for _, c := range []struct {
		args    []string
		box     string
		tty     bool
		command []string
	}{
		{[]string{"--", "ls", "-la"}, "", false, []string{"ls", "-la"}},
		{[]string{"--box", "dev", "--", "true"}, "dev", false, []string{"true"}},
		{[]string{"dev", "--", "uname", "-a"}, "dev", false, []string{"uname", "-a"}},
		{[]string{"--tty", "--box", "b", "--", "tmux", "attach"}, "b", true, []string{"tmux", "attach"}},
		// rsync -e "cocoonbox rsh --box dev" . box:/workspace/x/
		{[]string{"--box", "dev", "box", "rsync", "--server", "-logDtpre.iLsfxCIvu", ".", "/workspace/x/"}, "dev", false,
			[]string{"rsync", "--server", "-logDtpre.iLsfxCIvu", ".", "/workspace/x/"}},
		// rsync with user@box: adds -l user
		{[]string{"--box", "dev", "-l", "user", "box", "rsync", "--server", "."}, "dev", false, []string{"rsync", "--server", "."}},
		// GIT_SSH_COMMAND="cocoonbox rsh --box dev" GIT_SSH_VARIANT=simple
		{[]string{"--box", "dev", "box", "git-upload-pack '/workspace/x'"}, "dev", false, []string{"git-upload-pack '/workspace/x'"}},
		// no --box: HOST names the box
		{[]string{"mybox", "git-receive-pack '/w'"}, "mybox", false, []string{"git-receive-pack '/w'"}},
	} {
		a, err := parseRsh(c.args)
		if err != nil || a.box != c.box || a.tty != c.tty || fmt.Sprint(a.command) != fmt.Sprint(c.command) {
			t.Errorf("rsh %q: %+v %v, want box %q tty %v command %q", c.args, a, err, c.box, c.tty, c.command)
		}
	}
}

func TestRshBadUsageIsExit2NamingTheFault(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"box"}, "no command given"},
		{[]string{"--box", "b", "--"}, "no command given"},
		{[]string{"--", " ", ""}, "no command given"},
		{[]string{"--frob", "--", "true"}, "frob"},
		{[]string{"-l", "root", "box", "true"}, "-l root: commands in a box run as user only"},
	} {
		_, err := runCLI(t, "", append([]string{"rsh"}, c.args...)...)
		var ue command.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rsh %q: %v, want a usage error naming %q", c.args, err, c.want)
		}
	}
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("0", 64))
	t.Setenv("COCOONBOX_PING_AFTER", "often")
	if _, err := runCLI(t, "", "rsh", "--", "true"); err == nil || !strings.Contains(err.Error(), `COCOONBOX_PING_AFTER="often"`) {
		t.Errorf("a bad COCOONBOX_PING_AFTER: %v", err)
	}
}

func TestRshHelpIsUsageOnStdout(t *testing.T) {
	out, err := runCLI(t, "", "rsh", "--help")
	if err != nil || !strings.Contains(out, "Usage:\n  cocoonbox rsh [--box B] [--tty] [HOST] -- COMMAND...") {
		t.Fatalf("rsh --help: %v\n%s", err, out)
	}
}

// rsh's own failures have the project's exit codes and say what failed:
// not signed in is 1, an api that does not answer 69.
func TestRshOwnFailuresHaveTheirExitCodes(t *testing.T) {
	_, err := runCLI(t, "", "rsh", "--", "true")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != cli.Failed || !strings.Contains(ee.msg, "run cocoonbox login") {
		t.Errorf("rsh without a login: %#v", err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	ln.Close()
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("0", 64))
	_, err = runCLI(t, "", "rsh", "--endpoint", endpoint, "--", "true")
	if !errors.As(err, &ee) || ee.code != cli.Unavailable || !strings.Contains(ee.msg, "cannot reach the api at "+endpoint) {
		t.Errorf("rsh to a closed port: %#v", err)
	}
}
