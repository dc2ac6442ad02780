package verbs

import (
	"os/exec"
	"strconv"
	"strings"
)

// tmuxClient is the little of tmux the verbs need (end).
type tmuxClient struct{}

func (tmuxClient) has(session string) bool {
	return exec.Command("tmux", "has-session", "-t", "="+session).Run() == nil
}

func (tmuxClient) send(session string, keys ...string) error {
	return exec.Command("tmux", append([]string{"send-keys", "-t", "=" + session + ":"}, keys...)...).Run()
}

func (tmuxClient) panePID(session string) int {
	out, err := exec.Command("tmux", "display-message", "-p", "-t", "="+session+":", "#{pane_pid}").Output()
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return pid
}

func (tmuxClient) kill(session string) error {
	return exec.Command("tmux", "kill-session", "-t", "="+session).Run()
}
