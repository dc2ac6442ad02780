package main

import (
	"fmt"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// load is every verb's first step: the whole assignment, checked, and
// NAME matched against its feature.
func (e *env) load() (*rundir.Run, error) {
	r, err := rundir.Load(e.opt, e.o.runID)
	if err != nil {
		return nil, err
	}
	if r.Assignment.Feature != e.o.name {
		return nil, branchbox.Refuse(branchbox.RuleRunDirectory, r.Dir+"/"+branchbox.AssignmentFile,
			"is the assignment of feature %q, not %q", r.Assignment.Feature, e.o.name)
	}
	return r, nil
}

// checkReport is check's JSON.
type checkReport struct {
	Status        string          `json:"status"`
	RunID         string          `json:"run_id"`
	Feature       string          `json:"feature"`
	Version       string          `json:"version"`
	OwnerUID      uint32          `json:"owner_uid"`
	Branch        string          `json:"branch"`
	Repository    string          `json:"repository"`
	Workspace     string          `json:"workspace"`
	ConsumerUID   *uint32         `json:"workspace_consumer_uid,omitempty"`
	ManagedLaunch managedLaunch   `json:"managed_launch"`
	Leases        []leaseReport   `json:"leases"`
	Sources       []rundir.Source `json:"sources"`
}

type managedLaunch struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
}

type leaseReport struct {
	LeaseID  string          `json:"lease_id"`
	Scope    branchbox.Scope `json:"scope"`
	Consumer string          `json:"consumer"`
	Expires  string          `json:"expires_at"`
	Summary  string          `json:"summary"`
}

func (e *env) check() int {
	r, err := e.load()
	if err != nil {
		return e.fail(err)
	}
	defer r.Close()
	a := r.Assignment
	rep := checkReport{Status: "valid", RunID: a.RunID, Feature: a.Feature, Version: a.Version, OwnerUID: r.Owner,
		Branch: a.Branch, Repository: a.Repository.Path, Workspace: a.Workspace.Path,
		ConsumerUID: a.Workspace.ConsumerUID, Sources: r.Sources, Leases: []leaseReport{}}
	if err := branchbox.ManagedLaunchError(a); err != nil {
		rep.ManagedLaunch.Reason = err.Error()
	} else {
		rep.ManagedLaunch.Allowed = true
	}
	for _, l := range a.Leases {
		rep.Leases = append(rep.Leases, leaseReport{l.LeaseID, l.Scope, l.Consumer, l.ExpiresAt, l.Summary()})
	}
	e.log.Send(journal.Info, msgDone, fmt.Sprintf("check %s: valid (version %s, %d leases)", a.Feature, a.Version, len(a.Leases)))
	if e.o.json {
		e.printJSON(rep)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "%s: valid version %s assignment of run %s (owner uid %d)\n", r.Dir+"/"+branchbox.AssignmentFile, a.Version, a.RunID, r.Owner)
	fmt.Fprintf(e.stdout, "workspace: branch %s at %s from %s, checked out into %s", a.Branch, a.Repository.Base, a.Repository.Path, a.Workspace.Path)
	if u := a.Workspace.ConsumerUID; u != nil {
		fmt.Fprintf(e.stdout, ", delegated to uid %d gid %d", *u, *a.Workspace.ConsumerGID)
	}
	fmt.Fprintln(e.stdout)
	for _, l := range rep.Leases {
		fmt.Fprintf(e.stdout, "lease %s (until %s)\n", l.Summary, l.Expires)
	}
	for _, s := range r.Sources {
		fmt.Fprintf(e.stdout, "source %s: %s of lease %s, checked\n", s.Path, s.Kind, s.LeaseID)
	}
	if rep.ManagedLaunch.Allowed {
		fmt.Fprintln(e.stdout, "managed Dev Containers launch: allowed")
	} else {
		fmt.Fprintf(e.stdout, "managed Dev Containers launch: refused: %s\n", rep.ManagedLaunch.Reason)
	}
	return exitOK
}
