package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/devcontainer"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/feature"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/toolrequest"
	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// RelayTimeout bounds one relay to the endpoint (Security contract: Unix
// relay operations are time-bounded); the wait window bounds them all.
const relayTimeout = 30 * time.Second

// dispatch is dispatch-tool: the provider user checked again in the
// launched container, then one request of the lease dispatched (package
// dispatch) within --wait-seconds.
func (e *env) dispatch() int {
	r, err := e.load()
	if err != nil {
		return e.fail(err)
	}
	defer r.Close()
	s, err := e.spool(r)
	if err != nil {
		return e.fail(err)
	}
	s.Trace = func(step toolrequest.Step) {
		e.log.Send(journal.Info, msgStep, fmt.Sprintf("dispatch %s %s: %s", e.o.lease, e.o.requestID, step),
			"BRANCHBOX_LEASE", e.o.lease, "BRANCHBOX_REQUEST_ID", e.o.requestID)
	}
	res, err := toolrequest.Dispatch(context.Background(), s, e.o.requestID, time.Duration(e.o.wait)*time.Second)
	var status string
	switch {
	case errors.Is(err, toolrequest.ErrNotPending):
		status = "not-pending"
	case errors.Is(err, toolrequest.ErrRetryLater):
		status = "transport-retry"
	case err != nil:
		return e.fail(err)
	}
	if status != "" {
		e.log.Send(journal.Info, msgDispatch, fmt.Sprintf("dispatch %s %s: %s, try again: %v", e.o.lease, e.o.requestID, status, err),
			"BRANCHBOX_LEASE", e.o.lease, "BRANCHBOX_REQUEST_ID", e.o.requestID)
		if e.o.json {
			e.printJSON(map[string]any{"status": status, "retryable": true, "request_id": e.o.requestID, "error": err.Error()})
		} else {
			fmt.Fprintf(e.stderr, "branchbox: dispatch-tool: %v (try again)\n", err)
		}
		return exitTryLater
	}
	e.log.Send(journal.Info, msgDispatch, fmt.Sprintf("dispatch %s %s: dispatched (cached: %v), %s", e.o.lease, e.o.requestID, res.Cached, res.Response),
		"BRANCHBOX_LEASE", e.o.lease, "BRANCHBOX_REQUEST_ID", e.o.requestID)
	if e.o.json {
		e.printJSON(res)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "dispatched %s: response %s (cached: %v)\n", e.o.requestID, res.Response, res.Cached)
	return exitOK
}

// spool finds the lease's spool as the dispatcher needs it, once the
// launched container's provider user is checked again (Security contract:
// "before spool initialization and again before dispatch").
func (e *env) spool(r *rundir.Run) (*toolrequest.Spool, error) {
	a := r.Assignment
	l := a.Lease(e.o.lease)
	if l == nil || l.Scope != branchbox.ScopeToolRequest {
		return nil, branchbox.Refuse(branchbox.RuleToolRequest, "--lease "+e.o.lease, "is not a tool-request lease of run %s", a.RunID)
	}
	endpoint := a.Lease(l.EndpointLeaseID)
	rec, err := feature.ReadRecord(e.o.root, a.RunID)
	if err != nil {
		return nil, fmt.Errorf("run %s is not launched (feature launch first): %w", a.RunID, err)
	}
	c, err := engine.Connect()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx := context.Background()
	ct, err := c.ContainerInspect(ctx, rec.Container, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("the launched container %s: %w", rec.Container, err)
	}
	if ct.Container.State == nil || !ct.Container.State.Running {
		return nil, branchbox.Refuse(branchbox.RuleProviderUser, "container "+rec.Container, "is not running")
	}
	if _, _, _, err := engine.ProviderUser(ctx, c, rec.Container, rec.RemoteUser, rec.ContainerUser, ct.Container.Config.User, []uint32{*l.ConsumerUID}); err != nil {
		return nil, err
	}
	dir, err := engine.VolumeDir(ctx, c, devcontainer.VolumeName(a.RunID, l.LeaseID), a.RunID)
	if err != nil {
		return nil, err
	}
	capability, err := r.Value(l, l.Materializations[0])
	if err != nil {
		return nil, err
	}
	ep, err := recordedEndpoint(e.o.root, a.RunID, endpoint.Materializations[0].SourcePath, r.Owner)
	if err != nil {
		return nil, err
	}
	return &toolrequest.Spool{Dir: dir, ConsumerUID: *l.ConsumerUID, Endpoint: ep,
		Policy: l.ReplayPolicy, Ledger: toolrequest.ReplayDir(e.o.root, a.RunID, l.LeaseID), RelayTimeout: relayTimeout,
		Binding: toolrequest.Binding{RunID: a.RunID, LeaseID: l.LeaseID, Consumer: l.Consumer, Capability: capability}}, nil
}

// recordedEndpoint is the endpoint socket at path as the run's ledger
// recorded it at materialize (device, inode), answered by owner or root:
// the relay dials that inode only (toolrequest/relay.go).
func recordedEndpoint(root, runID, path string, owner uint32) (toolrequest.Endpoint, error) {
	l, err := feature.ReadLedger(root, runID)
	if err != nil {
		return toolrequest.Endpoint{}, fmt.Errorf("run %s's ledger: %w", runID, err)
	}
	for _, s := range l.Sources {
		if s.Path == path && s.Kind == rundir.KindSocket {
			return toolrequest.Endpoint{Path: path, Dev: s.Dev, Ino: s.Ino, Owner: owner}, nil
		}
	}
	return toolrequest.Endpoint{}, branchbox.Refuse(branchbox.RuleToolRequest, path, "is not a socket source the run's ledger recorded")
}
