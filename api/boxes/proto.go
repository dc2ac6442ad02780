package boxes

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// stateProto is a state's enum value (Contract: Control MCP: the proto
// names lower-cased without their prefix are the states).
func stateProto(s string) controlv1.BoxState {
	return controlv1.BoxState(controlv1.BoxState_value["BOX_STATE_"+strings.ToUpper(s)])
}

func phaseProto(p string) controlv1.Phase {
	return controlv1.Phase(controlv1.Phase_value["PHASE_"+strings.ToUpper(p)])
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// proto is the box as cocoonbox.control.v1 answers it.
func (b *Box) proto() *controlv1.Box {
	pb := &controlv1.Box{BoxId: b.ID, Name: b.Name, State: stateProto(b.State), Image: b.Image,
		CreatedAt: timestamp(b.Created), Incarnation: b.Incarnation, Host: b.Host}
	if !b.SavedAt.IsZero() {
		pb.LastSavedAtMs = b.SavedAt.UnixMilli()
	}
	return pb
}

// proto is the operation as cocoonbox.control.v1 answers it.
func (o *Operation) proto() *controlv1.Operation {
	return &controlv1.Operation{OperationId: o.ID, BoxId: o.BoxID, Kind: o.Kind, Phase: phaseProto(o.Phase),
		Error: o.Error, StartedAt: timestamp(o.Started), EndedAt: timestamp(o.Ended), TotalBytes: o.TotalBytes}
}
