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
	ID     string       `json:"id"`
	Repo   string       `json:"repo"`
	SPrime string       `json:"s_prime"`
	BackMD string       `json:"back_md"`
	Merge  *MergeResult `json:"merge"`
	// Timings are back's steps, in milliseconds.
	Timings map[string]int64 `json:"timings_ms"`
}

// Back brings the offload of the repository holding dir home (Contract:
// Offload, "Back, Mac side"): BACK to the box's session unless its outbox
// already holds this offload's back, the outbox read until that back (at
// most BackWait in all, then a *Failure with the session's status, the
// BACK left queued), the fetch over the transport into
// refs/cocoonbox/box/* and refs/cocoonbox/back/<id>, the merge against S
// (Merge), then end, and offload.json goes. A merge that refuses (a held
// index.lock, a patch that does not apply) changes nothing and keeps the
// offload in flight, so back can run again.
func (p *Packer) Back(ctx context.Context, dir string, interrupt bool) (*BackResult, error) {
	repo, rec, err := p.Dirs.InFlight(dir)
	if err != nil {
		return nil, err
	}
	res := &BackResult{ID: rec.ID, Repo: rec.Repo, Timings: map[string]int64{}}
	step := func(name string, t time.Time) { res.Timings[name] = time.Since(t).Milliseconds() }
	t := time.Now()
	body, err := p.waitBack(ctx, rec, interrupt)
	if err != nil {
		return nil, err
	}
	step("wait", t)
	res.BackMD = filepath.Join(p.Dirs.Repo(rec.Repo), "back.md")
	if err := offload.WriteFile(res.BackMD, []byte(body)); err != nil {
		return nil, err
	}

	t = time.Now()
	backRef := "refs/cocoonbox/back/" + rec.ID
	p.Progress.Printf("fetch: the box's branches and %s from %s", backRef, rec.Dir)
	env := []string{"GIT_SSH_COMMAND=" + p.Transport.Shell(), "GIT_SSH_VARIANT=simple"}
	if _, err := gitcmd.Run(repo.Top, env, nil, "fetch", "-q", "box:"+rec.Dir, "+refs/heads/*:refs/cocoonbox/box/*", "+"+backRef+":"+backRef); err != nil {
		return nil, &Failure{Step: "fetch", Err: err, Left: "nothing changed; the offload stays in flight, run cocoonbox back again"}
	}
	step("fetch", t)
	if res.SPrime, err = gitcmd.Run(repo.Top, nil, nil, "rev-parse", "--verify", backRef); err != nil {
		return nil, &Failure{Step: "fetch", Err: err}
	}
	boxHead := ""
	if b, err := gitcmd.Run(repo.Top, nil, nil, "symbolic-ref", "-q", "--short", "HEAD"); err == nil {
		boxHead, _ = gitcmd.Run(repo.Top, nil, nil, "rev-parse", "--verify", "-q", "refs/cocoonbox/box/"+b)
	}
	t = time.Now()
	res.Merge, err = Merge(MergeInput{Top: repo.Top, ID: rec.ID, S: rec.Base, SPrime: res.SPrime, BoxHead: boxHead, Now: p.now()})
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			r.Msg += "; the offload stays in flight: run cocoonbox back again once that is fixed"
			return nil, r
		}
		return nil, &Failure{Step: "merge", Err: err, Left: "the offload stays in flight; the box's state is at " + backRef}
	}
	step("merge", t)
	p.Progress.Printf("%s", describeMerge(res.Merge))

	t = time.Now()
	end, err := p.verb(ctx, nil, "end", "--repo", rec.Repo)
	if err == nil {
		err = end.err("end")
	}
	if err != nil {
		return res, &Failure{Step: "end", Err: err, Left: "the work is home; the box's session still runs: run cocoonbox back again to end it"}
	}
	step("end", t)
	return res, p.Dirs.RemoveRecord(rec.Repo)
}

// waitBack sends BACK (unless the outbox already holds this offload's
// back) and reads the outbox until the back entry, saving seen as it
// goes; it returns the back's hand-over.
func (p *Packer) waitBack(ctx context.Context, rec *Record, interrupt bool) (string, error) {
	limit := p.BackWait
	if limit == 0 {
		limit = DefaultBackWait
	}
	deadline := time.Now().Add(limit)
	read := func(wait time.Duration) (verbResult, string, error) {
		secs := int((wait + time.Second - 1) / time.Second)
		r, err := p.verb(ctx, nil, "read", "--repo", rec.Repo, "--since", strconv.FormatInt(rec.Seen, 10), "--wait", strconv.Itoa(secs))
		if err == nil {
			err = r.err("read")
		}
		if err != nil {
			return r, "", err
		}
		for _, e := range anyList(r.resp["entries"]) {
			m, _ := e.(map[string]any)
			if seq, ok := m["seq"].(float64); ok && int64(seq) > rec.Seen {
				rec.Seen = int64(seq)
			}
			if str(m, "kind") == "back" && str(m, "offload_id") == rec.ID {
				return r, str(m, "body"), p.Dirs.SaveRecord(rec)
			}
		}
		return r, "", p.Dirs.SaveRecord(rec)
	}
	_, body, err := read(0)
	if err != nil || body != "" {
		return body, err
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
		return "", err
	}
	p.Progress.Printf("back: BACK %s to the box's %s session; waiting for its hand-over (at most %v)", s.str("delivery"), rec.Kind, limit.Round(time.Second))
	var last verbResult
	for {
		left := time.Until(deadline)
		if left <= 0 {
			status, _ := last.resp["status"].(string)
			return "", &Failure{Step: "wait", Err: fmt.Errorf("no back from the box within %v (session status %q)", limit.Round(time.Second), status),
				Left: "BACK stays queued for the CLI's next idle; run cocoonbox back again later"}
		}
		r, body, err := read(min(left, 60*time.Second))
		if err != nil || body != "" {
			return body, err
		}
		last = r
		p.Progress.Printf("back: still waiting (the session is %v)", r.resp["status"])
	}
}

func describeMerge(m *MergeResult) string {
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
