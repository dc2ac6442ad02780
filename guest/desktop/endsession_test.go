package desktop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

// cgroupWith makes a cgroup v2 directory of the test's own holding a new
// sleep, stopped (SIGSTOP) so that no SIGTERM could end it: the state an
// old session's client can be in when the desktop restarts.
func cgroupWith(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	testenv.RequireRoot(t, "making a cgroup")
	root, err := UnifiedRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, fmt.Sprintf("cocoonbox-test-drain-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sleep.Process.Kill()
		_ = sleep.Wait()
		_ = os.Remove(dir)
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	if err := sleep.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return dir, sleep
}

// Drain returns only when the cgroup is empty: a stopped process still
// there after the grace is killed through cgroup.kill.
func TestDrainKillsAStoppedProcessLeftAfterTheGrace(t *testing.T) {
	dir, sleep := cgroupWith(t)
	if p, err := Populated(dir); err != nil || !p {
		t.Fatalf("the test's cgroup with its sleep: populated=%v, %v", p, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	killed, err := Drain(ctx, []string{dir, filepath.Join(dir, "gone")}, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !killed[0] || killed[1] {
		t.Errorf("killed = %v, want the populated cgroup killed and the missing one not", killed)
	}
	if p, _ := Populated(dir); p {
		t.Error("Drain returned with a process still in the cgroup")
	}
	_ = sleep.Wait()
	if st := sleep.ProcessState; st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the sleep ended with %v, want SIGKILL", st)
	}
}

// A cgroup that empties within the grace is not killed; one that stays
// populated past ctx is named in the error.
func TestDrainWaitsForTheGraceAndNamesWhatIsLeft(t *testing.T) {
	dir, sleep := cgroupWith(t)
	// Ended inside the grace, while Drain polls.
	time.AfterFunc(100*time.Millisecond, func() { _ = sleep.Process.Kill() })
	killed, err := Drain(context.Background(), []string{dir}, time.Hour)
	if err != nil || killed[0] {
		t.Fatalf("Drain of a cgroup that empties inside the grace: killed=%v, %v", killed, err)
	}
	dir2, _ := cgroupWith(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Drain(ctx, []string{dir2}, time.Hour); err == nil || !strings.Contains(err.Error(), dir2) {
		t.Errorf("Drain past its context: %v, want an error naming %s", err, dir2)
	}
}
