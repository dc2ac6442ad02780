package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// tmuxSession runs command in a real terminal (tmux) and reads its screen.
type tmuxSession struct {
	t    *testing.T
	name string
}

func newTmux(t *testing.T, command string) *tmuxSession {
	t.Helper()
	s := &tmuxSession{t: t, name: fmt.Sprintf("cbapi-%d", time.Now().UnixNano())}
	if out, err := exec.Command("tmux", "new-session", "-d", "-s", s.name, "-x", "160", "-y", "40", command+"; echo EXIT=$?; sleep 60").CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "kill-session", "-t", s.name).Run() })
	return s
}

func (s *tmuxSession) screen() string {
	out, _ := exec.Command("tmux", "capture-pane", "-p", "-t", s.name).Output()
	return string(out)
}

// waitFor polls the screen until it shows want (30 s at most).
func (s *tmuxSession) waitFor(want string) {
	s.t.Helper()
	wait.Eventually(s.t, 30*time.Second, fmt.Sprintf("the terminal showing %q", want), func() (bool, string) {
		screen := s.screen()
		return strings.Contains(screen, want), screen
	})
}

func (s *tmuxSession) typeLine(text string) {
	s.t.Helper()
	if out, err := exec.Command("tmux", "send-keys", "-t", s.name, "-l", text).CombinedOutput(); err != nil {
		s.t.Fatalf("send-keys: %v\n%s", err, out)
	}
	exec.Command("tmux", "send-keys", "-t", s.name, "Enter").Run()
}

// At a terminal `users add` asks for the password twice without echoing
// it, and refuses two that differ, adding nothing.
func TestUsersAddAtATerminalAsksTwiceWithoutEcho(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	s := newTmux(t, bin+" users add erin --state-dir "+dir)
	s.waitFor("Password for erin:")
	s.typeLine("correct horse")
	s.waitFor("Again:")
	s.typeLine("another horse")
	s.waitFor("EXIT=1")
	if !strings.Contains(s.screen(), "the two passwords differ; nothing changed") {
		t.Fatalf("a mismatch is not told:\n%s", s.screen())
	}
	s = newTmux(t, bin+" users add erin --state-dir "+dir)
	s.waitFor("Password for erin:")
	s.typeLine("correct horse")
	s.waitFor("Again:")
	s.typeLine("correct horse")
	s.waitFor("EXIT=0")
	if screen := s.screen(); !strings.Contains(screen, "added erin") || strings.Contains(screen, "horse") {
		t.Fatalf("the terminal after the add (the password must not show):\n%s", screen)
	}
	if out, _, _ := api(t, "", "users", "list", "--state-dir", dir); strings.Count(out, "erin") != 1 {
		t.Fatalf("users:\n%s", out)
	}
}
