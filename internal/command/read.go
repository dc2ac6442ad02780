package command

import (
	"context"
	"io"
	"os"

	"golang.org/x/term"
)

// Read runs read, a read of stdin that no context can stop (a prompt, a
// pipe), so that the end of ctx (Ctrl-C) ends the wait at once: the
// terminal's state is put back as it was before read (term.ReadPassword
// leaves echo off until it returns) and ctx's error is returned, while
// read stays blocked until the process exits. Without it a command at a
// prompt would see its context end and still wait for a line.
func Read(ctx context.Context, stdin io.Reader, read func() error) error {
	restore := func() {}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if st, err := term.GetState(int(f.Fd())); err == nil {
			restore = func() { term.Restore(int(f.Fd()), st) }
		}
	}
	done := make(chan error, 1)
	go func() { done <- read() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		restore()
		return ctx.Err()
	}
}
