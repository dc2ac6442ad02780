//go:build booted

package session_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// A tty of the start's size with its TERM; a resize reaches the command's
// terminal before the stdin sent after it.
func TestTTYSizeTermAndResize(t *testing.T) {
	s := client(aliceToken).Exec(context.Background())
	_ = s.Send(start(&controlv1.SessionExecStart{Command: []string{`stty size; echo "$TERM"; read x; stty size`},
		Tty: &controlv1.TerminalSize{Rows: 24, Cols: 80}, Term: "screen-256color"}))
	if m, err := s.Receive(); err != nil || !m.GetStarted() {
		t.Fatalf("started: %v %v", m, err)
	}
	var out bytes.Buffer
	resized := false
	for {
		m, err := s.Receive()
		if err != nil {
			t.Fatalf("after %q: %v", out.String(), err)
		}
		out.Write(m.GetStdout())
		if !resized && strings.Contains(out.String(), "screen-256color") {
			resized = true
			_ = s.Send(&controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_Resize{Resize: &controlv1.TerminalSize{Rows: 40, Cols: 100}}})
			_ = s.Send(&controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_Stdin{Stdin: []byte("go\n")}})
		}
		if e := m.GetExit(); e != nil {
			if e.GetCode() != 0 || len(m.GetStderr()) != 0 {
				t.Fatalf("exit %v", e)
			}
			break
		}
	}
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	if !strings.HasPrefix(got, "24 80\nscreen-256color\n") || !strings.HasSuffix(got, "40 100\n") {
		t.Fatalf("the terminal said %q", got)
	}
}

// rsh --tty on a real terminal: its size goes with the start, a SIGWINCH
// sends the new one, TERM is passed, and the local terminal is raw, so ^C
// reaches the remote command as a byte instead of ending rsh (130).
func TestRshTTYRawModeResizeAndTerm(t *testing.T) {
	cmd := rsh(context.Background(), []string{"TERM=screen-256color"}, "--tty", "--",
		`echo "$TERM"; stty size; while read x; do stty size; [ "$x" = q ] && break; done; stty raw -echo; echo ready; head -c 1 | od -An -tx1`)
	cmd.SysProcAttr = nil // pty.Start makes it a session leader with the terminal
	master, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 90})
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	seen := func(want string, poke func()) {
		t.Helper()
		wait.Eventually(t, 30*time.Second, fmt.Sprintf("the terminal showing %q", want), func() (bool, string) {
			mu.Lock()
			got := out.String()
			mu.Unlock()
			if strings.Contains(got, want) {
				return true, ""
			}
			if poke != nil {
				poke()
			}
			return false, fmt.Sprintf("%q", got)
		})
	}
	seen("screen-256color\r\n30 90\r\n", nil)
	if err := pty.Setsize(master, &pty.Winsize{Rows: 50, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	// Each Enter prints the size; the resize travels on its own, so press
	// until the new size shows.
	seen("50 120", func() { _, _ = master.Write([]byte("\r")) })
	_, _ = master.Write([]byte("q\r"))
	seen("ready", nil)
	_, _ = master.Write([]byte{3})
	err = cmd.Wait()
	if code := exitCode(err); code != 0 {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("^C: rsh exited %d (%v), want the remote od's 0; the terminal: %q", code, err, out.String())
	}
	seen(" 03", nil)
}

// The Exec terminfo upload (Contract: Offload, cbdesk v21): rsh --tty with
// a TERM the box has no entry for gives the box the local one, so the
// box's programs know the terminal; the entry is user's (~/.terminfo).
func TestRshTTYUploadsAnUnknownTerminfo(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("cocoonbox-test|a terminal only this test knows,\n\tuse=xterm-256color,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tic", "-x", "-o", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("tic here: %v: %s", err, out)
	}
	inBox(t, "rm -rf /home/user/.terminfo")
	if out := inBox(t, "runuser -l user -c 'infocmp cocoonbox-test' 2>&1 || true"); !strings.Contains(out, "couldn't open terminfo file") && !strings.Contains(out, "not found") {
		t.Fatalf("the box knows cocoonbox-test before the upload: %s", out)
	}
	cmd := rsh(context.Background(), []string{"TERM=cocoonbox-test", "TERMINFO=" + dir}, "--tty", "--",
		`echo "$TERM"; infocmp -x cocoonbox-test | head -2 | tail -1; tput colors`)
	out, err := cmd.CombinedOutput()
	got := strings.ReplaceAll(string(out), "\r\n", "\n")
	if err != nil || !strings.HasPrefix(got, "cocoonbox-test\ncocoonbox-test|a terminal only this test knows,\n256\n") {
		t.Fatalf("rsh --tty with TERM=cocoonbox-test: %v: %q", err, got)
	}
	if owner := inBox(t, "stat -c %U /home/user/.terminfo"); owner != "user\n" {
		t.Errorf("~/.terminfo is %q's", owner)
	}
}
