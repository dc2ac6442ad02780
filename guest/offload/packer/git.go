// Package packer is the box packer's verbs (Contract: Offload, Verbs):
// begin's preflight and the taking of the copy, send's steps, end, post
// and what they share. The command line is guest/cmd/cocoonbox-agent.
package packer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// git runs git in dir with extra environment; stderr is kept for the
// error. Nothing it prints reaches the verb's stdout.
func git(dir string, env []string, stdin io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// refs is the copy's refs as {"<ref>":"<oid>"} (begin's refs field).
func refs(dir string) map[string]string {
	out := map[string]string{}
	s, err := git(dir, nil, nil, "for-each-ref", "--format=%(refname) %(objectname)")
	if err != nil {
		return out
	}
	for _, l := range strings.Split(s, "\n") {
		if ref, oid, ok := strings.Cut(l, " "); ok {
			out[ref] = oid
		}
	}
	return out
}

// ignoredDirs is the copy's git-ignored directories relative to it, as
// `git ls-files -oi --exclude-standard --directory` lists those ending in
// / (begin's ignored, and the state excludes).
func ignoredDirs(dir string) []string {
	out := []string{}
	s, err := git(dir, nil, nil, "ls-files", "-oi", "--exclude-standard", "--directory")
	if err != nil {
		return out
	}
	for _, l := range strings.Split(s, "\n") {
		if strings.HasSuffix(l, "/") {
			out = append(out, l)
		}
	}
	return out
}

func isGitDir(dir string) bool {
	fi, err := os.Stat(dir + "/.git")
	return err == nil && fi.IsDir()
}
