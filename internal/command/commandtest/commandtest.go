// Package commandtest checks a binary's command tree against the
// conventions of internal/command: every command's --help and usage
// error against golden files, the bash completion script loaded by bash,
// and exit 130 on SIGINT.
package commandtest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cocoonbox/cocoonbox/internal/command"
	"github.com/cocoonbox/cocoonbox/internal/syncbuf"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// update is go test's -update: Golden writes the golden files instead of
// comparing against them.
var update = flag.Bool("update", false, "rewrite testdata/help/*.golden and testdata/usage.golden")

// Commands are the visible commands of the tree newRoot makes, the root
// first, each as its words ("box", "create"); cobra's help command and
// completion's per-shell commands are cobra's own and left out.
func Commands(root *cobra.Command) [][]string {
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		out = append(out, path)
		if c.Name() == "completion" {
			return
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub, append(append([]string{}, path...), sub.Name()))
			}
		}
	}
	walk(root, nil)
	return out
}

// Golden checks every command's --help and its usage error (an unknown
// flag: the fault and one line pointing at the command's --help) against
// testdata/help/NAME[_SUB...].golden and testdata/usage.golden, writing
// them instead under go test -update. Each help must be
// distinct, name the command's path and every flag of its own, and exit
// 0; each usage error must be exit 2 and two lines.
func Golden(t *testing.T, newRoot func() *cobra.Command) {
	t.Helper()
	name := newRoot().Name()
	seen := map[string]string{}
	var usage bytes.Buffer
	for _, path := range Commands(newRoot()) {
		words := append([]string{name}, path...)
		file := filepath.Join("testdata", "help", strings.Join(words, "_")+".golden")
		var out, errs bytes.Buffer
		root := newRoot()
		err := command.Run(context.Background(), root, append(append([]string{}, path...), "--help"), strings.NewReader(""), &out, &errs)
		if err != nil || errs.Len() != 0 {
			t.Errorf("%s --help: %v, stderr %q", strings.Join(words, " "), err, errs.String())
		}
		help := out.String()
		if other, ok := seen[help]; ok {
			t.Errorf("%s --help prints what %s --help does", strings.Join(words, " "), other)
		}
		seen[help] = strings.Join(words, " ")
		cmd, _, _ := root.Find(path)
		if !strings.Contains(help, strings.Join(words, " ")) {
			t.Errorf("%s --help does not name the command:\n%s", strings.Join(words, " "), help)
		}
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && !strings.Contains(help, "--"+f.Name) {
				t.Errorf("%s --help does not name its flag --%s:\n%s", strings.Join(words, " "), f.Name, help)
			}
		})
		compare(t, file, help, *update)

		errs.Reset()
		out.Reset()
		err = command.Run(context.Background(), newRoot(), append(append([]string{}, path...), "--no-such-flag"), strings.NewReader(""), &out, &errs)
		code := command.Report(&errs, name, err)
		lines := strings.Split(strings.TrimSuffix(errs.String(), "\n"), "\n")
		want := "run '" + strings.Join(words, " ") + " --help' for usage"
		if code != command.Usage || len(lines) != 2 || lines[1] != want {
			t.Errorf("%s --no-such-flag: exit %d, stderr %q; want exit 2, the fault and %q", strings.Join(words, " "), code, errs.String(), want)
		}
		usage.WriteString("$ " + strings.Join(words, " ") + " --no-such-flag\n" + errs.String())
	}
	compare(t, filepath.Join("testdata", "usage.golden"), usage.String(), *update)
}

// compare checks got against the golden file, or writes it when update.
func compare(t *testing.T, file, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Errorf("%v (go test -update writes it)", err)
		return
	}
	if string(want) != got {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s", file, got)
	}
}

// Says is the ready of Interrupted for a command that says s on stderr
// once it waits.
func Says(s string) func(string) bool {
	return func(stderr string) bool { return strings.Contains(stderr, s) }
}

// BashCompletion checks that bash loads the script of `BIN completion
// bash` (bin and env start the binary) and then completes name.
func BashCompletion(t *testing.T, name string, bin []string, env []string) {
	t.Helper()
	quoted := make([]string, len(bin))
	for i, w := range bin {
		quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	script := "set -e; source <(" + strings.Join(quoted, " ") + " completion bash); complete -p " + name
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "__start_"+name) || !strings.HasSuffix(strings.TrimSpace(string(out)), " "+name) {
		t.Fatalf("bash did not load %s's completion: %v\n%s", name, err, out)
	}
}

// Interrupted starts cmd, waits until ready holds of its stderr (the
// command is waiting), sends SIGINT and checks it exits 130.
func Interrupted(t *testing.T, cmd *exec.Cmd, ready func(stderr string) bool) {
	t.Helper()
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	wait.Eventually(t, time.Minute, fmt.Sprintf("%v to wait", cmd.Args), func() (bool, string) {
		return ready(stderr.String()), stderr.String()
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	exited := false
	wait.Eventually(t, time.Minute, fmt.Sprintf("%v to exit after SIGINT", cmd.Args), func() (bool, string) {
		select {
		case err = <-done:
			exited = true
		default:
		}
		return exited, stderr.String()
	})
	if code := cmd.ProcessState.ExitCode(); code != command.Interrupted {
		t.Fatalf("%v after SIGINT: exit %d (%v), want 130; stderr:\n%s", cmd.Args, code, err, stderr.String())
	}
}
