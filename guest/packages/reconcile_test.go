package packages

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

func needDpkg(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		testenv.SkipOrFail(t, "no dpkg-query on this machine (Debian has it: make test runs there)")
	}
}

func quietLog() (*journal.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	l := journal.New("cocoonbox-packages-test")
	l.Stderr = &buf
	return l, &buf
}

// installed returns up to n of this machine's installed packages, named as
// apt-mark names them.
func installed(t testing.TB, n int) []string {
	t.Helper()
	all, err := Manual(DpkgStatus, "/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) > n {
		all = all[:n]
	}
	return all
}

func TestMissingFindsWhatIsNotInstalledInOneCall(t *testing.T) {
	needDpkg(t)
	log, _ := quietLog()
	r := &Reconciler{Log: log}
	names := append(installed(t, 20), "cocoonbox-no-such-package", "dpkg:native", "dpkg:any", "dpkg:s390x", allArch(t)+":"+nativeArch(t))
	missing, err := r.Missing(context.Background(), names)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(missing, ",") != "cocoonbox-no-such-package,dpkg:s390x" {
		t.Errorf("missing = %v", missing)
	}
	if r.Started["dpkg-query"] != 1 || len(r.Started) != 1 {
		t.Errorf("started %v, want exactly one dpkg-query", r.Started)
	}
}

func TestReconcileNothingMissingRunsOnlyDpkgQuery(t *testing.T) {
	needDpkg(t)
	log, buf := quietLog()
	r := &Reconciler{Log: log}
	res, err := r.Reconcile(context.Background(), installed(t, 300))
	if err != nil || len(res.Missing) != 0 || res.Updated {
		t.Fatalf("Reconcile = %+v, %v", res, err)
	}
	if r.Started["dpkg-query"] != 1 || r.Started["apt-get"] != 0 {
		t.Errorf("started %v, want one dpkg-query and no apt-get", r.Started)
	}
	if !strings.Contains(buf.String(), MsgNothing) {
		t.Errorf("no nothing-missing entry in %s", buf)
	}
}

func TestReconcileExitsLockBusyWhenTheLockStaysHeld(t *testing.T) {
	needDpkg(t)
	lock := filepath.Join(t.TempDir(), "lock-frontend")
	holdLock(t, lock)
	log, buf := quietLog()
	r := &Reconciler{Log: log, LockFiles: []string{lock}, LockTimeout: 200e6, LockPoll: 50e6}
	_, err := r.Reconcile(context.Background(), []string{"cocoonbox-no-such-package"})
	if !errors.Is(err, ErrLockBusy) || !errors.Is(err, ErrTryLater) {
		t.Fatalf("Reconcile = %v, want ErrLockBusy and ErrTryLater", err)
	}
	if r.Started["apt-get"] != 0 {
		t.Errorf("apt-get ran %d times while the lock was held", r.Started["apt-get"])
	}
	if !strings.Contains(buf.String(), MsgLockBusy) {
		t.Errorf("no lock-busy entry in %s", buf)
	}
}

// BenchmarkNoopReconcile: a reconcile of 300 listed, installed packages
// (this machine's real dpkg database). Target: under 50 ms and exactly one
// dpkg-query process, reported as dpkg-query/op from the exec count.
func BenchmarkNoopReconcile(b *testing.B) {
	needDpkg(b)
	names := installed(b, 300)
	if len(names) < 300 {
		b.Logf("only %d packages installed here", len(names))
	}
	log, _ := quietLog()
	var queries, aptRuns int
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before)
	for b.Loop() {
		r := &Reconciler{Log: log}
		if res, err := r.Reconcile(context.Background(), names); err != nil || len(res.Missing) != 0 {
			b.Fatalf("%+v %v", res, err)
		}
		queries += r.Started["dpkg-query"]
		aptRuns += r.Started["apt-get"]
	}
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	// CPU time of the children (dpkg-query): what the run costs when the
	// machine is not shared; ns/op is wall time.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "child-cpu-ms/op")
	b.ReportMetric(float64(queries)/float64(b.N), "dpkg-query/op")
	b.ReportMetric(float64(aptRuns)/float64(b.N), "apt-get/op")
	b.ReportMetric(float64(len(names)), "packages")
}

func nativeArch(t testing.TB) string {
	out, err := exec.Command("dpkg", "--print-architecture").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// allArch is an installed package of Architecture: all (apt takes it as
// native, so "name:<native>" is installed).
func allArch(t testing.TB) string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Architecture} ${Package}\n").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if a, p, _ := strings.Cut(l, " "); a == "all" {
			return p
		}
	}
	testenv.SkipOrFail(t, "no Architecture: all package installed here (every Debian system has some, tzdata among them)")
	return ""
}
