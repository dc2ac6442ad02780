//go:build booted

package boxes

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
)

// BenchmarkUsersLoad (issue 24, Deliver 7): N users at once, each
// creating a box, running a command in it through Session.Exec (what
// cocoonbox rsh calls), hibernating, waking (Ensure) and deleting it,
// each step to its operation's end, while 200 clients poll Boxes/List;
// against one api and against two replicas on one database (users spread
// over them), driving the test's sandboxd. It reports p50 and p99 per
// call (a mutating call to its operation's end), the users' steps per
// second, the apis' peak RSS and the errors: any but RESOURCE_EXHAUSTED
// fails it. N is COCOONBOX_BENCH_USERS (comma-separated; default 1,10:
// 50 and 100 boot that many boxes at once on this host). Each run is one
// pass, whatever b.N.
func BenchmarkUsersLoad(b *testing.B) {
	counts := os.Getenv("COCOONBOX_BENCH_USERS")
	if counts == "" {
		counts = "1,10"
	}
	for _, c := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			b.Fatalf("COCOONBOX_BENCH_USERS: %q is not a count", c)
		}
		for _, replicas := range []int{1, 2} {
			b.Run(fmt.Sprintf("users=%d/apis=%d", n, replicas), func(b *testing.B) {
				for b.Loop() {
					loadOnce(b, n, replicas)
				}
			})
		}
	}
}

// calls keeps each call's latencies and the errors.
type calls struct {
	mu        sync.Mutex
	took      map[string][]time.Duration
	errs      []string
	exhausted int
}

func (c *calls) add(name string, start time.Time, err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.took[name] = append(c.took[name], time.Since(start))
		return true
	case connect.CodeOf(err) == connect.CodeResourceExhausted:
		c.exhausted++
	default:
		c.errs = append(c.errs, fmt.Sprintf("%s: %v", name, err))
	}
	return false
}

func loadOnce(b *testing.B, n, replicas int) {
	// Every user's operations queue behind max_operations (4 per api) on a
	// shared host: 100 users ran past newEnv's 8 minutes, and each call
	// then failed DEADLINE_EXCEEDED, the bench's own deadline, not the
	// api's answer. 20 s more per user.
	e := newEnvFor(b, 8*time.Minute+time.Duration(n)*20*time.Second)
	// Every user signs in from loopback: past the per-address allowance (30).
	o := harness.Options{Sandbox: fmt.Sprintf("sandbox:\n  hosts: {sbx: %q}\n", "unix:"+socket),
		More: "console:\n  sign_in: {per_address: 1000}\n"}
	apis := []*harness.API{e.startOpts(o)}
	if replicas == 2 {
		apis = append(apis, e.startOpts(o))
	}
	type user struct {
		boxes   controlv1connect.BoxesClient
		session controlv1connect.SessionClient
	}
	users := make([]user, n)
	for i := range users {
		a := apis[i%len(apis)]
		tok := e.user(a, fmt.Sprintf("load%d", i), 1)
		users[i] = user{harness.Boxes(a.URL, tok), controlv1connect.NewSessionClient(wire.H2CClient("", tok, 0), a.URL, connect.WithGRPC())}
	}
	for _, u := range users {
		e.accepted(u.boxes)
	}
	cs := &calls{took: map[string][]time.Duration{}}
	ctx, stop := context.WithCancel(e.ctx)
	var polls sync.WaitGroup
	for i := range 200 {
		polls.Add(1)
		go func() {
			defer polls.Done()
			c := users[i%n].boxes
			for ctx.Err() == nil {
				start := time.Now()
				_, err := c.List(ctx, connect.NewRequest(&controlv1.ListBoxesRequest{}))
				if ctx.Err() == nil {
					cs.add("List", start, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	begun := time.Now()
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("load-%d", i)
			step := func(call string, f func() (*controlv1.OperationResponse, error)) bool {
				start := time.Now()
				r, err := f()
				if err == nil && r.Operation != nil {
					var last *controlv1.Operation
					if last, err = opEnd(e.ctx, u.boxes, r.Box.BoxId, r.Operation.OperationId); err == nil && last.Phase != controlv1.Phase_PHASE_DONE {
						err = fmt.Errorf("%s ended %s: %s", last.Kind, last.Phase, last.Error)
					}
				}
				return cs.add(call, start, err)
			}
			if !step("Create", func() (*controlv1.OperationResponse, error) {
				return msg(u.boxes.Create(e.ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: rid(), Name: name, Image: v1})))
			}) {
				return
			}
			start := time.Now()
			cs.add("Session.Exec", start, execTrue(e.ctx, u.session, name))
			box := &controlv1.BoxOperationRequest{RequestId: rid(), Box: name}
			step("Hibernate", func() (*controlv1.OperationResponse, error) {
				return msg(u.boxes.Hibernate(e.ctx, connect.NewRequest(box)))
			})
			step("Ensure (wake)", func() (*controlv1.OperationResponse, error) {
				return msg(u.boxes.Ensure(e.ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: rid(), Box: name})))
			})
			step("Delete", func() (*controlv1.OperationResponse, error) {
				return msg(u.boxes.Delete(e.ctx, connect.NewRequest(&controlv1.ConfirmedBoxRequest{RequestId: rid(), Box: name, Confirm: true})))
			})
		}()
	}
	wg.Wait()
	elapsed := time.Since(begun)
	stop()
	polls.Wait()
	var peak int64
	for _, a := range apis {
		if rss, err := peakRSS(a.PID()); err == nil {
			peak = max(peak, rss)
		}
	}
	steps := 0
	for name, took := range cs.took {
		slices.Sort(took)
		if name != "List" {
			steps += len(took)
		}
		unit := strings.NewReplacer(" ", "_", "(", "", ")", "", ".", "_").Replace(name)
		b.ReportMetric(float64(took[len(took)/2].Milliseconds()), unit+"_p50_ms")
		b.ReportMetric(float64(took[len(took)*99/100].Milliseconds()), unit+"_p99_ms")
	}
	b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
	b.ReportMetric(float64(len(cs.took["List"]))/elapsed.Seconds(), "List/s")
	b.ReportMetric(float64(peak>>20), "peak_RSS_MiB")
	b.ReportMetric(float64(cs.exhausted), "resource_exhausted")
	b.ReportMetric(float64(len(cs.errs)), "errors")
	if len(cs.errs) > 0 {
		b.Errorf("%d errors (none but RESOURCE_EXHAUSTED may come): %v", len(cs.errs), cs.errs[:min(len(cs.errs), 5)])
	}
}

// opEnd follows operation opID of box boxID through Events until it ends
// or ctx does (the load's whole deadline: an operation waits its turn
// behind every one queued before it), answering its last step or why not;
// env.until's three minutes and its t.Fatal, from the users' goroutines,
// do not fit a queue of 100 users.
func opEnd(ctx context.Context, c controlv1connect.BoxesClient, boxID, opID string) (*controlv1.Operation, error) {
	st, err := c.Events(ctx, connect.NewRequest(&controlv1.BoxEventsRequest{Box: boxID}))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for st.Receive() {
		if op := st.Msg().GetOperation(); op.GetOperationId() == opID && ended(op) {
			return op, nil
		}
	}
	return nil, fmt.Errorf("operation %s: the event stream ended: %v", opID, st.Err())
}

// execTrue runs `true` in the box through Session.Exec and waits for its
// exit 0.
func execTrue(ctx context.Context, c controlv1connect.SessionClient, box string) error {
	st := c.Exec(ctx)
	if err := st.Send(&controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_Start{Start: &controlv1.SessionExecStart{Box: box, Command: []string{"true"}}}}); err != nil {
		return err
	}
	if err := st.Send(&controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_StdinEof{StdinEof: true}}); err != nil {
		return err
	}
	for {
		r, err := st.Receive()
		if err != nil {
			return err
		}
		if x := r.GetExit(); x != nil {
			st.CloseRequest()
			st.CloseResponse()
			if x.Code != 0 {
				return fmt.Errorf("true exited %d", x.Code)
			}
			return nil
		}
	}
}

// peakRSS is process pid's peak resident set (VmHWM), in bytes.
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			_, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
