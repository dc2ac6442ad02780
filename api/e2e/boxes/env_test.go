//go:build booted

package boxes

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

const password = "correct horse battery"

var seq atomic.Int64

func rid() string { return fmt.Sprintf("r-%d-%d", time.Now().UnixNano()%1e6, seq.Add(1)) }

// env is one test's database and the apis it starts on it.
type env struct {
	t   testing.TB
	ctx context.Context
	db  *dbtest.DB
}

func newEnv(t testing.TB) *env {
	return newEnvFor(t, 8*time.Minute)
}

// newEnvFor is newEnv whose calls end after d (newEnv: 8 minutes).
func newEnvFor(t testing.TB, d time.Duration) *env {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, db: dbtest.New(t)}
	t.Cleanup(e.deleteMachines)
	return e
}

// start runs an api on the test's database driving the test's sandboxd.
func (e *env) start() *harness.API {
	e.t.Helper()
	return e.startWith(fmt.Sprintf("sandbox:\n  hosts: {sbx: %q}\n", "unix:"+socket))
}

// startWith runs an api on the test's database with sandbox, api.yaml's
// sandbox section; it is stopped (its log printed on a failure) when the
// test ends.
func (e *env) startWith(sandbox string) *harness.API {
	e.t.Helper()
	return e.startOpts(harness.Options{Sandbox: sandbox})
}

// startOpts is startWith with more of api.yaml (o's state directory and
// database are the test's).
func (e *env) startOpts(o harness.Options) *harness.API {
	e.t.Helper()
	o.StateDir, o.DatabaseURL = e.t.TempDir(), e.db.URL
	a, err := harness.Start(e.ctx, bins.API, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("api %s log:\n%s", a.URL, a.Log())
		}
		a.Stop()
	})
	return a
}

// user adds a user on a with max_boxes and answers a device token of
// theirs.
func (e *env) user(a *harness.API, name string, maxBoxes int) string {
	e.t.Helper()
	if err := a.AddUser(e.ctx, name, password); err != nil {
		e.t.Fatal(err)
	}
	if err := boxes.SetLimits(e.ctx, e.db.Pool, name, boxes.Limits{MaxBoxes: maxBoxes, MaxRunning: maxBoxes}); err != nil {
		e.t.Fatal(err)
	}
	con, err := harness.SignIn(e.ctx, a.URL, name, password)
	if err != nil {
		e.t.Fatal(err)
	}
	tok, err := con.Device(e.ctx, "boxese2e")
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// accepted waits until every client's api takes the token: a token made on
// one api reaches another's index through its NOTIFY, milliseconds later
// (tokens.Index: a check never queries), so a test that races replicas on
// a new token waits for that first.
func (e *env) accepted(clients ...controlv1connect.BoxesClient) {
	e.t.Helper()
	for i, c := range clients {
		wait.Eventually(e.t, 10*time.Second, fmt.Sprintf("the token accepted by api %d", i), func() (bool, string) {
			_, err := c.List(e.ctx, connect.NewRequest(&controlv1.ListBoxesRequest{}))
			return err == nil, fmt.Sprint(err)
		})
	}
}

// until follows the box's events through c until an event of operation
// opID satisfies stop, and answers that step; it fails the test on a
// timeout or a stream that ends first.
func (e *env) until(c controlv1connect.BoxesClient, boxID, opID string, stop func(*controlv1.Operation) bool) *controlv1.Operation {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	st, err := c.Events(ctx, connect.NewRequest(&controlv1.BoxEventsRequest{Box: boxID}))
	if err != nil {
		e.t.Fatal(err)
	}
	defer st.Close()
	var seen []string
	for st.Receive() {
		op := st.Msg().GetOperation()
		if op.GetOperationId() != opID {
			continue
		}
		seen = append(seen, op.Phase.String())
		if stop(op) {
			return op
		}
	}
	e.t.Fatalf("operation %s: the event stream ended (%v) after %v", opID, st.Err(), seen)
	return nil
}

func ended(op *controlv1.Operation) bool {
	return op.Phase == controlv1.Phase_PHASE_DONE || op.Phase == controlv1.Phase_PHASE_FAILED
}

// done waits for the operation to end and fails the test unless it is done.
func (e *env) done(c controlv1connect.BoxesClient, r *controlv1.OperationResponse) *controlv1.Operation {
	e.t.Helper()
	last := e.until(c, r.Box.BoxId, r.Operation.OperationId, ended)
	if last.Phase != controlv1.Phase_PHASE_DONE {
		e.t.Fatalf("%s %s ended %s: %s", last.Kind, last.OperationId, last.Phase, last.Error)
	}
	return last
}

// agree fails the test unless the rows and the sandboxd's machines of this
// database's users agree: no operation under way, every box row has its
// machine in the state the row says, and no machine is without a row.
func (e *env) agree() {
	e.t.Helper()
	// A delete's row goes before its operation ends: a drain that saw the
	// last row go can come a moment before the last operation's end. Stuck
	// is still under way a minute later.
	wait.Eventually(e.t, time.Minute, "no operation under way", func() (bool, string) {
		var under int
		e.db.Pool.QueryRow(e.ctx, "SELECT count(*) FROM box_operations WHERE ended_at IS NULL").Scan(&under)
		return under == 0, fmt.Sprintf("%d operations still under way", under)
	})
	rows, err := e.db.Pool.Query(e.ctx, "SELECT b.id, b.state FROM boxes b")
	if err != nil {
		e.t.Fatal(err)
	}
	want := map[string]string{}
	for rows.Next() {
		var id, st string
		rows.Scan(&id, &st)
		want[id] = st
	}
	rows.Close()
	var tenants []string
	trows, _ := e.db.Pool.Query(e.ctx, "SELECT id::text FROM users")
	for trows.Next() {
		var id string
		trows.Scan(&id)
		tenants = append(tenants, id)
	}
	trows.Close()
	got := map[string]string{}
	for _, tenant := range tenants {
		ms, err := sandboxd.List(e.ctx, tenant)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, m := range ms {
			got[m.ID] = boxState(m.State)
		}
	}
	if fmt.Sprint(sorted(want)) != fmt.Sprint(sorted(got)) {
		e.t.Fatalf("rows %v, machines %v: they disagree", sorted(want), sorted(got))
	}
	e.savesRecorded(tenants)
}

// savesRecorded fails the test unless every save the sandboxd holds for
// these tenants is one a row names (a box's save, or a deleted box's kept
// one), as the daemon's state directory lists them (localtest.Saves).
func (e *env) savesRecorded(tenants []string) {
	e.t.Helper()
	recorded := map[string]bool{}
	rows, err := e.db.Pool.Query(e.ctx, "SELECT save_id FROM boxes WHERE save_id IS NOT NULL UNION SELECT save_id FROM box_saves")
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		recorded[id] = true
	}
	rows.Close()
	saves, err := localtest.Saves(filepath.Join(root, "state"))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, info := range saves {
		if slices.Contains(tenants, info.Tenant) && !recorded[info.ID] {
			e.t.Errorf("save %s of machine %s is on the sandboxd but no row names it (left by a save run twice?)", info.ID, info.Machine)
		}
	}
}

// boxState is the box state a machine state stands for.
func boxState(s sandbox.State) string {
	switch s {
	case sandbox.Running, sandbox.Hibernated, sandbox.Starting:
		return string(s)
	}
	return "failed"
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// deleteMachines removes the machines of this test's users.
func (e *env) deleteMachines() {
	rows, err := e.db.Pool.Query(context.Background(), "SELECT id::text FROM users")
	if err != nil {
		return
	}
	var tenants []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		tenants = append(tenants, id)
	}
	rows.Close()
	for _, tenant := range tenants {
		ms, _ := sandboxd.List(context.Background(), tenant)
		for _, m := range ms {
			if err := sandboxd.Delete(context.Background(), m.ID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				e.t.Errorf("delete machine %s: %v", m.ID, err)
			}
		}
	}
}
