package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/devcontainer"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/feature"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/workspace"
	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// materialize checks the assignment and the shared Git metadata, checks
// the branch out into the workspace (delegated for version 3) and records
// the ledger teardown reads.
func (e *env) materialize() int {
	r, err := e.load()
	if err != nil {
		return e.fail(err)
	}
	defer r.Close()
	if _, err := feature.ReadLedger(e.o.root, r.Assignment.RunID); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			err = branchbox.Refuse(branchbox.RuleReuse, feature.LedgerPath(e.o.root, r.Assignment.RunID), "run %s is already materialized; tear it down and start a new run", r.Assignment.RunID)
		}
		return e.fail(err)
	}
	res, err := workspace.Checkout(r, e.o.reuse)
	if err != nil {
		return e.fail(err)
	}
	a := r.Assignment
	l := &feature.Ledger{RunID: a.RunID, Feature: a.Feature, Version: a.Version, OwnerUID: r.Owner,
		Repository: a.Repository.Path, Workspace: res, Sources: r.Sources, MaterializedAt: time.Now().UTC()}
	if err := feature.WriteLedger(e.o.root, l); err != nil {
		return e.fail(err)
	}
	e.log.Send(journal.Info, msgDone, fmt.Sprintf("materialized %s: branch %s in %s (delegated: %v), %d sources", a.Feature, a.Branch, res.Path, res.Delegated, len(r.Sources)),
		"BRANCHBOX_WORKSPACE", res.Path)
	if e.o.json {
		e.printJSON(map[string]any{"status": "materialized", "run_id": a.RunID, "feature": a.Feature,
			"workspace": res, "sources": r.Sources, "ledger": feature.LedgerPath(e.o.root, a.RunID)})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "materialized %s: branch %s checked out in %s", a.Feature, a.Branch, res.Path)
	if res.Delegated {
		fmt.Fprintf(e.stdout, ", delegated to group %d (the shared Git metadata too: teardown needs --force)", res.ConsumerGID)
	}
	fmt.Fprintf(e.stdout, "\nledger: %s (%d sources)\n", feature.LedgerPath(e.o.root, a.RunID), len(r.Sources))
	return exitOK
}

// teardown removes the run and writes its receipt; residue exits 1.
func (e *env) teardown() int {
	rc, err := feature.Teardown(e.opt, e.o.runID, e.o.name, e.o.force, e.removeEngine())
	if err != nil && rc == nil {
		return e.fail(err)
	}
	code := exitOK
	if err != nil {
		e.fail(err)
		code = exitCode(err)
	} else if !rc.ResidueFree {
		code = exitFailed
		for _, r := range rc.Residue {
			e.log.Send(journal.Err, msgResidue, fmt.Sprintf("teardown %s left %s: %s", e.o.name, r.Path, r.Error), "BRANCHBOX_PATH", r.Path)
		}
	}
	e.log.Send(journal.Info, msgDone, fmt.Sprintf("teardown %s: %d removed, %d residue, receipt %s", e.o.name, len(rc.Removed), len(rc.Residue), rc.Path))
	if e.o.json {
		e.printJSON(rc)
		return code
	}
	for _, p := range rc.Removed {
		fmt.Fprintf(e.stdout, "removed %s\n", p)
	}
	for _, r := range rc.Residue {
		fmt.Fprintf(e.stdout, "residue %s: %s\n", r.Path, r.Error)
	}
	fmt.Fprintf(e.stdout, "receipt %s: residue-free %v\n", rc.Path, rc.ResidueFree)
	return code
}

// removeEngine is teardown's engine side: the run's Compose project, port
// proxy and volumes (all named from the signed run id). Without a launch
// record an unreachable engine means nothing was launched; with one it is
// residue.
func (e *env) removeEngine() func() ([]engine.Removed, error) {
	_, noRecord := feature.ReadRecord(e.o.root, e.o.runID)
	return func() ([]engine.Removed, error) {
		c, err := engine.Connect()
		if err == nil {
			defer c.Close()
			if _, err = c.Ping(context.Background(), client.PingOptions{}); err == nil {
				return engine.RemoveRun(context.Background(), c, e.o.runID, devcontainer.ProjectName(e.o.runID))
			}
		}
		if noRecord != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("the run was launched and the Docker engine cannot be reached: %w", err)
	}
}
