package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// rshDoor is the demo's way into the api's box: `cocoonbox rsh --box NAME
// -- LINE`, the product's own path (Contract: Remote command (Session.Exec,
// cocoonbox rsh)). rsh runs LINE as user in a login shell; a command for
// root goes through user's passwordless sudo (Contract: Guest (image) ↔
// agent, desktop user), one for another user through sudo -u.
func rshDoor(cli harness.CLI, endpoint, name string) box.Door {
	return func(c box.Cmd) (box.Result, error) {
		var line string
		switch {
		case c.User == "user" && c.Login:
			line = strings.Join(c.Args, " ")
		case c.User == "user":
			line = quote(c.Args)
		case c.User == "":
			line = "sudo -n -- " + quote(c.Args)
		default:
			line = "sudo -n -u " + quote([]string{c.User}) + " -- " + quote(c.Args)
		}
		timeout := c.Timeout
		if timeout == 0 {
			timeout = 2 * time.Minute
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli.Bin, "rsh", "--endpoint", endpoint, "--box", name, "--", line)
		cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+cli.ConfigDir), cli.Env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, c.Stdin
		cmd.WaitDelay = 5 * time.Second
		err := cmd.Run()
		res := box.Result{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: -1}
		var ee *exec.ExitError
		switch {
		case ctx.Err() != nil:
			return res, fmt.Errorf("cocoonbox rsh --box %s -- %s: timed out after %v", name, line, timeout)
		case err == nil:
			res.ExitCode = 0
		case errors.As(err, &ee) && ee.Exited():
			res.ExitCode = ee.ExitCode()
		default:
			return res, fmt.Errorf("cocoonbox rsh --box %s -- %s: %w", name, line, err)
		}
		return res, nil
	}
}

// quote makes args one line for a POSIX shell, each word in single quotes.
func quote(args []string) string {
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(words, " ")
}
