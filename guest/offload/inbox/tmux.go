package inbox

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// tmux runs the tmux client against the user's default server, the one
// `tmux attach -t cb-off-…` reaches (Contract: Offload, Watching). Targets
// are written "=name:" so a session name never matches another by prefix.
// conf, when set, is the pinned config every command passes with -f, so a
// server the inbox starts never reads the user's ~/.tmux.conf.
type tmux struct{ conf string }

// Config is the inbox's pinned tmux config (Deliver 5 of issue 22): a
// server that the inbox starts reads it instead of ~/.tmux.conf, where a
// remain-on-exit on kept a dead CLI's pane, and so its session, alive.
const Config = `# cocoonbox-offload-inbox's tmux server: started with -f this file, never
# the user's ~/.tmux.conf (the inbox rewrites it at every start).
# A pane whose CLI exited closes, and its session with it: a CLI that dies
# without a hook is seen stopped.
set -g remain-on-exit off
# The pane runs the user's login shell, tmux's default, on whose PATH the
# preflight found the CLI.
set -g default-command ""
`

func (t tmux) run(stdin []byte, args ...string) (string, error) {
	if t.conf != "" {
		args = append([]string{"-f", t.conf}, args...)
	}
	cmd := exec.Command("tmux", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func target(session string) string { return "=" + session + ":" }

// hasSession says whether the session exists.
func (t tmux) hasSession(session string) bool {
	_, err := t.run(nil, "has-session", "-t", "="+session)
	return err == nil
}

// alive says whether the session exists and its pane's process has not
// exited (a dead pane that a remain-on-exit keeps is not alive).
func (t tmux) alive(session string) bool {
	out, err := t.run(nil, "display-message", "-p", "-t", target(session), "#{pane_dead}")
	return err == nil && strings.TrimSpace(out) == "0"
}

// newSession starts a detached session whose one pane runs the user's
// login shell (tmux's default) in dir, with env in the session's
// environment. Its window's remain-on-exit is set off, since a server the
// user started first has read the user's config, not ours.
func (t tmux) newSession(session, dir string, env []string) error {
	args := []string{"new-session", "-d", "-s", session, "-c", dir, "-x", "200", "-y", "50"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	if _, err := t.run(nil, args...); err != nil {
		return err
	}
	_, err := t.run(nil, "set-option", "-w", "-t", target(session), "remain-on-exit", "off")
	return err
}

// typeLine types line literally into the pane and presses Enter.
func (t tmux) typeLine(session, line string) error {
	if _, err := t.run(nil, "send-keys", "-t", target(session), "-l", line); err != nil {
		return err
	}
	return t.key(session, "Enter")
}

// key sends one named key (Enter, Escape).
func (t tmux) key(session, key string) error {
	_, err := t.run(nil, "send-keys", "-t", target(session), key)
	return err
}

// loadBuffer puts body into the named paste buffer.
func (t tmux) loadBuffer(buf string, body []byte) error {
	_, err := t.run(body, "load-buffer", "-b", buf, "-")
	return err
}

// pasteBuffer pastes the named buffer as a bracketed paste (-p: the CLI
// sees one paste, so the newlines in it do not submit) and deletes it (-d:
// a buffer that is gone after a crash was pasted).
func (t tmux) pasteBuffer(session, buf string) error {
	_, err := t.run(nil, "paste-buffer", "-p", "-d", "-b", buf, "-t", target(session))
	return err
}

// hasBuffer says whether the named buffer exists.
func (t tmux) hasBuffer(buf string) bool {
	out, err := t.run(nil, "list-buffers", "-F", "#{buffer_name}")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(out, "\n") {
		if l == buf {
			return true
		}
	}
	return false
}

// pane reports the pane's process id, whether it is dead, and its window's
// last activity in milliseconds since the epoch.
func (t tmux) pane(session string) (pid int, activityMs int64, err error) {
	out, err := t.run(nil, "display-message", "-p", "-t", target(session), "#{pane_pid} #{window_activity}")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("tmux display-message: unexpected %q", out)
	}
	pid, _ = strconv.Atoi(f[0])
	sec, _ := strconv.ParseInt(f[1], 10, 64)
	return pid, sec * 1000, nil
}

// kill ends the session.
func (t tmux) kill(session string) error {
	_, err := t.run(nil, "kill-session", "-t", "="+session)
	return err
}
