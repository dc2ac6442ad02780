package packer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// DefaultBackWait is how long back waits in all for the box's back.
const DefaultBackWait = 600 * time.Second

// InFlight is the offload in flight of the repository holding dir, for a
// caller that needs its box before it makes a Packer. A repository with
// none is a *Refusal that names back.md when the box's last back left one
// (Contract: Offload, Entry points).
func (d Dirs) InFlight(dir string) (Repo, *Record, error) {
	repo, err := FindRepo(dir)
	if err != nil {
		return repo, nil, err
	}
	rec, err := d.LoadRecord(repo.Key)
	if err != nil || rec != nil {
		return repo, rec, err
	}
	msg := fmt.Sprintf("no offload of %s is in flight: nothing to bring back", repo.Top)
	if backMD := filepath.Join(d.Repo(repo.Key), "back.md"); fileExists(backMD) {
		msg += "; the last one came back, its hand-over is " + backMD
	}
	return repo, nil, &Refusal{Msg: msg}
}

// BackResult is what back did.
type BackResult struct {
	ID   string `json:"id"`
	Repo string `json:"repo"`
	// Base is S's ref, refs/cocoonbox/base/<id>: the state the box
	// started from, uncommitted work and all. Once back is done the ref is
	// gone (gitcmd.DropOffload), as is SPrime's, S′ (the box's state);
	// they name what the merge was made from.
	Base   string       `json:"base"`
	SPrime string       `json:"s_prime"`
	BackMD string       `json:"back_md"`
	Merge  *MergeResult `json:"merge"`
	// Warnings are what the person should know beside the merge
	// (backWarnings: a stash in the box holding their uncommitted files,
	// a detached HEAD's commits), also on stderr; empty when none.
	Warnings []string `json:"warnings"`
	// Timings are back's steps, in milliseconds.
	Timings map[string]int64 `json:"timings_ms"`
}

// Back brings the offload of the repository holding dir home (Contract:
// Offload, "Back, Mac side"): BACK to the box's session unless its outbox
// already holds this offload's back, the outbox read until that back (at
// most BackWait in all, then a *Failure with the session's status, the
// BACK left queued), the fetch over the transport into
// refs/cocoonbox/box/*, refs/cocoonbox/back/<id> and the box's stash at
// refs/cocoonbox/stash/<id>, the merge against S
// (Merge), then end, and offload.json goes. A merge that refuses (a held
// index.lock, a path in the way) or fails changes nothing and keeps the
// offload in flight, so back can run again.
//
// Every step is recorded in offload.json as it is done (BACK sent, the
// back's seq, the merge's result), so a rerun after a lost answer or a
// kill goes on where the last run stopped: never a second BACK, never a
// second merge.
func (p *Packer) Back(ctx context.Context, dir string, interrupt bool) (*BackResult, error) {
	repo, rec, err := p.Dirs.InFlight(dir)
	if err != nil {
		return nil, err
	}
	res := &BackResult{ID: rec.ID, Repo: rec.Repo, Timings: map[string]int64{}, BackMD: filepath.Join(p.Dirs.Repo(rec.Repo), "back.md"), Base: "refs/cocoonbox/base/" + rec.ID}
	step := func(name string, t time.Time) { res.Timings[name] = time.Since(t).Milliseconds() }
	backRef := "refs/cocoonbox/back/" + rec.ID
	where := fmt.Sprintf("S is refs/cocoonbox/base/%s, the box's state %s", rec.ID, backRef)
	if rec.Merged == nil {
		// A back killed inside its merge is finished or undone first.
		if done, err := RecoverBack(repo.Top, rec.ID); err != nil {
			return nil, &Failure{Step: "merge", Err: err, Left: "the offload stays in flight; " + where}
		} else if done != nil {
			rec.Merged = done
			if err := p.Dirs.SaveRecord(rec); err != nil {
				return nil, err
			}
		}
	}
	if rec.Merged == nil {
		t := time.Now()
		if err := p.waitBack(ctx, rec, res.BackMD, interrupt); err != nil {
			return nil, err
		}
		step("wait", t)

		t = time.Now()
		p.Progress.Printf("fetch: the box's branches and %s from %s", backRef, rec.Dir)
		env := []string{"GIT_SSH_COMMAND=" + p.Transport.Shell(), "GIT_SSH_VARIANT=simple"}
		if _, err := gitcmd.Run(repo.Top, env, nil, append([]string{"fetch", "-q", "box:" + rec.Dir}, fetchRefspecs(rec.ID)...)...); err != nil {
			return nil, &Failure{Step: "fetch", Err: err, Left: "nothing changed; the offload stays in flight, run cocoonbox back again"}
		}
		step("fetch", t)
		sPrime, err := gitcmd.Run(repo.Top, nil, nil, "rev-parse", "--verify", backRef)
		if err != nil {
			return nil, &Failure{Step: "fetch", Err: err}
		}
		boxHead := ""
		if b, err := gitcmd.Run(repo.Top, nil, nil, "symbolic-ref", "-q", "--short", "HEAD"); err == nil {
			boxHead, _ = gitcmd.Run(repo.Top, nil, nil, "rev-parse", "--verify", "-q", "refs/cocoonbox/box/"+b)
		}
		t = time.Now()
		m, err := Merge(MergeInput{Top: repo.Top, ID: rec.ID, S: rec.Base, SPrime: sPrime, BoxHead: boxHead, Now: p.now(), Keep: append(append([]string{}, rec.SecretPaths...), rec.Worktrees...)})
		if err != nil {
			var r *Refusal
			if errors.As(err, &r) {
				r.Msg += "; the offload stays in flight: run cocoonbox back again once that is fixed (" + where + ")"
				return nil, r
			}
			return nil, &Failure{Step: "merge", Err: err, Left: "the offload stays in flight, run cocoonbox back again; " + where}
		}
		step("merge", t)
		rec.Merged = m
		if err := p.Dirs.SaveRecord(rec); err != nil {
			return nil, err
		}
		RecoverBack(repo.Top, rec.ID) // the merge is recorded: its stage goes
	} else {
		p.Progress.Printf("back: the merge of %s was done before; ending the box's session", rec.ID)
	}
	res.Merge = rec.Merged
	res.SPrime, _ = gitcmd.Run(repo.Top, nil, nil, "rev-parse", "--verify", "-q", backRef)
	p.Progress.Printf("%s", describeMerge(res.Merge))
	res.Warnings = backWarnings(repo.Top, rec.ID, rec.Base, res.SPrime)
	for _, w := range res.Warnings {
		p.Progress.Printf("warning: %s", w)
	}

	t := time.Now()
	end, err := p.verb(ctx, nil, "end", "--repo", rec.Repo)
	if err == nil {
		err = end.err("end")
	}
	if err != nil {
		return res, &Failure{Step: "end", Err: err, Left: "the work is home (" + describeMerge(res.Merge) + "); the box's session still runs: run cocoonbox back again to end it"}
	}
	step("end", t)
	// The merge is done and the box's session ended: S and S′ go, with
	// what only they held, so ten offloads pin no more than one; the
	// box's commits a detached HEAD did not take stay at CommitsRef.
	if c := detachedCommits(repo.Top, rec.Base, res.SPrime); c != "" {
		gitcmd.Run(repo.Top, nil, nil, "update-ref", CommitsRef(rec.ID), c)
	}
	if err := gitcmd.DropOffload(repo.Top, rec.ID); err != nil {
		p.Progress.Printf("back: refs/cocoonbox/base/%s and back/%s stay (%v)", rec.ID, rec.ID, err)
	}
	return res, p.Dirs.RemoveRecord(rec.Repo)
}

// waitBack gets this offload's back into backMD: from an earlier run's
// record, else from the outbox after seen, else after BACK (sent once per
// offload, whatever is lost on the way) once the session posts it.
func (p *Packer) waitBack(ctx context.Context, rec *Record, backMD string, interrupt bool) error {
	if rec.BackSeq > 0 && fileExists(backMD) {
		return nil
	}
	limit := p.BackWait
	if limit == 0 {
		limit = DefaultBackWait
	}
	deadline := time.Now().Add(limit)
	// read reads the outbox after seen; seen never passes this offload's
	// back until back.md holds it, so a run cut short after the read finds
	// it again.
	read := func(wait time.Duration) (verbResult, bool, error) {
		secs := int((wait + time.Second - 1) / time.Second)
		r, err := p.verb(ctx, nil, "read", "--repo", rec.Repo, "--since", strconv.FormatInt(rec.Seen, 10), "--wait", strconv.Itoa(secs))
		if err == nil {
			err = r.err("read")
		}
		if err != nil {
			return r, false, err
		}
		for _, e := range anyList(r.resp["entries"]) {
			m, _ := e.(map[string]any)
			seq, _ := m["seq"].(float64)
			if str(m, "kind") == "back" && str(m, "offload_id") == rec.ID {
				if err := offload.WriteFile(backMD, []byte(str(m, "body"))); err != nil {
					return r, false, err
				}
				rec.BackSeq, rec.Seen = int64(seq), max(rec.Seen, int64(seq))
				return r, true, p.Dirs.SaveRecord(rec)
			}
			rec.Seen = max(rec.Seen, int64(seq))
		}
		return r, false, p.Dirs.SaveRecord(rec)
	}
	if _, ok, err := read(0); err != nil || ok {
		return err
	}
	if err := p.sendBack(ctx, rec, interrupt); err != nil {
		return err
	}
	p.Progress.Printf("back: BACK with the box's %s session; waiting for its hand-over (at most %v)", rec.Kind, limit.Round(time.Second))
	var last verbResult
	for {
		left := time.Until(deadline)
		if left <= 0 {
			status, _ := last.resp["status"].(string)
			return &Failure{Step: "wait", Err: fmt.Errorf("no back from the box within %v (session status %q)", limit.Round(time.Second), status),
				Left: "BACK stays queued for the CLI's next idle; run cocoonbox back again later"}
		}
		r, ok, err := read(min(left, 60*time.Second))
		if err != nil || ok {
			return err
		}
		last = r
		p.Progress.Printf("back: still waiting (the session is %v)", r.resp["status"])
	}
}

// sendBack sends BACK to the session of this offload once: not when an
// earlier run's BACK was answered, nor when the box's inbox shows a
// message after the one recorded before an earlier run's BACK whose answer
// was lost. A stopped session takes no BACK: the refusal says how to
// restart it.
func (p *Packer) sendBack(ctx context.Context, rec *Record, interrupt bool) error {
	if rec.BackSent {
		return nil
	}
	ss, err := p.Status(ctx, rec.Repo)
	if err != nil {
		return err
	}
	var se map[string]any
	for _, s := range ss {
		if str(s, "offload_id") == rec.ID {
			se = s
		}
	}
	if se == nil || str(se, "status") == "stopped" {
		return &Refusal{Msg: fmt.Sprintf("the box's %s session of offload %s has stopped without posting its back, so BACK cannot reach it: restart it from its last hand-over with `cocoonbox rsh --box %s -- cocoonbox-agent offload restart --repo %s`, then run cocoonbox back again; nothing changed here", rec.Kind, rec.ID, rec.BoxName, rec.Repo)}
	}
	seq, _ := se["inbox_seq"].(float64)
	if rec.BackTried && int64(seq) > rec.InboxSeq {
		p.Progress.Printf("back: the BACK of an earlier run reached the box (its answer was lost); not sent again")
		rec.BackSent = true
		return p.Dirs.SaveRecord(rec)
	}
	rec.BackTried, rec.InboxSeq = true, int64(seq)
	if err := p.Dirs.SaveRecord(rec); err != nil {
		return err
	}
	args := []string{"send", "--repo", rec.Repo, "--back"}
	if interrupt {
		args = append(args, "--interrupt")
	}
	s, err := p.verb(ctx, strings.NewReader(""), args...)
	if err == nil {
		err = s.err("send --back")
	}
	if err != nil {
		return err
	}
	p.Progress.Printf("back: BACK %s", s.str("delivery"))
	rec.BackSent = true
	return p.Dirs.SaveRecord(rec)
}

func describeMerge(m *MergeResult) string {
	s := describeCase(m)
	if m.Later != "" {
		s += fmt.Sprintf("; the box committed after its back (%s): not brought, see refs/cocoonbox/box/", m.Later[:12])
	}
	return s
}

func describeCase(m *MergeResult) string {
	switch m.Case {
	case CaseBranch:
		return fmt.Sprintf("back: the branch %s holds the box's work (%s); your tree is untouched, %s names your HEAD", m.Branch, m.Reason, m.PreBack)
	case CaseFastForward:
		s := fmt.Sprintf("back: fast-forward, %d paths changed", len(m.Applied))
		if m.MovedTo != "" {
			s += ", the branch moved to the box's HEAD " + m.MovedTo[:12]
		}
		return s
	}
	s := fmt.Sprintf("back: the box's change merged into your work tree, uncommitted (%d paths)", len(m.Applied))
	if m.MovedTo != "" {
		s += "; the branch moved to the box's HEAD " + m.MovedTo[:12]
	}
	return s
}
