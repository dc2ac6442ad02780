//go:build booted

package offload

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest/repocorpus"
	"github.com/cocoonbox/cocoonbox/packer"
	"github.com/cocoonbox/cocoonbox/tests/box"
	"github.com/cocoonbox/cocoonbox/tests/offload/offloadbox"
)

// backs is how many BACKs the stand-in CLI has been given in all.
func backs(t *testing.T, r *rig) int {
	n := 0
	for _, m := range offloadbox.Messages(t, r.b, "claude") {
		if strings.Contains(m, "BACK: ") {
			n++
		}
	}
	return n
}

// Issue 22, Deliver 4: every offload converges. The answer of a box verb
// is lost after the box acted (offloadbox.Dropping: the connection drops,
// exit 255); the same command run again ends done, never stuck in
// flight, and the CLI gets one BACK for the offload.
func lostAnswers(t *testing.T, r *rig) {
	for _, c := range []struct {
		name string
		drop func([]string) bool
		// offload: the answer lost is the offload's (send's), so the
		// offload is what runs again.
		offload bool
	}{
		{"send", offloadbox.VerbArgs("send", "--id"), true},
		{"send --back", offloadbox.VerbArgs("send", "--back"), false},
		{"read with the back", offloadbox.VerbArgs("read", "--wait", "60"), false},
		{"end", offloadbox.VerbArgs("end"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := r.packer(t, t.TempDir())
			top, key := repo(t, p, "lost-"+strings.NewReplacer(" ", "-").Replace(c.name), "standin: commit")
			plain := p.Transport
			drop := offloadbox.NewDropping(r.tr, c.drop)
			p.Transport = drop
			before := backs(t, r)
			var id string
			if c.offload {
				_, err := p.Offload(context.Background(), packer.OffloadOptions{Dir: top, Kind: "claude"})
				var f *packer.Failure
				if !drop.Dropped.Load() || !errors.As(err, &f) || !strings.Contains(f.Error(), "answer was lost") || !strings.Contains(f.Error(), "cocoonbox offload again") {
					t.Fatalf("offload with send's answer lost: %v (dropped %v)", err, drop.Dropped.Load())
				}
				rec, _ := p.Dirs.LoadRecord(key)
				if rec == nil || !rec.Unconfirmed {
					t.Fatalf("offload.json after the lost answer: %+v", rec)
				}
				p.Transport = plain
				res, err := p.Offload(context.Background(), packer.OffloadOptions{Dir: top, Kind: "claude"})
				if err != nil || res.ID != rec.ID {
					t.Fatalf("the rerun: %v %+v, want the offload %s the box took", err, res, rec.ID)
				}
				id = rec.ID
			} else {
				p.Transport = plain
				id = offloadRepo(t, p, top).ID
				p.Transport = drop
				_, err := p.Back(context.Background(), top, false)
				if !drop.Dropped.Load() || err == nil {
					t.Fatalf("back with %s's answer lost: %v (dropped %v)", c.name, err, drop.Dropped.Load())
				}
				t.Logf("back with %s's answer lost: %v", c.name, err)
				p.Transport = plain
			}
			back, err := p.Back(context.Background(), top, false)
			if err != nil || back.ID != id || back.Merge.Case != packer.CaseFastForward {
				t.Fatalf("back (run again): %v %+v", err, back)
			}
			if got := git(t, top, "log", "-1", "--format=%s"); got != "standin turn 1" {
				t.Errorf("HEAD is %q, want the box's one commit", got)
			}
			if back.Base != "refs/cocoonbox/base/"+id {
				t.Errorf("the answer's base %q does not name S", back.Base)
			}
			if refs := git(t, top, "for-each-ref", "refs/cocoonbox/base/", "refs/cocoonbox/back/"); refs != "" {
				t.Errorf("S and S′ are kept after back (issue 39, Deliver 3): %s", refs)
			}
			if n := backs(t, r) - before; n != 1 {
				t.Errorf("the CLI got %d BACKs for one offload", n)
			}
			if strings.Contains(git(t, top, "for-each-ref", "refs/heads/cocoonbox"), "back-") {
				t.Error("a second merge took the branch")
			}
			if rec, _ := p.Dirs.LoadRecord(key); rec != nil {
				t.Errorf("offload.json left: %+v", rec)
			}
		})
	}
}

// Issue 22, Deliver 2 and Must show: every shape of the corpus offloaded
// into the booted box (the real host packer, the stand-in transport, the
// box's real verbs, inbox, tmux and the stand-in CLI) and brought back,
// or refused with the finding that names it.
func corpus(t *testing.T, r *rig) {
	for _, shape := range repocorpus.Shapes() {
		t.Run(shape.Name, func(t *testing.T) {
			p := r.packer(t, t.TempDir())
			top := shape.Make(t)
			key := packer.RepoKey(top)
			if err := p.Dirs.Ensure(key); err != nil {
				t.Fatal(err)
			}
			write(t, p.Dirs.Repo(key), "handover.md", offloadtest.Handover("the corpus shape "+shape.Name, "standin: commit"))
			head := git(t, top, "rev-parse", "HEAD")
			// Each shape's own copy (most are clones, all named clone).
			res, err := p.Offload(context.Background(), packer.OffloadOptions{Dir: top, Kind: "claude", Name: "corpus-" + shape.Name})
			if shape.Outcome == repocorpus.Refused {
				var ref *packer.Refusal
				if !errors.As(err, &ref) || !hasFinding(ref.Findings, shape.Finding) {
					t.Fatalf("offload of %s: %v, want refused with %q", shape.Name, err, shape.Finding)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil || !res.Accepted {
				t.Fatalf("offload of %s: %v %+v\nprogress:\n%s", shape.Name, err, res, r.progress)
			}
			if shape.Finding != "" && !hasFinding(res.Findings, shape.Finding) {
				t.Errorf("no %q finding: %+v", shape.Finding, res.Findings)
			}
			back, err := p.Back(context.Background(), top, false)
			if err != nil {
				t.Fatalf("back of %s: %v\nprogress:\n%s", shape.Name, err, r.progress)
			}
			if back.Merge.Case != packer.CaseFastForward || git(t, top, "rev-parse", "HEAD~1") != head {
				t.Errorf("back of %s: %+v, want the fast-forward onto the box's commit", shape.Name, back.Merge)
			}
			t.Logf("%s: offloaded (rsync %d ms, send %d ms) and back (%s)", shape.Name, res.Timings["rsync"], res.Timings["send"], back.Merge.Case)
		})
	}
}

// failingFetch is the stand-in transport whose remote shell for git and
// rsync fails: back's fetch fails after the wait.
type failingFetch struct{ offloadbox.Transport }

func (failingFetch) Shell() string { return "false" }

// Issue 22: back could never finish after a failure past the wait: seen
// was saved past the box's back entry, so the rerun sent BACK again, and
// a CLI that had stopped meanwhile refused it. The fetch fails, the CLI
// stops; back run again takes the back it read, fetches, merges and ends,
// with one BACK for the offload.
func fetchFailsThenTheCLIStops(t *testing.T, r *rig) {
	p := r.packer(t, t.TempDir())
	top, key := repo(t, p, "lost-stopped", "standin: commit")
	res := offloadRepo(t, p, top)
	before := backs(t, r)
	plain := p.Transport
	p.Transport = failingFetch{r.tr}
	_, err := p.Back(context.Background(), top, false)
	var f *packer.Failure
	if !errors.As(err, &f) || f.Step != "fetch" {
		t.Fatalf("back with a failing fetch: %v", err)
	}
	r.b.Must(t, "runuser", "-u", "user", "--", "tmux", "kill-session", "-t", res.Tmux)
	box.Eventually(t, 30*time.Second, "the session stopped", func() (bool, string) {
		st := offloadbox.Status(t, r.b, key)
		return st == "stopped", st
	})
	p.Transport = plain
	back, err := p.Back(context.Background(), top, false)
	if err != nil || back.Merge.Case != packer.CaseFastForward {
		t.Fatalf("back run again with the CLI stopped: %v %+v", err, back)
	}
	if n := backs(t, r) - before; n != 1 {
		t.Errorf("the CLI got %d BACKs for one offload", n)
	}
}
