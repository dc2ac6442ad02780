package mcp

import (
	"strings"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// The tools' handlers: each calls the Boxes service and answers the
// object its output schema describes (Contract: Control MCP, the tool
// table and field types).

// msg is a unary call's message, or its error.
func msg[T any](resp *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// maxBoxArg bounds the box argument: an id is 19 bytes, a name at most 63.
const maxBoxArg = 64

// box is the box argument, "" for the caller's first box.
func (c *call) box() (string, error) {
	b := c.str("box")
	if len(b) > maxBoxArg {
		return "", refuse("box: at most %d bytes (a box id, cb- and 16 hex digits, or a name of 1 to 63 of a-z, 0-9 and -), got %d", maxBoxArg, len(b))
	}
	return b, nil
}

// state is a BoxState as the MCP writes it: lower case, no prefix.
func state(s controlv1.BoxState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "BOX_STATE_"))
}

// phase is a Phase as the MCP writes it: lower case, no prefix.
func phase(p controlv1.Phase) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "PHASE_"))
}

// boxArg is the box the call's box argument names, as target answers it.
func (h *Handler) boxArg(c *call) (string, error) {
	box, err := c.box()
	if err != nil {
		return "", err
	}
	return h.target(c, box)
}

func (h *Handler) boxList(c *call) (any, error) {
	boxes, err := h.list(c)
	if err != nil {
		return nil, err
	}
	list := []map[string]any{}
	for _, b := range boxes {
		list = append(list, map[string]any{"box_id": b.BoxId, "name": b.Name, "state": state(b.State),
			"image": b.Image, "last_saved_at_ms": b.LastSavedAtMs})
	}
	return map[string]any{"boxes": list}, nil
}

// status is Status of box (an id or name, "" for the first box).
func (h *Handler) status(c *call, box string) (*controlv1.BoxStatusResponse, error) {
	return msg(h.deps.Boxes.Status(c.ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: box})))
}

// boxStatus answers state absent with empty strings for a caller without
// a box, an agent whose grant has created none included (Contract:
// Control MCP, field types).
func (h *Handler) boxStatus(c *call) (any, error) {
	box, err := h.boxArg(c)
	var st *controlv1.BoxStatusResponse
	switch {
	case err == errNoAgentBox:
		st = &controlv1.BoxStatusResponse{}
	case err != nil:
		return nil, err
	default:
		if st, err = h.status(c, box); err != nil {
			return nil, err
		}
	}
	if st.Box == nil {
		return map[string]any{"box_id": "", "name": "", "state": state(controlv1.BoxState_BOX_STATE_ABSENT), "image": "",
			"latest_image": "", "upgrade_available": false, "last_saved_at_ms": int64(0)}, nil
	}
	b := st.Box
	return map[string]any{"box_id": b.BoxId, "name": b.Name, "state": state(b.State), "image": b.Image,
		"latest_image": st.LatestImage, "upgrade_available": st.UpgradeAvailable, "last_saved_at_ms": b.LastSavedAtMs}, nil
}

// started is a mutating call's answer once waited on (when wait): the
// box as it is after the operation, and the operation's last step (nil
// when there was nothing to do).
type started struct {
	box *controlv1.Box
	op  *controlv1.Operation
	// bytes is the last total_bytes seen in phase saving or after.
	bytes int64
}

// opID is the operation's id, "" when there was none.
func (s started) opID() string { return s.op.GetOperationId() }

// begin runs a mutating call and, when wait, follows its operation to the
// end and reads the box again. Two callers of one operation (an Ensure of
// a box whose wake is under way answers that operation) both wait on it
// and get its result.
func (h *Handler) begin(c *call, wait bool, deleted bool, do func(requestID string) (*controlv1.OperationResponse, error)) (started, error) {
	resp, err := do(requestID())
	if err != nil {
		return started{}, err
	}
	s := started{box: resp.Box, op: resp.Operation}
	if !wait || s.op == nil {
		return s, nil
	}
	if s.op, s.bytes, err = h.await(c, s.op); err != nil || deleted {
		return s, err
	}
	st, err := h.status(c, s.op.BoxId)
	if err != nil {
		return s, err
	}
	s.box = st.Box
	return s, nil
}

// boxEnsure wakes or boots the box; for a user without boxes the service
// creates main, and for an agent whose grant has created none this
// creates its first (agentBoxName), within the grant's caps.
func (h *Handler) boxEnsure(c *call) (any, error) {
	box, err := h.boxArg(c)
	do := func(id string) (*controlv1.OperationResponse, error) {
		return msg(h.deps.Boxes.Ensure(c.ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: id, Box: box})))
	}
	if err == errNoAgentBox {
		var name string
		if name, err = h.agentBoxName(c); err == nil {
			do = func(id string) (*controlv1.OperationResponse, error) {
				return msg(h.deps.Boxes.Create(c.ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: id, Name: name})))
			}
		}
	}
	if err != nil {
		return nil, err
	}
	s, err := h.begin(c, c.flag("wait"), false, do)
	if err != nil {
		return nil, err
	}
	return map[string]any{"box_id": s.box.GetBoxId(), "state": state(s.box.GetState()), "operation_id": s.opID()}, nil
}

func (h *Handler) boxCreate(c *call) (any, error) {
	name, image := c.str("name"), c.str("image")
	s, err := h.begin(c, c.flag("wait"), false, func(id string) (*controlv1.OperationResponse, error) {
		return msg(h.deps.Boxes.Create(c.ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: id, Name: name, Image: image})))
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"box_id": s.box.GetBoxId(), "name": s.box.GetName(), "state": state(s.box.GetState()), "operation_id": s.opID()}, nil
}

// boxOperation runs Hibernate or Save of the box argument, waiting.
func (h *Handler) boxOperation(c *call, do func(*controlv1.BoxOperationRequest) (*controlv1.OperationResponse, error)) (started, error) {
	box, err := h.boxArg(c)
	if err != nil {
		return started{}, err
	}
	return h.begin(c, true, false, func(id string) (*controlv1.OperationResponse, error) {
		return do(&controlv1.BoxOperationRequest{RequestId: id, Box: box})
	})
}

func (h *Handler) boxHibernate(c *call) (any, error) {
	s, err := h.boxOperation(c, func(r *controlv1.BoxOperationRequest) (*controlv1.OperationResponse, error) {
		return msg(h.deps.Boxes.Hibernate(c.ctx, connect.NewRequest(r)))
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"box_id": s.box.GetBoxId(), "state": state(s.box.GetState()), "operation_id": s.opID()}, nil
}

func (h *Handler) boxSave(c *call) (any, error) {
	s, err := h.boxOperation(c, func(r *controlv1.BoxOperationRequest) (*controlv1.OperationResponse, error) {
		return msg(h.deps.Boxes.Save(c.ctx, connect.NewRequest(r)))
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"box_id": s.box.GetBoxId(), "last_saved_at_ms": s.box.GetLastSavedAtMs(), "operation_id": s.opID(), "bytes": s.bytes}, nil
}

// confirmed runs Upgrade or Delete of the box argument once confirm is
// true, waiting; without it the tool refuses and changes nothing.
func (h *Handler) confirmed(c *call, kind string, do func(*controlv1.ConfirmedBoxRequest) (*controlv1.OperationResponse, error)) (started, error) {
	box, err := c.box()
	if err != nil {
		return started{}, err
	}
	if !c.flag("confirm") {
		return started{}, refuse("confirm: must be true; ask the user to confirm the %s of %s, then call again with confirm: true", kind, orFirst(box))
	}
	if box, err = h.target(c, box); err != nil {
		return started{}, err
	}
	return h.begin(c, true, kind == "delete", func(id string) (*controlv1.OperationResponse, error) {
		return do(&controlv1.ConfirmedBoxRequest{RequestId: id, Box: box, Confirm: true})
	})
}

// orFirst names the box argument in a message.
func orFirst(box string) string {
	if box == "" {
		return "your first box"
	}
	return "box " + box
}

func (h *Handler) boxUpgrade(c *call) (any, error) {
	s, err := h.confirmed(c, "upgrade", func(r *controlv1.ConfirmedBoxRequest) (*controlv1.OperationResponse, error) {
		return msg(h.deps.Boxes.Upgrade(c.ctx, connect.NewRequest(r)))
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"box_id": s.box.GetBoxId(), "state": state(s.box.GetState()), "image": s.box.GetImage(), "operation_id": s.opID()}, nil
}

func (h *Handler) boxDelete(c *call) (any, error) {
	s, err := h.confirmed(c, "delete", func(r *controlv1.ConfirmedBoxRequest) (*controlv1.OperationResponse, error) {
		return msg(h.deps.Boxes.Delete(c.ctx, connect.NewRequest(r)))
	})
	if err != nil {
		return nil, err
	}
	boxID := s.op.GetBoxId()
	if boxID == "" {
		boxID = s.box.GetBoxId()
	}
	return map[string]any{"box_id": boxID, "operation_id": s.opID()}, nil
}

func (h *Handler) usage(c *call) (any, error) {
	u, err := msg(h.deps.Boxes.Usage(c.ctx, connect.NewRequest(&controlv1.UsageRequest{})))
	if err != nil {
		return nil, err
	}
	return map[string]any{"today": u.TodayMicros, "month": u.MonthMicros, "daily_cap_micros": u.DailyCapMicros,
		"default_cap": u.DefaultCap, "remaining_today_micros": u.RemainingTodayMicros}, nil
}
