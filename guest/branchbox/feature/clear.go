package feature

import (
	"context"
	"fmt"
	"strings"

	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
)

// clearUnfinished removes from the engine what an unfinished launch of
// run runID left, so that a launch starts from the state a clean one
// does, and returns what it removed ("volume NAME", "container NAME",
// "network NAME").
//
// Contract: "Shared directory, tool endpoint, and request-spool leases"
// (the spool is a run-and-lease-derived volume that BranchBox
// initializes), the Security contract's teardown ("every exact request
// volume"), and the manifest's refusal of reuse (a later launch uses
// nothing a previous one left). A launch killed after it created the run's
// volumes (SIGKILL: no deferred removal runs) left them, filled, with
// perhaps the project's containers and networks and the port proxy; the
// engine's VolumeCreate would hand the old workspace volume back and the
// copy into it fail on the first file ("file exists"), the old spool be
// refused as used. A launch whose failure was handled removed all of that
// already: a killed one is a failed one whose removal did not run, and
// this runs it.
//
// Only what is provably this run's is removed: exactly what teardown's
// engine side removes (engine.RemoveRun), found by BranchBox's label
// io.branchbox.run=<run> and the Compose project branchbox-<run>, labels a
// repository cannot set (devcontainer's reserved labels). A same-named
// volume without this run's label stays, and engine.CreateVolume refuses
// it (rule request-spool). The caller holds the run's lock and has checked
// that the run has no launch record (a launched run is refused, rule
// no-reuse), so no finished or running launch of the run is touched.
// When something cannot be removed, the error names it and what was
// removed.
func clearUnfinished(ctx context.Context, c *client.Client, runID, project string) ([]string, error) {
	rs, err := engine.RemoveRun(ctx, c, runID, project)
	removed, failed := split(rs)
	if err == nil && len(failed) > 0 {
		err = fmt.Errorf("cannot remove %s", strings.Join(failed, "; "))
	}
	if err != nil {
		return removed, fmt.Errorf("clearing what an unfinished launch of run %s left (removed: %s): %w", runID, strings.Join(removed, ", "), err)
	}
	return removed, nil
}

// split is what a removal (engine.RemoveRun) removed, by object, and
// what it could not, each with its error.
func split(rs []engine.Removed) (removed, failed []string) {
	for _, r := range rs {
		if r.Err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", r.Object, r.Err))
		} else {
			removed = append(removed, r.Object)
		}
	}
	return removed, failed
}
