// Package wire carries the sandbox interface over connect-go: Handler
// serves a sandbox.Supervisor as cocoonbox.sandbox.v1.Sandbox (what
// cocoonbox-sandboxd runs), and Client is a sandbox.Supervisor that calls
// one, so the api drives a supervisor on another host as it drives the
// embedded one.
//
// Contract: Boxes (api) ↔ sandboxd (api/proto/cocoonbox/sandbox/v1).
// Errors cross as connect codes and come back wrapping the same sandbox
// sentinels, so errors.Is works on either side of the wire.
package wire

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"connectrpc.com/connect"
	sandboxv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var states = map[sandbox.State]sandboxv1.State{
	sandbox.Stopped:    sandboxv1.State_STATE_STOPPED,
	sandbox.Starting:   sandboxv1.State_STATE_STARTING,
	sandbox.Running:    sandboxv1.State_STATE_RUNNING,
	sandbox.Hibernated: sandboxv1.State_STATE_HIBERNATED,
	sandbox.Failed:     sandboxv1.State_STATE_FAILED,
	sandbox.Absent:     sandboxv1.State_STATE_ABSENT,
}

func stateFromProto(s sandboxv1.State) sandbox.State {
	for k, v := range states {
		if v == s {
			return k
		}
	}
	return ""
}

func machineToProto(m sandbox.Machine) *sandboxv1.Machine {
	p := &sandboxv1.Machine{Id: m.ID, Tenant: m.Tenant, Image: m.Image, State: states[m.State],
		Address: m.Address, Leader: int32(m.Leader), MachineId: m.MachineID}
	if !m.Booted.IsZero() {
		p.Booted = timestamppb.New(m.Booted)
	}
	return p
}

func machineFromProto(p *sandboxv1.Machine) sandbox.Machine {
	m := sandbox.Machine{ID: p.GetId(), Tenant: p.GetTenant(), Image: p.GetImage(), State: stateFromProto(p.GetState()),
		Address: p.GetAddress(), Leader: int(p.GetLeader()), MachineID: p.GetMachineId()}
	if p.GetBooted() != nil {
		m.Booted = p.GetBooted().AsTime()
	}
	return m
}

func specToProto(s sandbox.Spec) *sandboxv1.Spec {
	return &sandboxv1.Spec{Id: s.ID, Tenant: s.Tenant, Image: s.Image}
}

func specFromProto(p *sandboxv1.Spec) sandbox.Spec {
	return sandbox.Spec{ID: p.GetId(), Tenant: p.GetTenant(), Image: p.GetImage()}
}

func saveToProto(s sandbox.SaveInfo) *sandboxv1.SaveInfo {
	return &sandboxv1.SaveInfo{Id: s.ID, Machine: s.Machine, Tenant: s.Tenant, Image: s.Image, Size: s.Size,
		Created: timestamppb.New(s.Created)}
}

func saveFromProto(p *sandboxv1.SaveInfo) sandbox.SaveInfo {
	return sandbox.SaveInfo{ID: p.GetId(), Machine: p.GetMachine(), Tenant: p.GetTenant(), Image: p.GetImage(),
		Size: p.GetSize(), Created: p.GetCreated().AsTime()}
}

func eventToProto(e sandbox.Event) *sandboxv1.Event {
	return &sandboxv1.Event{Seq: e.Seq, Machine: e.Machine, Tenant: e.Tenant, State: states[e.State],
		Time: timestamppb.New(e.Time), Detail: e.Detail}
}

func eventFromProto(p *sandboxv1.Event) sandbox.Event {
	return sandbox.Event{Seq: p.GetSeq(), Machine: p.GetMachine(), Tenant: p.GetTenant(), State: stateFromProto(p.GetState()),
		Time: p.GetTime().AsTime(), Detail: p.GetDetail()}
}

func claimsToProto(es []sandbox.ClaimEntry) []*sandboxv1.ClaimEntry {
	out := make([]*sandboxv1.ClaimEntry, len(es))
	for i, e := range es {
		out[i] = &sandboxv1.ClaimEntry{Name: e.Name, Value: e.Value, Guest: e.Guest, Hosts: e.Hosts, How: e.How}
	}
	return out
}

func claimsFromProto(ps []*sandboxv1.ClaimEntry) []sandbox.ClaimEntry {
	out := make([]sandbox.ClaimEntry, len(ps))
	for i, p := range ps {
		out[i] = sandbox.ClaimEntry{Name: p.GetName(), Value: p.GetValue(), Guest: p.GetGuest(), Hosts: p.GetHosts(), How: p.GetHow()}
	}
	return out
}

func fileFromProto(p *sandboxv1.PutFileRequest) sandbox.File {
	return sandbox.File{Path: p.GetPath(), Data: p.GetData(), Mode: fs.FileMode(p.GetMode()), Owner: p.GetOwner()}
}

func sizeToProto(w *sandbox.WindowSize) *sandboxv1.WindowSize {
	if w == nil {
		return nil
	}
	return &sandboxv1.WindowSize{Rows: uint32(w.Rows), Cols: uint32(w.Cols)}
}

func sizeFromProto(p *sandboxv1.WindowSize) (*sandbox.WindowSize, error) {
	if p == nil {
		return nil, nil
	}
	if p.Rows > 0xffff || p.Cols > 0xffff {
		return nil, sandbox.Invalid("tty.size", "%dx%d: rows and columns are at most 65535", p.Rows, p.Cols)
	}
	return &sandbox.WindowSize{Rows: uint16(p.Rows), Cols: uint16(p.Cols)}, nil
}

// codes maps the sandbox sentinels to connect codes and back.
var codes = []struct {
	err  error
	code connect.Code
}{
	{sandbox.ErrNotFound, connect.CodeNotFound},
	{sandbox.ErrExists, connect.CodeAlreadyExists},
	{sandbox.ErrInvalid, connect.CodeInvalidArgument},
	{sandbox.ErrState, connect.CodeFailedPrecondition},
	{sandbox.ErrCapExceeded, connect.CodeResourceExhausted},
	{sandbox.ErrUnavailable, connect.CodeUnavailable},
}

// toConnect is the one place a supervisor's error becomes a connect code.
// An *InvalidError keeps its "field: rule" as the message.
func toConnect(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			var inv *sandbox.InvalidError
			if errors.As(err, &inv) {
				return connect.NewError(c.code, inv)
			}
			return connect.NewError(c.code, err)
		}
	}
	return connect.NewError(connect.CodeInternal, err)
}

// fromConnect turns a call's error back into one that wraps the sentinel
// of its code (and an *InvalidError for invalid_argument).
func fromConnect(op string, err error) error {
	if err == nil {
		return nil
	}
	code := connect.CodeOf(err)
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	if code == connect.CodeInvalidArgument {
		field, rule, ok := strings.Cut(msg, ": ")
		if !ok {
			field, rule = op, msg
		}
		return &sandbox.InvalidError{Field: field, Rule: rule}
	}
	for _, c := range codes {
		if c.code == code {
			return fmt.Errorf("sandboxd %s: %s: %w", op, msg, c.err)
		}
	}
	return fmt.Errorf("sandboxd %s: %w", op, err)
}
