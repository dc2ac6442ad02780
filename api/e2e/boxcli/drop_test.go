//go:build booted

package boxcli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/creack/pty"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// running is alice's CLI started with its stdout read line by line.
type running struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr strings.Builder
}

// startCLI starts alice's CLI with args; its token is $COCOONBOX_TOKEN,
// as the contract allows, since the proxy is an endpoint cli.json does
// not know.
func startCLI(t *testing.T, args ...string) *running {
	t.Helper()
	r := &running{cmd: exec.Command(alice.Bin, args...), lines: make(chan string, 100)}
	r.cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+alice.ConfigDir, "COCOONBOX_TOKEN="+token)
	r.cmd.Stderr = &r.stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	return r
}

// next is the CLI's next line (failing the test after 2 minutes or at
// its end).
func (r *running) next(t *testing.T) line {
	t.Helper()
	select {
	case s, ok := <-r.lines:
		if !ok {
			t.Fatalf("the CLI ended without another line: %s", r.stderr.String())
		}
		return parseLines(t, s)[0]
	case <-time.After(2 * time.Minute):
		t.Fatalf("no line from the CLI in 2 minutes: %s", r.stderr.String())
	}
	return line{}
}

// wait reads the CLI's remaining lines and its exit.
func (r *running) wait(t *testing.T) ([]line, error) {
	t.Helper()
	var rest []line
	for s := range r.lines {
		rest = append(rest, parseLines(t, s)[0])
	}
	return rest, r.cmd.Wait()
}

// An Events stream cut mid-operation: the CLI opens another from the last
// seq it saw and prints every event of the operation once, in order, the
// same as the api's log holds. The upgrade's events after the first are
// held back in the proxy until the operation has ended in the api, then
// the connection is cut, so the rest can only come from the new stream.
func droppedStream(t *testing.T, boxID string) {
	p := newCutProxy(t, strings.TrimPrefix(api.URL, "http://"))
	// --yes: no look for working offload sessions (a Session.Exec the
	// proxy would carry too); that check is the hibernate subtest's.
	r := startCLI(t, "box", "upgrade", "web", "--confirm", "--yes", "--json", "--endpoint", p.URL())
	answer := r.next(t)
	first := r.next(t)
	p.Hold()
	if first.OperationID != answer.OperationID && first.State == "" {
		t.Fatalf("first event %+v, want one of operation %s", first, answer.OperationID)
	}
	log := opLog(t, boxID, answer.OperationID)
	// What the CLI printed before the cut: it has had the seconds opLog
	// waited to print what reached it.
	before := []line{first}
	for len(r.lines) > 0 {
		before = append(before, r.next(t))
	}
	for _, l := range before {
		if l.OperationID == answer.OperationID && l.Phase == "done" {
			t.Fatalf("the upgrade was done before its stream was held: nothing was cut mid-operation (%+v)", before)
		}
	}
	p.Cut()
	rest, err := r.wait(t)
	if err != nil {
		t.Fatalf("upgrade through the cut: %v\n%s", err, r.stderr.String())
	}
	last := before[len(before)-1].Seq
	if !strings.Contains(r.stderr.String(), "event stream dropped") ||
		!strings.Contains(r.stderr.String(), fmt.Sprintf("resuming after seq %d", last)) {
		t.Fatalf("stderr %q, want it to say the stream dropped and resumes after seq %d", r.stderr.String(), last)
	}
	var got, want []string
	for _, l := range append(before, rest...) {
		if l.OperationID == answer.OperationID {
			got = append(got, fmt.Sprintf("%d %s", l.Seq, l.Phase))
		}
	}
	var phases []string
	for _, e := range log {
		op := e.GetOperation()
		want = append(want, fmt.Sprintf("%d %s", e.Seq, phaseName(op.Phase)))
		phases = append(phases, phaseName(op.Phase))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the CLI printed the upgrade's events\n%v\nthe api's log holds\n%v", got, want)
	}
	if !slices.Contains(phases, "saving") || !slices.Contains(phases, "restoring_files") {
		t.Fatalf("upgrade phases %v, want saving, restoring, restoring_files, done", phases)
	}
	if st := status(t, "web"); st.Image != "cbdesk:v2-base" || st.UpgradeAvailable || st.State != "running" {
		t.Fatalf("after the upgrade: %+v", st)
	}
}

func phaseName(p controlv1.Phase) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "PHASE_"))
}

// A mutating call whose answer is lost on the way: the CLI makes it again
// with the same request id and gets the first call's operation, which it
// follows to done. A new request id would have been refused (the box
// hibernated already), as the control call shows.
func lostAnswer(t *testing.T, boxID string) {
	p := newCutProxy(t, strings.TrimPrefix(api.URL, "http://"))
	p.Hold()
	// --yes: no offload status first, whose Session.Exec the held proxy
	// would hold too; the hibernate subtest has that check.
	r := startCLI(t, "box", "hibernate", "web", "--yes", "--json", "--endpoint", p.URL())
	// The api took the call: the box is hibernating or hibernated while
	// its answer waits in the proxy.
	wait.Eventually(t, 2*time.Minute, "the hibernate reaching the api", func() (bool, string) {
		resp, err := boxesClient().Status(context.Background(), connect.NewRequest(&controlv1.BoxStatusRequest{Box: boxID}))
		if err != nil {
			return false, err.Error()
		}
		s := resp.Msg.Box.State
		return s == controlv1.BoxState_BOX_STATE_HIBERNATING || s == controlv1.BoxState_BOX_STATE_HIBERNATED, s.String()
	})
	p.Cut()
	answer := r.next(t)
	rest, err := r.wait(t)
	if err != nil {
		t.Fatalf("hibernate after a lost answer: %v\n%s", err, r.stderr.String())
	}
	if !strings.Contains(r.stderr.String(), "trying again with request id cli-") {
		t.Fatalf("stderr %q, want the retry with the same request id", r.stderr.String())
	}
	// The retry's answer is the first call's operation, over already or
	// followed to done.
	end := append([]line{answer}, rest...)[len(rest)]
	if answer.Kind != "hibernate" || end.OperationID != answer.OperationID || end.Phase != "done" {
		t.Fatalf("after the retry: answer %+v, then %+v", answer, rest)
	}
	if log := opLog(t, boxID, answer.OperationID); len(log) == 0 {
		t.Fatalf("operation %s is not in the log", answer.OperationID)
	}
	if c := cli(t, "box", "hibernate", "web"); c.code != 1 || !strings.Contains(c.stderr, `box hibernate "web"`) {
		t.Fatalf("control: a second hibernate with a new request id: exit %d %s", c.code, c.stderr)
	}
	ok(t, "box", "ensure", "web")
}

// On a terminal the progress is one line rewritten in place (carriage
// return, erase line), then the outcome on a line of its own.
func onTerminal(t *testing.T) {
	for _, sub := range []string{"hibernate", "ensure"} {
		cmd := exec.Command(alice.Bin, "box", sub, "web")
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+alice.ConfigDir)
		tty, err := pty.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(tty) // ends with EIO once the CLI has exited
		tty.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("box %s on a terminal: %v\n%q", sub, err, out)
		}
		s := string(out)
		if !strings.Contains(s, "\r\x1b[K") || !strings.Contains(s, sub+" done in") || strings.Count(s, "\n") > 2 {
			t.Fatalf("box %s on a terminal printed %q, want one line rewritten in place and the outcome", sub, s)
		}
	}
}
