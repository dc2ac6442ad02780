package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Issue 45, Deliver 3: a box operation's text progress goes to stderr,
// not stdout, and is not drawn in place when stderr is no terminal; with
// --json the lines are the answer, on stdout.
func TestProgressIsOnStderrAndNotDrawnForANonTTY(t *testing.T) {
	var stdout bytes.Buffer
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	if w, tty := progressTo(&stdout, stderr, false); w != stderr || tty {
		t.Errorf("text progress goes to %T (drawn %v), want stderr, not drawn (a file is no terminal)", w, tty)
	}
	if w, tty := progressTo(&stdout, stderr, true); w != &stdout || tty {
		t.Errorf("--json progress goes to %T (drawn %v), want stdout, not drawn", w, tty)
	}
}
