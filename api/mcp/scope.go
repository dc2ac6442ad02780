package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// Scope is what the tools need to keep an agent's call (a cba_ token's,
// its grant in the context) to the boxes its grant created, within its
// caps (api/agents' Caps).
//
// Contract: OAuth for agents, what a grant reaches: "On the control MCP
// the tools see only the boxes the grant created (box_list, a box name or
// id, the first box without one), within its caps."
type Scope interface {
	// Boxes are the ids of the boxes grantID created that still exist.
	Boxes(ctx context.Context, grantID string) (map[string]bool, error)
	// Agent is the hook of g's operations in the Boxes service: its caps
	// and boxes checked, and the boxes it creates recorded, inside each
	// operation's transaction (boxes.WithAgent).
	Agent(g *oauth.Grant) *boxes.Agent
}

// errNoScope fails an agent's call closed when the MCP was built without
// a Scope: it would act on the whole account.
var errNoScope = errors.New("an agent's call reached the control MCP without its grant's scope")

// scoped is ctx for a tool call: under an agent's token, every operation
// it begins carries the grant's Agent (its caps, its boxes recorded), and
// the call its grant; a user's own call is unchanged.
func (h *Handler) scoped(ctx context.Context) (context.Context, *oauth.Grant, error) {
	g, ok := oauth.GrantFrom(ctx)
	if !ok {
		return ctx, nil, nil
	}
	if h.deps.Scope == nil {
		return nil, nil, errNoScope
	}
	return boxes.WithAgent(ctx, h.deps.Scope.Agent(g)), g, nil
}

// list is the caller's boxes, oldest first: under an agent's token only
// those its grant created.
func (h *Handler) list(c *call) ([]*controlv1.Box, error) {
	resp, err := msg(h.deps.Boxes.List(c.ctx, connect.NewRequest(&controlv1.ListBoxesRequest{})))
	if err != nil || c.grant == nil {
		return resp.GetBoxes(), err
	}
	mine, err := h.deps.Scope.Boxes(c.ctx, c.grant.ID)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(slices.Clone(resp.Boxes), func(b *controlv1.Box) bool { return !mine[b.BoxId] }), nil
}

// errNoAgentBox is a call on "your first box" by an agent whose grant has
// created none.
var errNoAgentBox = connect.NewError(connect.CodeNotFound,
	errors.New("this agent has no box yet (its grant reaches only the boxes it creates): box_create or box_ensure makes one: no such box"))

// target is the box a call acts on, as the Boxes service takes it: for a
// user's own call the argument itself (a name, an id, "" for the first
// box); for an agent's, the id of the box of its grant the argument names
// ("" its oldest), and a box of the user or of another grant is answered
// as one that does not exist. The service checks again, in the
// operation's transaction (Scope's Agent).
func (h *Handler) target(c *call, box string) (string, error) {
	if c.grant == nil {
		return box, nil
	}
	list, err := h.list(c)
	if err != nil {
		return "", err
	}
	for _, b := range list {
		if box == "" || b.BoxId == box || b.Name == box {
			return b.BoxId, nil
		}
	}
	if box == "" {
		return "", errNoAgentBox
	}
	return "", connect.NewError(connect.CodeNotFound, fmt.Errorf("box %q: no such box", box))
}

// agentBoxName is the name box_ensure gives an agent's first box: the
// first of agent, agent-2, agent-3, ... the user has no box by.
func (h *Handler) agentBoxName(c *call) (string, error) {
	resp, err := msg(h.deps.Boxes.List(c.ctx, connect.NewRequest(&controlv1.ListBoxesRequest{})))
	if err != nil {
		return "", err
	}
	taken := map[string]bool{}
	for _, b := range resp.Boxes {
		taken[b.Name] = true
	}
	name := "agent"
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("agent-%d", i)
	}
	return name, nil
}
