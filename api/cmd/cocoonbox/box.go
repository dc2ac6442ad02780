package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// The mutating box commands. Each picks a request id (or takes
// --request-id), so a call retried after a lost answer, here or by the
// caller's script, returns the first call's operation instead of acting
// twice; then it follows the operation through Boxes.Events until done or
// failed. Contract: Boxes (api) ↔ sandboxd; Control MCP (states, phases).

// mutation is what one mutating subcommand needs from its arguments.
type mutation struct {
	sub, name, image, requestID string
	confirm, restore            bool
}

// mutate parses a mutating subcommand, makes its call and follows the
// operation it began.
func mutate(sub string, fs *command.Flags) runner {
	asJSON := fs.Bool("json", false, "print each event as a JSON line")
	requestID := fs.String("request-id", "", "the call's request id (default: a new one); the same id again returns the first call's operation")
	var image *string
	var restore *bool
	if sub == "create" {
		image = fs.String("image", "", "the image ref to boot (cocoonbox images; default: the latest, with --restore the save's)")
		restore = fs.Bool("restore", false, "start from the newest save a deleted box of this NAME left (delete keeps it)")
	}
	var confirm *bool
	if sub == "upgrade" || sub == "delete" {
		confirm = fs.Bool("confirm", false, "yes, do it")
	}
	yes := new(bool)
	if sub == "hibernate" || sub == "upgrade" {
		yes = fs.Bool("yes", false, "go on without looking for a working offload session in the box")
	}
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		m := mutation{sub: sub, name: optional(pos), requestID: *requestID}
		if image != nil {
			m.image, m.restore = *image, *restore
		}
		if confirm != nil {
			m.confirm = *confirm
		}
		switch {
		case (sub == "create" || sub == "delete") && m.name == "":
			return command.UsageError{Msg: fmt.Sprintf("box %s needs the box's NAME", sub)}
		case sub == "upgrade" && !m.confirm:
			return command.UsageError{Msg: "box upgrade needs --confirm: it moves the box onto the latest image, keeping /home/user and /workspace and dropping every other change"}
		case sub == "delete" && !m.confirm:
			return command.UsageError{Msg: fmt.Sprintf("box delete %q needs --confirm: it removes the box for good, keeping only its newest save (box create %s --restore brings that back)", m.name, m.name)}
		}
		if err := checkBoxArgs(sub, m.name, m.requestID); err != nil {
			return err
		}
		if err := checkImage(sub, m.name, m.image); err != nil {
			return err
		}
		if m.requestID == "" {
			m.requestID = newRequestID()
		}
		client, err := st.boxes()
		if err != nil {
			return err
		}
		if _, watched := watchEffect[sub]; watched && !*yes {
			if err := m.watch(ctx, st, client, stdout, *asJSON); err != nil {
				return err
			}
		}
		what := describe("box "+sub, m.name)
		call := func() (*connect.Response[controlv1.OperationResponse], error) { return m.call(ctx, client) }
		resp, err := retrying(ctx, call, func(err error) {
			fmt.Fprintf(os.Stderr, "cocoonbox: %s: %s: trying again with request id %s (Ctrl-C stops)\n", what, st.why(err), m.requestID)
		})
		if err != nil {
			return st.explainBox(what, err)
		}
		w, tty := progressTo(stdout, os.Stderr, *asJSON)
		p := newProgress(w, *asJSON, tty, resp.Msg.Box)
		op := resp.Msg.Operation
		if op == nil {
			// Ensure of a box that is running already: nothing to follow.
			p.nothingToDo()
			return nil
		}
		end, err := follow(ctx, client, resp.Msg.Box.BoxId, op, resp.Msg.EventsAfter, p)
		if err != nil {
			return st.explainBox(what, err)
		}
		if end.Phase != controlv1.Phase_PHASE_DONE {
			return fmt.Errorf("%s: operation %s failed in phase %s: %s (cocoonbox box status shows the box)", what, end.OperationId, p.lastPhase, end.Error)
		}
		return nil
	}
}

// call makes the subcommand's Boxes call.
func (m mutation) call(ctx context.Context, c controlv1connect.BoxesClient) (*connect.Response[controlv1.OperationResponse], error) {
	op := &controlv1.BoxOperationRequest{RequestId: m.requestID, Box: m.name}
	confirmed := &controlv1.ConfirmedBoxRequest{RequestId: m.requestID, Box: m.name, Confirm: m.confirm}
	switch m.sub {
	case "create":
		return c.Create(ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: m.requestID, Name: m.name, Image: m.image, Restore: m.restore}))
	case "ensure":
		return c.Ensure(ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: m.requestID, Box: m.name}))
	case "hibernate":
		return c.Hibernate(ctx, connect.NewRequest(op))
	case "save":
		return c.Save(ctx, connect.NewRequest(op))
	case "upgrade":
		return c.Upgrade(ctx, connect.NewRequest(confirmed))
	default: // delete: mutate admits no other
		return c.Delete(ctx, connect.NewRequest(confirmed))
	}
}

// checkBoxArgs refuses a box NAME (or box id) and a --request-id that
// break the api's grammar (api/client's, which the api checks with), with
// the rule, before any call: a call would only be refused, after the
// retries a lost answer gets. Empty is no argument.
func checkBoxArgs(sub, name, requestID string) error {
	if name != "" && !client.BoxName.MatchString(name) {
		return command.UsageError{Msg: fmt.Sprintf("box %s: NAME %q %s", sub, shorten(name), client.BoxNameRule)}
	}
	if requestID != "" && !client.RequestID.MatchString(requestID) {
		return command.UsageError{Msg: fmt.Sprintf("box %s %q: --request-id %q %s", sub, name, shorten(requestID), client.RequestIDRule)}
	}
	return nil
}

// checkImage refuses an --image that is no image ref (api/client's
// grammar, which the api reads refs with) before any call; "" is none.
func checkImage(sub, name, image string) error {
	if image != "" && !client.ImageRef.MatchString(image) {
		return command.UsageError{Msg: fmt.Sprintf("box %s %q: --image %q %s (cocoonbox images lists them)", sub, name, shorten(image), client.ImageRefRule)}
	}
	return nil
}

// shorten is s cut to 80 bytes with "..." after, so that a refusal of a
// long argument stays one line.
func shorten(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "..."
}

// newRequestID is "cli-" and 16 random hex digits, inside the contract's
// request id grammar (1 to 64 of [A-Za-z0-9_.:-]).
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return "cli-" + hex.EncodeToString(b[:])
}

// retryTries bounds how often a call that got no answer from the api
// (or whose refusal says it may be retried) is made again with the same
// request id.
const retryTries = 6

// retrying makes call until it answers or fails for a reason other than
// one client.Retryable admits, backing off from 250 ms to 4 s; it tells
// why (again) once, before the first new try, not before each.
// Safe only for calls carrying a request id, or reading.
func retrying[T any](ctx context.Context, call func() (T, error), again func(error)) (T, error) {
	wait := 250 * time.Millisecond
	for try := 1; ; try++ {
		v, err := call()
		if err == nil || !client.Retryable(err) || try == retryTries {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		if try == 1 {
			again(err)
		}
		wait = min(2*wait, 4*time.Second)
	}
}
