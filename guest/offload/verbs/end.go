package verbs

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// End ends the repo's CLI (Contract: Offload, end: /exit, /quit for
// codex, SIGTERM after 10 s), wipes its secrets, drops the offload's S
// and S′ refs and the loose objects only they held (gitcmd.DropOffload)
// and marks the copy returned. status says what the session was.
func (p *Packer) End(key string, inbox Inbox) (string, error) {
	unlock, err := p.lock(key)
	if err != nil {
		return "", err
	}
	defer unlock()
	idx, err := p.Store.LoadIndex()
	if err != nil {
		return "", err
	}
	ent, ok := idx.Repos[key]
	if !ok {
		return "", &Refusal{Msg: fmt.Sprintf("repo %s has no copy in this box", key)}
	}
	se, err := p.Store.LoadSession(key)
	if err != nil {
		return "", err
	}
	status := "none"
	if se != nil {
		status = se.Status
		if err := stopCLI(se, p.Progress); err != nil {
			return status, &Failure{err}
		}
		// The inbox sees the tmux session gone and records stopped; wait
		// for that, so a begin right after sees a stopped session.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			resp, err := inbox(&offload.Request{Op: "status", Repo: key}, 5*time.Second)
			if err != nil {
				se.Status = offload.StatusStopped // no inbox: the record is ours to fix
				p.Store.SaveSession(se)
				break
			}
			if ss, _ := resp["sessions"].([]any); len(ss) == 0 || ss[0].(map[string]any)["status"] == offload.StatusStopped {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := offload.WipeSecrets(p.Paths, key, ent.Name); err != nil {
		return status, &Failure{err}
	}
	c, _, err := p.Store.LoadCopy(key)
	if err != nil {
		return status, err
	}
	// S and S′ of the ended offload go, and what only they held: the
	// host has merged (end is back's last step) and drops its own.
	if c.OffloadID != "" {
		if err := gitcmd.DropOffload(p.Paths.Copy(ent.Name), c.OffloadID); err != nil {
			p.Progress("end: the refs of %s stay (%v); the next offload's rsync removes them", c.OffloadID, err)
		}
	}
	c.OffloadID, c.Unreturned = "", false
	if err := p.Store.SaveCopy(key, c); err != nil {
		return status, err
	}
	p.Progress("end: %s returned; its secrets are wiped", p.Paths.Copy(ent.Name))
	return status, nil
}

// stopCLI types /exit (/quit for codex) into the session, waits 10 s for
// the CLI to end, then sends SIGTERM to the pane's process, and removes
// the tmux session.
func stopCLI(se *offload.Session, progress func(string, ...any)) error {
	t := tmuxClient{}
	if !t.has(se.Tmux) {
		return nil
	}
	quit := "/exit"
	if se.CLI == "codex" {
		quit = "/quit"
	}
	progress("end: typing %s into %s", quit, se.Tmux)
	t.send(se.Tmux, "-l", quit)
	t.send(se.Tmux, "Enter")
	if waitGone(t, se.Tmux, 10*time.Second) {
		return nil
	}
	if pid := t.panePID(se.Tmux); pid > 0 {
		progress("end: %s did not exit within 10 s: SIGTERM to %d", se.CLI, pid)
		syscall.Kill(pid, syscall.SIGTERM)
		if waitGone(t, se.Tmux, 5*time.Second) {
			return nil
		}
	}
	return t.kill(se.Tmux)
}

func waitGone(t tmuxClient, session string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if !t.has(session) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// WipeSecrets removes the repo's secrets now (wipe-secrets).
func (p *Packer) WipeSecrets(key string) error {
	idx, err := p.Store.LoadIndex()
	if err != nil {
		return err
	}
	return offload.WipeSecrets(p.Paths, key, idx.Repos[key].Name)
}

// Post checks a progress or back body against the hand-over template,
// keeps it as the repo's handover.md (a restart continues from it), and
// for back makes S′: a commit of the copy's state (the work tree, with
// HEAD as parent) at refs/cocoonbox/back/<id>.
func (p *Packer) Post(key, kind, body string) (offloadID string, err error) {
	if kind != "question" {
		if err := offload.CheckHandover(body); err != nil {
			return "", &Refusal{Msg: err.Error()}
		}
		if err := p.Store.EnsureRepo(key); err != nil {
			return "", err
		}
		path := filepath.Join(p.Paths.Repo(key), "handover.md")
		if cur, err := os.ReadFile(path); err != nil || string(cur) != body {
			if err := offload.WriteFile(path, []byte(body)); err != nil {
				return "", err
			}
		}
	}
	c, _, err := p.Store.LoadCopy(key)
	if err != nil {
		return "", err
	}
	if kind != "back" {
		return c.OffloadID, nil
	}
	idx, err := p.Store.LoadIndex()
	if err != nil {
		return "", err
	}
	ent, ok := idx.Repos[key]
	if !ok || c.OffloadID == "" {
		return "", &Refusal{Msg: fmt.Sprintf("repo %s has no offload in flight to post back", key)}
	}
	dir := p.Paths.Copy(ent.Name)
	sPrime, err := gitcmd.Snapshot(dir, "cocoonbox offload back "+c.OffloadID, true)
	if err != nil {
		return "", &Failure{fmt.Errorf("make S′: %w", err)}
	}
	if _, err := git(dir, nil, nil, "update-ref", BackRef(c.OffloadID), sPrime); err != nil {
		return "", &Failure{err}
	}
	p.Progress("post: S′ %s at %s", sPrime, BackRef(c.OffloadID))
	return c.OffloadID, nil
}
