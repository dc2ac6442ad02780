package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// fakeBoxes is a Boxes service in memory, for the protocol's unit tests:
// each caller's boxes (by the principal in the context, as the real
// service reads it), operations that step through their phases, and a
// gate that holds every operation before its last step while a test
// looks. The real service is tested through the MCP in api/e2e/controlmcp.
type fakeBoxes struct {
	// the methods the tools do not call (Events, Images) answer unimplemented
	controlv1connect.UnimplementedBoxesHandler
	mu    sync.Mutex
	boxes map[string][]*controlv1.Box // by user id, oldest first
	ops   map[string]*fakeOp
	// broken, when set, is what Usage answers (an internal failure).
	broken error
	// gate, when set (hold), is received from before an operation's last step.
	gate chan struct{}
	n    int
}

type fakeOp struct {
	under   string // the box it runs on
	user    string // its box's owner
	steps   []*controlv1.Operation
	changed chan struct{} // closed and replaced at each step
}

func newFakeBoxes() *fakeBoxes {
	return &fakeBoxes{boxes: map[string][]*controlv1.Box{}, ops: map[string]*fakeOp{}}
}

var phases = map[string][]controlv1.Phase{
	"create":    {controlv1.Phase_PHASE_CREATING, controlv1.Phase_PHASE_DONE},
	"ensure":    {controlv1.Phase_PHASE_WAKING, controlv1.Phase_PHASE_DONE},
	"hibernate": {controlv1.Phase_PHASE_SNAPSHOTTING, controlv1.Phase_PHASE_DONE},
	"save":      {controlv1.Phase_PHASE_SAVING, controlv1.Phase_PHASE_SAVING, controlv1.Phase_PHASE_DONE},
	"upgrade":   {controlv1.Phase_PHASE_SAVING, controlv1.Phase_PHASE_RESTORING, controlv1.Phase_PHASE_RESTORING_FILES, controlv1.Phase_PHASE_DONE},
	"delete":    {controlv1.Phase_PHASE_DELETING, controlv1.Phase_PHASE_DONE},
}

const latest = "cbdesk:v23-base"

func user(ctx context.Context) string {
	p, _ := tokens.FromContext(ctx)
	return p.UserID
}

// find is the caller's box named or with id box ("" the first); f.mu held.
func (f *fakeBoxes) find(ctx context.Context, box string) (*controlv1.Box, error) {
	for _, b := range f.boxes[user(ctx)] {
		if box == "" || b.BoxId == box || b.Name == box {
			return b, nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("box %q: no box of yours by that name or id", box))
}

// start begins an operation of kind on the caller's box b; a box
// mid-operation refuses, but for an ensure of a box whose create or
// ensure is under way, which answers that one (as boxes.Service does).
// f.mu held.
func (f *fakeBoxes) start(ctx context.Context, b *controlv1.Box, kind string) (*connect.Response[controlv1.OperationResponse], error) {
	for _, op := range f.ops {
		if last := op.steps[len(op.steps)-1]; op.under == b.BoxId && last.Phase != controlv1.Phase_PHASE_DONE {
			if kind == "ensure" && (last.Kind == "create" || last.Kind == "ensure") {
				return connect.NewResponse(&controlv1.OperationResponse{Box: b, Operation: op.steps[0]}), nil
			}
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the box is mid-operation"))
		}
	}
	f.n++
	id := fmt.Sprintf("op-%016x", f.n)
	op := &fakeOp{under: b.BoxId, user: user(ctx), changed: make(chan struct{})}
	f.ops[id] = op
	first := &controlv1.Operation{OperationId: id, BoxId: b.BoxId, Kind: kind, Phase: phases[kind][0]}
	op.steps = append(op.steps, first)
	go f.run(b, op, kind)
	return connect.NewResponse(&controlv1.OperationResponse{Box: b, Operation: first}), nil
}

// run steps op through its phases, then changes the box as kind does.
func (f *fakeBoxes) run(b *controlv1.Box, op *fakeOp, kind string) {
	for i, ph := range phases[kind][1:] {
		f.mu.Lock()
		gate := f.gate
		f.mu.Unlock()
		if i == len(phases[kind])-2 && gate != nil {
			<-gate
		}
		f.mu.Lock()
		s := &controlv1.Operation{OperationId: op.steps[0].OperationId, BoxId: b.BoxId, Kind: kind, Phase: ph}
		if kind == "save" {
			s.TotalBytes = 4096
		}
		if ph == controlv1.Phase_PHASE_DONE {
			f.finish(b, kind)
		}
		op.steps = append(op.steps, s)
		close(op.changed)
		op.changed = make(chan struct{})
		f.mu.Unlock()
	}
}

// finish is what a done operation of kind leaves of b; f.mu held.
func (f *fakeBoxes) finish(b *controlv1.Box, kind string) {
	switch kind {
	case "create", "ensure":
		b.State = controlv1.BoxState_BOX_STATE_RUNNING
	case "hibernate":
		b.State = controlv1.BoxState_BOX_STATE_HIBERNATED
	case "save":
		b.LastSavedAtMs = 1764590000000
	case "upgrade":
		b.Image = latest
	case "delete":
		for u, list := range f.boxes {
			for i, x := range list {
				if x == b {
					f.boxes[u] = append(list[:i:i], list[i+1:]...)
				}
			}
		}
	}
}

// follow is Follow as boxes.Service.WaitOperation answers it.
func (f *fakeBoxes) follow(ctx context.Context, userID, opID string, each func(*controlv1.Operation)) (*controlv1.Operation, error) {
	for i := 0; ; {
		f.mu.Lock()
		op := f.ops[opID]
		if op == nil || op.user != userID {
			f.mu.Unlock()
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no operation %s of user %s", opID, userID))
		}
		steps, changed := op.steps[i:], op.changed
		f.mu.Unlock()
		for _, s := range steps {
			i++
			each(s)
			if s.Phase == controlv1.Phase_PHASE_DONE || s.Phase == controlv1.Phase_PHASE_FAILED {
				return s, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (f *fakeBoxes) List(ctx context.Context, _ *connect.Request[controlv1.ListBoxesRequest]) (*connect.Response[controlv1.ListBoxesResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return connect.NewResponse(&controlv1.ListBoxesResponse{Boxes: f.boxes[user(ctx)]}), nil
}

func (f *fakeBoxes) Status(ctx context.Context, r *connect.Request[controlv1.BoxStatusRequest]) (*connect.Response[controlv1.BoxStatusResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Msg.Box == "" && len(f.boxes[user(ctx)]) == 0 {
		return connect.NewResponse(&controlv1.BoxStatusResponse{LatestImage: latest}), nil
	}
	b, err := f.find(ctx, r.Msg.Box)
	if err != nil {
		return nil, err
	}
	resp := &controlv1.BoxStatusResponse{Box: b, LatestImage: latest, UpgradeAvailable: b.Image != latest}
	for _, op := range f.ops {
		if last := op.steps[len(op.steps)-1]; op.under == b.BoxId && last.Phase != controlv1.Phase_PHASE_DONE {
			resp.Operation = last
		}
	}
	return connect.NewResponse(resp), nil
}

func (f *fakeBoxes) Create(ctx context.Context, r *connect.Request[controlv1.CreateBoxRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.create(ctx, r.Msg.Name, r.Msg.Image)
}

// create adds a box of the caller; f.mu held.
func (f *fakeBoxes) create(ctx context.Context, name, image string) (*connect.Response[controlv1.OperationResponse], error) {
	if _, err := f.find(ctx, name); err == nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("name: %q is taken", name))
	}
	if image == "" {
		image = latest
	}
	f.n++
	b := &controlv1.Box{BoxId: fmt.Sprintf("cb-%016x", f.n), Name: name, State: controlv1.BoxState_BOX_STATE_STARTING, Image: image, Incarnation: 1}
	f.boxes[user(ctx)] = append(f.boxes[user(ctx)], b)
	return f.start(ctx, b, "create")
}

func (f *fakeBoxes) Ensure(ctx context.Context, r *connect.Request[controlv1.EnsureBoxRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Msg.Box == "" && len(f.boxes[user(ctx)]) == 0 {
		return f.create(ctx, "main", "")
	}
	b, err := f.find(ctx, r.Msg.Box)
	if err != nil {
		return nil, err
	}
	if b.State == controlv1.BoxState_BOX_STATE_RUNNING {
		return connect.NewResponse(&controlv1.OperationResponse{Box: b}), nil
	}
	return f.start(ctx, b, "ensure")
}

// operation is an operation of kind on the caller's box.
func (f *fakeBoxes) operation(ctx context.Context, box, kind string) (*connect.Response[controlv1.OperationResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.find(ctx, box)
	if err != nil {
		return nil, err
	}
	return f.start(ctx, b, kind)
}

func (f *fakeBoxes) Hibernate(ctx context.Context, r *connect.Request[controlv1.BoxOperationRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	return f.operation(ctx, r.Msg.Box, "hibernate")
}

func (f *fakeBoxes) Save(ctx context.Context, r *connect.Request[controlv1.BoxOperationRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	return f.operation(ctx, r.Msg.Box, "save")
}

func (f *fakeBoxes) Upgrade(ctx context.Context, r *connect.Request[controlv1.ConfirmedBoxRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	if !r.Msg.Confirm {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("confirm: must be true"))
	}
	return f.operation(ctx, r.Msg.Box, "upgrade")
}

func (f *fakeBoxes) Delete(ctx context.Context, r *connect.Request[controlv1.ConfirmedBoxRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	if !r.Msg.Confirm {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("confirm: must be true"))
	}
	return f.operation(ctx, r.Msg.Box, "delete")
}

func (f *fakeBoxes) Usage(context.Context, *connect.Request[controlv1.UsageRequest]) (*connect.Response[controlv1.UsageResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken != nil {
		return nil, f.broken
	}
	return connect.NewResponse(&controlv1.UsageResponse{DailyCapMicros: 1_000_000, DefaultCap: true, RemainingTodayMicros: 1_000_000}), nil
}

// hold makes every operation from now on wait before its last step until
// the answered function is called.
func (f *fakeBoxes) hold() (release func()) {
	gate := make(chan struct{})
	f.mu.Lock()
	f.gate = gate
	f.mu.Unlock()
	return func() { close(gate) }
}

// only is the first step of the one operation begun so far.
func (f *fakeBoxes) only(t *testing.T) *controlv1.Operation {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ops) != 1 {
		t.Fatalf("%d operations, want one", len(f.ops))
	}
	for _, op := range f.ops {
		return op.steps[0]
	}
	return nil
}
