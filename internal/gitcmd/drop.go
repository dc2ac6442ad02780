package gitcmd

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DropOffload deletes offload id's refs (S at refs/cocoonbox/base/<id>,
// S′ at refs/cocoonbox/back/<id>) in the repository at dir once the
// offload has ended and its merge is done, and then the loose objects
// that only they reached, so what offloads pin is bounded: an untracked
// file taken into S is kept while the offload is in flight and not after
// (Contract: Offload, Back, Mac side; issue 39, Deliver 3). Only objects
// reachable from the refs and not from S's parent are candidates, and a
// candidate still reachable from any ref, reflog or index of any worktree
// stays, so both walks cover the offload's own objects and what was
// committed since, not the whole history. Objects in packs stay (git
// gc's concern). Refs already gone are no error.
func DropOffload(dir, id string) error {
	base, _ := Run(dir, nil, nil, "rev-parse", "--verify", "-q", "refs/cocoonbox/base/"+id+"^")
	var tips []string
	var del strings.Builder
	for _, ref := range []string{"refs/cocoonbox/base/" + id, "refs/cocoonbox/back/" + id} {
		if oid, err := Run(dir, nil, nil, "rev-parse", "--verify", "-q", ref); err == nil && oid != "" {
			tips = append(tips, oid)
			del.WriteString("delete " + ref + "\n")
		}
	}
	if len(tips) == 0 {
		return nil
	}
	not := []string{}
	if base != "" {
		not = append(not, "^"+base)
	}
	cand, err := objects(dir, append(append([]string{"rev-list", "--objects"}, tips...), not...))
	if err != nil {
		return err
	}
	if _, err := Run(dir, nil, strings.NewReader(del.String()), "update-ref", "--stdin"); err != nil {
		return err
	}
	// git freshens (touches) a loose object it would write again, so one
	// written for something else after the walk begins is newer than it.
	walked := time.Now()
	live, err := objects(dir, append([]string{"rev-list", "--objects", "--all", "--reflog", "--indexed-objects"}, not...))
	if err != nil {
		return err
	}
	objDir, err := GitPath(dir, "objects")
	if err != nil {
		return err
	}
	for oid := range cand {
		if live[oid] {
			continue
		}
		// Only a loose object S took that nothing named at the walk and
		// nothing wrote again since (a git add of the same bytes meanwhile).
		path := filepath.Join(objDir, oid[:2], oid[2:])
		if fi, err := os.Stat(path); err == nil && fi.ModTime().Before(walked) {
			os.Remove(path)
		}
	}
	return nil
}

// objects is the set of object names a rev-list --objects prints.
func objects(dir string, args []string) (map[string]bool, error) {
	out, err := Raw(dir, nil, nil, args...)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if oid, _, _ := strings.Cut(l, " "); len(oid) >= 40 {
			set[oid] = true
		}
	}
	return set, nil
}
