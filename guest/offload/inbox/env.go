package inbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/guest/offload/envstep"
)

// ReportFile is the environment report's file in the repo's state
// directory; env.log beside it holds mise's output.
const ReportFile = "env-report.json"

// env answers the env op (Contract: Offload, Inbox: env): the report once
// the step this inbox runs has ended, or after wait_ms with done false;
// an unfinished report whose step this inbox does not run (an inbox
// restart cut it short) is made failed at once. start (ours) starts the
// step from the repo's env.json first.
func (s *Server) env(ctx context.Context, req *offload.Request) (map[string]any, error) {
	if req.Start {
		if err := s.startEnv(req.Repo); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	running := s.envSteps[req.Repo]
	s.mu.Unlock()
	if running != nil && req.WaitMs > 0 {
		t := time.NewTimer(time.Duration(req.WaitMs) * time.Millisecond)
		select {
		case <-running:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := filepath.Join(s.Store.Paths.Repo(req.Repo), ReportFile)
	var rep envstep.Report
	if err := offload.ReadJSON(path, &rep); errors.Is(err, fs.ErrNotExist) {
		return map[string]any{"report": nil}, nil
	} else if err != nil {
		return nil, err
	}
	if !rep.Done && s.envSteps[req.Repo] == nil {
		rep.Done, rep.Outcome, rep.EndedAtMs = true, envstep.Failed, nowMs()
		rep.Reason = "the environment step was cut short (the inbox restarted while it ran)"
		if err := offload.WriteJSON(path, &rep); err != nil {
			return nil, err
		}
	}
	return map[string]any{"report": &rep}, nil
}

// startEnv runs the environment step of the repo's env.json in the
// background; a step already running is left to finish.
func (s *Server) startEnv(repo string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.envSteps[repo] != nil {
		return nil
	}
	dir := s.Store.Paths.Repo(repo)
	data, err := os.ReadFile(filepath.Join(dir, "env.json"))
	if err != nil {
		return offload.Errorf(offload.CodeRefused, "repo %s has no env.json (send it first)", repo)
	}
	env, err := envstep.Parse(data)
	if err != nil {
		return offload.Errorf(offload.CodeInvalid, "%v", err)
	}
	idx, err := s.Store.LoadIndex()
	if err != nil {
		return err
	}
	ent, ok := idx.Repos[repo]
	if !ok {
		return offload.Errorf(offload.CodeRefused, "repo %s has no copy (begin first)", repo)
	}
	log, err := os.OpenFile(filepath.Join(dir, "env.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	s.envSteps[repo] = done
	path := filepath.Join(dir, ReportFile)
	r := &envstep.Runner{Log: log, Save: func(rep *envstep.Report) error { return offload.WriteJSON(path, rep) }}
	go func() {
		r.Run(s.ctx, s.Store.Paths.Copy(ent.Name), env)
		log.Close()
		s.mu.Lock()
		delete(s.envSteps, repo)
		close(done)
		s.mu.Unlock()
	}()
	return nil
}
