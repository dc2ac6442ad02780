package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/internal/syncbuf"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// The bug this names: with one run per change (a path unit starting a
// oneshot), the last change of a burst could land after the run's last
// look at the file and before the path unit watched again, and was never
// rendered. The watch must render the last of every burst, whatever the
// timing: here, 100 changes renamed into place as fast as they come, then
// the same written in place.
func TestWatchRendersTheLastChangeOfABurst(t *testing.T) {
	tmp := t.TempDir()
	env, dir := filepath.Join(tmp, "silkd.env"), filepath.Join(tmp, "vault")
	log := journal.New("cocoonbox-vault-test")
	// Warnings land here once each, whether journald runs (Echo) or not
	// (Stderr): the symlink's refusal below is waited for in it.
	logged := &syncbuf.Buffer{}
	log.Stderr, log.Echo = logged, logged
	stopR, stopW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	done := make(chan int)
	go func() { done <- watch(log, env, dir, func() { close(ready) }, int(stopR.Fd())) }()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("watch never said it was ready")
	}
	write := func(gen int, inPlace bool) {
		data := fmt.Sprintf("COCOONBOX_VAULT=\"GEN=g%d;; K%d=k;api.example.com;?key={}\"\n", gen, gen%7)
		if inPlace {
			if err := os.WriteFile(env, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.WriteFile(env+".tmp", []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(env+".tmp", env); err != nil {
			t.Fatal(err)
		}
	}
	waitGen := func(gen int) {
		t.Helper()
		want := fmt.Sprintf("export GEN='g%d'\n", gen)
		wait.Eventually(t, 10*time.Second, fmt.Sprintf("vault.sh holding %q", want), func() (bool, string) {
			got, _ := os.ReadFile(filepath.Join(dir, "vault.sh"))
			return strings.Contains(string(got), want), string(got)
		})
	}
	for gen := 1; gen <= 100; gen++ {
		write(gen, false)
	}
	waitGen(100)
	for gen := 101; gen <= 200; gen++ {
		write(gen, true)
	}
	waitGen(200)
	// A symlink renamed over the file is seen and refused, not followed:
	// it points at a valid claim env of its own, which must never be
	// rendered (issue 18, item 9: the link pointed at /etc/hostname, which
	// renders nothing either way, so a followed link passed too). The
	// render stays; the next real file renders.
	target := filepath.Join(tmp, "elsewhere.env")
	if err := os.WriteFile(target, []byte("COCOONBOX_VAULT=\"GEN=followed;;\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, env+".link"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(env+".link", env); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "the symlink refused", func() (bool, string) {
		return strings.Contains(logged.String(), "is a symlink"), logged.String()
	})
	if got, _ := os.ReadFile(filepath.Join(dir, "vault.sh")); !strings.Contains(string(got), "export GEN='g200'") {
		t.Fatalf("after the symlink, vault.sh is not the last real render (was the link followed?):\n%s", got)
	}
	write(201, false)
	waitGen(201)

	stopW.Close()
	select {
	case code := <-done:
		if code != cli.OK {
			t.Fatalf("watch returned %d after stop, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not return after stop")
	}
}
