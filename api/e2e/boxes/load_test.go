//go:build booted

package boxes

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness/gate"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// The load tests pile operations up in the api: the api drives the daemon
// through a gate.Gate that holds every Create, so all of them wait in the
// api (queued, or in flight at the gate) without a boot each; once let
// through, each create boots a real box and the test deletes it as soon
// as it runs, so a few boxes are up at once.

const (
	flood   = 50
	maxOps  = 4
	opsYAML = "boxes:\n  max_operations: 4\n"
)

// gated serves the test's sandboxd behind a shut gate on a socket of its
// own, stopped when the test ends, and answers the gate and api.yaml's
// sandbox mapping naming it.
func (e *env) gated() (*gate.Gate, string) {
	e.t.Helper()
	g := gate.New(sandboxd)
	path := filepath.Join(root, fmt.Sprintf("gate-%d.sock", seq.Add(1)))
	stop, err := gate.Serve(g, path)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { g.Open(); stop() })
	return g, fmt.Sprintf("sandbox:\n  hosts: {sbx: %q}\n", "unix:"+path)
}

// healthy asks url's /healthz every 100 ms until the test ends, failing it
// on an answer that is not 200 or takes longer than 10 s (a loaded host
// answers in milliseconds; a pool held by operations never does).
func (e *env) healthy(url string) {
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	e.t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		client := &http.Client{Timeout: 10 * time.Second}
		for ctx.Err() == nil {
			resp, err := client.Get(url + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %s", resp.Status)
				}
			}
			if err != nil && ctx.Err() == nil {
				e.t.Errorf("/healthz did not answer ok: %v", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// createAll sends n creates at once and answers the operations begun;
// every call must begin one or be refused RESOURCE_EXHAUSTED.
func (e *env) createAll(c controlv1connect.BoxesClient, n int) []string {
	e.t.Helper()
	var mu sync.Mutex
	var ops []string
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Create(e.ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: rid(), Name: fmt.Sprintf("load-%02d", i), Image: v1}))
			if err != nil {
				if connect.CodeOf(err) != connect.CodeResourceExhausted {
					e.t.Errorf("create %d: %v", i, err)
				}
				return
			}
			mu.Lock()
			ops = append(ops, r.Msg.Operation.OperationId)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if e.t.Failed() {
		e.t.FailNow()
	}
	return ops
}

// piledUp waits until n operations are under way in the database and
// max_operations of them wait at the gate.
func (e *env) piledUp(g *gate.Gate, n int) {
	e.t.Helper()
	wait.Eventually(e.t, time.Minute, fmt.Sprintf("%d operations under way, %d at the gate", n, maxOps), func() (bool, string) {
		var under int
		e.db.Pool.QueryRow(e.ctx, "SELECT count(*) FROM box_operations WHERE ended_at IS NULL").Scan(&under)
		now, _ := g.Held()
		return under == n && now == maxOps, fmt.Sprintf("%d under way, %d at the gate", under, now)
	})
}

// drain waits until every operation of ops has ended done, deleting each
// box as soon as its create is done, and then until those deletes end.
func (e *env) drain(c controlv1connect.BoxesClient, ops []string) {
	e.t.Helper()
	deleted := map[string]bool{}
	wait.Eventually(e.t, 10*time.Minute, fmt.Sprintf("%d creates done and their boxes deleted", len(ops)), func() (bool, string) {
		rows, err := e.db.Pool.Query(e.ctx, "SELECT box_id, phase, coalesce(error, '') FROM box_operations WHERE id = ANY($1) AND ended_at IS NOT NULL", ops)
		if err != nil {
			return false, err.Error()
		}
		var done, failed []string
		for rows.Next() {
			var box, phase, why string
			rows.Scan(&box, &phase, &why)
			if phase != "done" {
				failed = append(failed, fmt.Sprintf("%s ended %s: %s", box, phase, why))
			}
			done = append(done, box)
		}
		rows.Close()
		if len(failed) > 0 {
			e.t.Fatalf("%d creates failed: %v", len(failed), failed)
		}
		for _, box := range done {
			if deleted[box] {
				continue
			}
			if _, err := c.Delete(e.ctx, connect.NewRequest(&controlv1.ConfirmedBoxRequest{RequestId: rid(), Box: box, Confirm: true})); err != nil {
				return false, fmt.Sprintf("delete %s: %v", box, err)
			}
			deleted[box] = true
		}
		var left int
		e.db.Pool.QueryRow(e.ctx, "SELECT count(*) FROM boxes").Scan(&left)
		return len(done) == len(ops) && left == 0, fmt.Sprintf("%d of %d creates done, %d boxes left", len(done), len(ops), left)
	})
}

// Must show: 50 creates at once on an api with database.max_conns 10 all
// finish, with /healthz, console sign-in and Boxes/List answering while
// they wait; no more than boxes.max_operations reach the supervisor at
// once. (Each runner held a pool connection for its box's lock and then
// waited for a second: ten at once held the whole pool, for good.)
func TestFiftyCreatesAtOnceOnTenConnectionsAllFinishWithHealthzAnswering(t *testing.T) {
	e := newEnv(t)
	g, hosts := e.gated()
	api := e.startOpts(harness.Options{Sandbox: hosts, MaxConns: 10, More: opsYAML})
	tok := e.user(api, "flood", flood)
	c := harness.Boxes(api.URL, tok)
	e.healthy(api.URL)
	ops := e.createAll(c, flood)
	if len(ops) != flood {
		t.Fatalf("%d of %d creates began (the default max_queued is 256)", len(ops), flood)
	}
	e.piledUp(g, flood)
	if _, err := harness.SignIn(e.ctx, api.URL, "flood", password); err != nil {
		t.Fatalf("console sign-in while %d operations wait: %v", flood, err)
	}
	list, err := c.List(e.ctx, connect.NewRequest(&controlv1.ListBoxesRequest{}))
	if err != nil || len(list.Msg.Boxes) != flood {
		t.Fatalf("Boxes/List while %d operations wait: %v", flood, err)
	}
	g.Open()
	e.drain(c, ops)
	if _, most := g.Held(); most > maxOps {
		t.Errorf("%d creates reached the supervisor at once; boxes.max_operations is %d", most, maxOps)
	}
	e.agree()
}

// Must show: an api stopped (SIGTERM) with 50 operations pending leaves
// them under way, none failed, and the next api's recovery runs them all
// to the end through the same bound. (It marked them failed, "context
// canceled", and a recovery running every pending operation at once
// deadlocked again.)
func TestARestartWithFiftyPendingOperationsRecoversThemAll(t *testing.T) {
	e := newEnv(t)
	g, hosts := e.gated()
	first := e.startOpts(harness.Options{Sandbox: hosts, MaxConns: 10, More: opsYAML})
	tok := e.user(first, "pending", flood)
	ops := e.createAll(harness.Boxes(first.URL, tok), flood)
	e.piledUp(g, flood)
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	var under, failed int
	e.db.Pool.QueryRow(e.ctx, "SELECT count(*) FILTER (WHERE ended_at IS NULL), count(*) FILTER (WHERE phase = 'failed') FROM box_operations").Scan(&under, &failed)
	if under != flood || failed != 0 {
		t.Fatalf("after the stop: %d operations under way and %d failed; want %d and 0", under, failed, flood)
	}
	next := e.startOpts(harness.Options{Sandbox: fmt.Sprintf("sandbox:\n  hosts: {sbx: %q}\n", "unix:"+socket), MaxConns: 10, More: opsYAML})
	e.healthy(next.URL)
	e.drain(harness.Boxes(next.URL, tok), ops)
	e.agree()
}
