package feature

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
)

// upResult is the one JSON line `devcontainer up` prints on stdout.
type upResult struct {
	Outcome     string `json:"outcome"`
	ContainerID string `json:"containerId"`
	Message     string `json:"message"`
	Description string `json:"description"`
}

// devcontainerUp runs the CLI's up of the facade config for workspace ws
// and returns the primary container's id. The CLI gets a fixed
// environment (no COMPOSE_* or DOCKER_* of the caller's but DOCKER_HOST):
// its PATH, HOME for Docker's CLI plugins. It runs in a process group of
// its own, killed whole when ctx ends or upTimeout passes and once the CLI
// has exited, so no Compose it started outlives it.
func devcontainerUp(ctx context.Context, cli, ws, config string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "up", "--workspace-folder", ws, "--config", config)
	cmd.Env = []string{"PATH=" + filepath.Dir(cli) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home()}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	// The CLI and what it starts (docker compose, the docker CLI) are
	// one process group, killed whole when ctx ends and once the CLI has
	// exited: a Compose the CLI left running would create containers and
	// volumes after a failed launch's removal had run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = cliWaitDelay
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res upResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Outcome != "success" || res.ContainerID == "" {
		return "", fmt.Errorf("devcontainer up: %v: %s %s\n%s", runErr, res.Message, res.Description, cliLog(errb.Bytes()))
	}
	return res.ContainerID, nil
}

func home() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return "/root"
}

// cliWaitDelay bounds how long the CLI's output pipes may stay open once
// its process group was killed.
const cliWaitDelay = 10 * time.Second

// Bounds of the CLI's log kept in an error: its head (what it ran first,
// and a Compose configuration error, which it prints early) and its tail
// (the step that failed).
const (
	logHead = 1500
	logTail = 2500
)

// cliLog is the Dev Containers CLI's stderr as an error keeps it: without
// its Node stack trace (lines "    at ..."), the head and the tail when
// it is longer than both, the cut said.
func cliLog(stderr []byte) string {
	var kept []string
	for _, line := range strings.Split(string(stderr), "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if stack := trimmed != line && strings.HasPrefix(trimmed, "at "); !stack {
			kept = append(kept, line)
		}
	}
	s := strings.TrimSpace(strings.Join(kept, "\n"))
	if len(s) <= logHead+logTail {
		return s
	}
	return fmt.Sprintf("%s\n[... %d bytes of the CLI's log ...]\n%s", s[:logHead], len(s)-logHead-logTail, s[len(s)-logTail:])
}

// withStartErrors adds to err, a failed `devcontainer up`, the engine's
// start errors of the project's containers (engine.StartErrors): Compose's
// own message when a container could not start (a port taken, a mount
// refused), which the CLI does not print.
func withStartErrors(ctx context.Context, c *client.Client, project string, err error) error {
	if msgs := engine.StartErrors(context.WithoutCancel(ctx), c, project); len(msgs) > 0 {
		return fmt.Errorf("%w\nthe engine: %s", err, strings.Join(msgs, "; "))
	}
	return err
}
