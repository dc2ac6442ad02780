package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// inRepo makes a git repository, its own XDG_DATA_HOME and
// CLAUDE_CONFIG_DIR, and runs the test there.
func inRepo(t *testing.T) string {
	top := t.TempDir()
	if out, err := exec.Command("git", "-C", top, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("CLAUDE_CONFIG_DIR", t.TempDir())
	t.Chdir(top)
	return top
}

// Contract: Offload, Directories and Entry points: handover-path is the
// repo's handover.md under $XDG_DATA_HOME/cocoonbox/offload (0700), and
// --handover-prompt asks for every heading there.
func TestHandoverPathAndPrompt(t *testing.T) {
	inRepo(t)
	out, err := runCLI(t, "", "offload", "handover-path")
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimSpace(out)
	if !strings.HasPrefix(path, filepath.Join(os.Getenv("XDG_DATA_HOME"), "cocoonbox/offload")+"/") || filepath.Base(path) != "handover.md" {
		t.Errorf("handover-path %q", path)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the repo's directory: %v %v", fi.Mode(), err)
	}
	prompt, err := runCLI(t, "", "offload", "--handover-prompt")
	if err != nil || !strings.Contains(prompt, path) {
		t.Fatalf("--handover-prompt: %v\n%s", err, prompt)
	}
	for _, h := range offload.HandoverHeadings {
		if !strings.Contains(prompt, h) {
			t.Errorf("the prompt lacks %q", h)
		}
	}
}

// Bad input of the offload commands: a usage error (exit 2) naming the
// input, or a refusal (exit 3) with nothing changed.
func TestOffloadBadInput(t *testing.T) {
	inRepo(t)
	for _, args := range [][]string{{"offload", "--bogus"}, {"offload", "extra"}, {"back", "extra"}, {"offload", "secrets", "add"}, {"offload", "secrets", "frob", "x"}, {"setup", "codex"}} {
		var ue command.UsageError
		if _, err := runCLI(t, "", args...); !errors.As(err, &ue) {
			t.Errorf("cocoonbox %v: %v, want a usage error", args, err)
		}
	}
	if _, err := runCLI(t, "", "offload", "secrets", "add", "file:../outside"); err == nil || !strings.Contains(err.Error(), `"file:../outside"`) {
		t.Errorf("a secret entry outside the repository: %v", err)
	}
	out, err := runCLI(t, "", "back", "--json")
	if code, ok := err.(exitCode); !ok || code != 3 || !strings.Contains(out, `"code":"refused"`) || !strings.Contains(out, "nothing to bring back") {
		t.Errorf("back with nothing in flight: %v %s", err, out)
	}
	out, err = runCLI(t, "", "offload", "--json")
	if code, ok := err.(exitCode); !ok || code != 3 || !strings.Contains(out, "no hand-over at") {
		t.Errorf("offload without a hand-over: %v %s", err, out)
	}
	t.Chdir(t.TempDir())
	out, err = runCLI(t, "", "offload", "--json")
	if code, ok := err.(exitCode); !ok || code != 3 || !strings.Contains(out, `"check":"Not a git repository"`) {
		t.Errorf("offload outside a repository: %v %s", err, out)
	}
}

// secrets add, list and remove keep names in repos.json, 0600.
func TestOffloadSecrets(t *testing.T) {
	inRepo(t)
	for _, e := range []string{"file:.env", "aws", "file:.env"} {
		if _, err := runCLI(t, "", "offload", "secrets", "add", e); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := runCLI(t, "", "offload", "secrets", "list")
	if out != "aws\nfile:.env\n" {
		t.Errorf("list after adds: %q", out)
	}
	runCLI(t, "", "offload", "secrets", "remove", "aws")
	out, _ = runCLI(t, "", "offload", "secrets", "list", "--json")
	if !strings.Contains(out, `"secrets":["file:.env"]`) {
		t.Errorf("list --json after remove: %q", out)
	}
	fi, err := os.Stat(filepath.Join(os.Getenv("XDG_DATA_HOME"), "cocoonbox/offload/repos.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("repos.json: %v %v", fi, err)
	}
}

// Every --help prints the command's usage on stdout; setup claude installs the
// plugin's two commands.
func TestOffloadHelpAndSetup(t *testing.T) {
	inRepo(t)
	for _, args := range [][]string{{"offload", "--help"}, {"back", "--help"}, {"offload", "secrets", "--help"}, {"setup", "--help"}} {
		out, err := runCLI(t, "", args...)
		if err != nil || !strings.Contains(out, "Usage:\n  cocoonbox "+strings.Join(args[:len(args)-1], " ")) {
			t.Errorf("%v: %q", args, out)
		}
	}
	if _, err := runCLI(t, "", "setup", "claude"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"offload.md", "back.md"} {
		data, err := os.ReadFile(filepath.Join(os.Getenv("CLAUDE_CONFIG_DIR"), "commands/cocoonbox", f))
		if err != nil || !strings.Contains(string(data), "cocoonbox ") {
			t.Errorf("%s: %v", f, err)
		}
	}
}
