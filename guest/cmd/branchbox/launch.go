package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/feature"
	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// findRun is the one materialized run of feature name (its ledger in
// <root>/state says so), for the verbs the contract shows without --run.
func findRun(root, name string) (string, error) {
	dirs, err := os.ReadDir(filepath.Join(root, "state"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var runs []string
	for _, d := range dirs {
		if l, err := feature.ReadLedger(root, d.Name()); err == nil && l.Feature == name {
			runs = append(runs, l.RunID)
		}
	}
	switch len(runs) {
	case 1:
		return runs[0], nil
	case 0:
		return "", fmt.Errorf("feature %s has no materialized run in %s/state (materialize it first, or name it with --run): %w", name, root, fs.ErrNotExist)
	}
	return "", branchbox.Refuse(branchbox.RuleRunDirectory, filepath.Join(root, "state"), "feature %s has %d materialized runs %v; name one with --run", name, len(runs), runs)
}

// launchStep is told each step of a launch (feature.Options.Step): nil but
// in the tests that race a swapped source against it.
var launchStep func(step string)

// launch starts the run's managed Dev Container (package feature) from
// the materialized workspace and records it for dispatch-tool.
func (e *env) launch() int {
	r, err := e.load()
	if err != nil {
		return e.fail(err)
	}
	defer r.Close()
	l, err := feature.ReadLedger(e.o.root, r.Assignment.RunID)
	if err != nil {
		return e.fail(fmt.Errorf("run %s is not materialized (feature materialize first): %w", r.Assignment.RunID, err))
	}
	if err := r.SameSources(l.Sources); err != nil {
		return e.fail(err)
	}
	if _, err := feature.ReadRecord(e.o.root, r.Assignment.RunID); err == nil {
		return e.fail(branchbox.Refuse(branchbox.RuleReuse, r.Assignment.RunID, "is launched already; tear it down and start a new run"))
	}
	c, err := engine.Connect()
	if err != nil {
		return e.fail(err)
	}
	defer c.Close()
	rec, err := feature.Up(context.Background(), c, r, l.Workspace.Path, feature.Options{CLI: e.o.cli, Facade: feature.FacadeDir(e.o.root, r.Assignment.RunID), Step: launchStep})
	if err != nil {
		return e.fail(err)
	}
	if err := feature.WriteRecord(e.o.root, r.Assignment.RunID, rec); err != nil {
		return e.fail(err)
	}
	cleared := ""
	if len(rec.Cleared) > 0 {
		cleared = "; removed first what an unfinished launch of the run left: " + strings.Join(rec.Cleared, ", ")
	}
	e.log.Send(journal.Info, msgDone, fmt.Sprintf("launch %s: project %s, container %s as %s (uid %d), %d volumes%s", e.o.name, rec.Project, rec.Container, rec.User, rec.UID, len(rec.Volumes), cleared),
		"BRANCHBOX_CONTAINER", rec.Container)
	if e.o.json {
		e.printJSON(map[string]any{"status": "launched", "run_id": r.Assignment.RunID, "feature": e.o.name, "launch": rec})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "launched %s: project %s, primary container %s (service %s) as %s, uid %d\n", e.o.name, rec.Project, rec.Container, rec.Service, rec.User, rec.UID)
	for _, o := range rec.Cleared {
		fmt.Fprintf(e.stdout, "removed first (an unfinished launch's) %s\n", o)
	}
	for name, dir := range rec.Volumes {
		fmt.Fprintf(e.stdout, "volume %s (%s)\n", name, dir)
	}
	if rec.Proxy != "" {
		fmt.Fprintf(e.stdout, "port proxy %s\n", rec.Proxy)
	}
	return exitOK
}
