//go:build booted

package local

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Issue 24, Deliver 9: the boot's verdict is the READY=1 nspawn forwards
// from the box's systemd, no longer systemctl asked through the box's
// door. It counts once the sender nspawn is known, even when it came
// before (boot learns nspawn's pid only once it has started it), and a
// status line is no verdict.
func TestReadyIsHeardFromTheSenderEvenWhenItCameFirst(t *testing.T) {
	r, err := listenReady("cb-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// One process sends both, as nspawn does: the shell's pid (systemd-notify
	// sends its caller's unless told, and a shell that becomes it keeps it).
	cmd := exec.Command("sh", "-c", `systemd-notify --no-block --pid=$$ "STATUS=Container running." && exec systemd-notify --no-block --pid=$$ --ready`)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+r.name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-notify: %v: %s", err, out)
	}
	go r.serve(cmd.Process.Pid)
	select {
	case <-r.ready:
	case <-time.After(30 * time.Second):
		t.Fatal("nspawn's READY=1 was not heard")
	}
}

// Only nspawn's own datagram counts (the kernel's SCM_CREDENTIALS), so no
// other process on the host can declare a box booted.
func TestReadyCountsOnlyNSpawnsCredentials(t *testing.T) {
	oob := unix.UnixCredentials(&unix.Ucred{Pid: 4242, Uid: 0, Gid: 0})
	if !sentBy(oob, 4242) {
		t.Fatal("nspawn's own datagram was not taken")
	}
	if sentBy(oob, 4243) {
		t.Fatal("another process's datagram was taken for nspawn's")
	}
	if sentBy(nil, 4242) {
		t.Fatal("a datagram without credentials was taken for nspawn's")
	}
}
