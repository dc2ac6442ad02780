//go:build booted

package offload

import (
	"bufio"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/wait"
	"github.com/cocoonbox/cocoonbox/packer"
)

// Issue 39, Deliver 5: a box hibernated while `cocoonbox offload` waits on
// send (the stand-in holding its start, so send waits for the first
// prompt to be taken) made the offload wait silently on the frozen box
// (300 s seen). Now the CLI reads the box's state while a step talks to
// the box and stops within seconds, naming the box's state and how to
// wake it.
func TestOffloadWhoseBoxHibernatesMidSendSaysSo(t *testing.T) {
	data := t.TempDir()
	top := newRepo(t, "frozen", [2]string{"a.txt", "one\n"})
	handOver(t, top, data, "a task for a box about to hibernate")
	inBox(t, "runuser -u user -- mkdir -p /home/user/.standin && runuser -u user -- touch /home/user/.standin/hold-start")
	defer func() {
		mustCLI(t, top, data, "box", "ensure", boxName)
		inBox(t, "rm -f /home/user/.standin/hold-start; runuser -l user -c 'cocoonbox-agent offload end --repo "+packer.RepoKey(top)+"' || true")
	}()

	cmd := command(top, data, "offload", "--box", boxName, "--yes")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() // a CLI still waiting when the test gives up
	var mu sync.Mutex
	var seen strings.Builder
	sending := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			seen.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "waiting for it to take the first prompt") {
				once.Do(func() { close(sending) })
			}
		}
		done <- cmd.Wait()
	}()
	text := func() string { mu.Lock(); defer mu.Unlock(); return seen.String() }
	select {
	case <-sending:
	case err := <-done:
		t.Fatalf("the offload ended before send waited on the first prompt: %v\nstderr:\n%s", err, text())
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("send never waited on the first prompt within 3 minutes; stderr:\n%s", text())
	}
	mustCLI(t, top, data, "box", "hibernate", boxName, "--yes")

	var exit error
	ended := false
	wait.Eventually(t, 2*time.Minute, "the offload to stop once its box hibernated", func() (bool, string) {
		select {
		case exit = <-done:
			ended = true
		default:
		}
		return ended, "still running; stderr:\n" + text()
	})
	if exit == nil {
		t.Fatalf("the offload into a box hibernated mid-send succeeded; stderr:\n%s", text())
	}
	if s := text(); !strings.Contains(s, "box "+boxName+" is hibernat") || !strings.Contains(s, "cocoonbox box ensure "+boxName) {
		t.Errorf("the offload's error does not name the hibernated box and how to wake it:\n%s", s)
	}
}
