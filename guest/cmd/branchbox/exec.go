package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/feature"
	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// exec replaces branchbox with the provider, so the values reach that
// process tree only and nothing of branchbox's own environment does. It
// runs on the guest, also for a launched run: a Docker exec would inherit
// the container's whole environment, which the Engine API cannot clear
// (docs/branchbox.md, its paragraph on where the provider runs).
// When it runs as root and the provider's user differs it drops to that
// user (no supplementary groups) on every thread first (Go's
// syscall.Setuid applies to all threads since Go 1.16).
func (e *env) exec() int {
	r, err := e.load()
	if err != nil {
		return e.fail(err)
	}
	var inherit []string
	if e.o.inherit != "" {
		inherit = strings.Split(e.o.inherit, ",")
	}
	c, err := feature.PrepareProvider(r, feature.ProviderRequest{Consumer: e.o.consumer, Executable: e.o.executable,
		Inherit: inherit, Args: e.o.argv}, os.LookupEnv, time.Now())
	if err != nil {
		return e.fail(err)
	}
	e.log.Send(journal.Info, msgProvider, fmt.Sprintf("exec %s for %s under lease %s: %s", e.o.executable, e.o.consumer, c.Lease.LeaseID, c))
	if err := dropTo(c.UID, c.GID); err != nil {
		return e.fail(err)
	}
	if err := unix.Chdir(c.Dir); err != nil {
		return e.fail(fmt.Errorf("chdir %s: %w", c.Dir, err))
	}
	err = unix.Exec(c.Path, c.Argv, c.Env)
	return e.fail(fmt.Errorf("exec %s: %w", c.Path, err))
}

func dropTo(uid, gid uint32) error {
	if uint32(os.Geteuid()) == uid && uint32(os.Getegid()) == gid {
		return nil
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(int(gid), int(gid), int(gid)); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(int(uid), int(uid), int(uid)); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	return nil
}
