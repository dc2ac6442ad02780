package inbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// MESSAGE_IDs of the inbox's journal entries.
const (
	msgSessionStarted = "b477ae86ea894c1fb575f925a34f04e8"
	msgSessionStopped = "deeb1ab2ea8d4846acf2d4e39c275ae2"
	msgDelivered      = "f35cd07aa1f24e6ab28d979b4ef17458"
	msgDeliveryFailed = "2feccbab50c84cccaa53655c09155e85"
	msgRestartCheck   = "60cf1bebd97d487598c2ed49040920bc"
)

// hooksFile is our claude settings file for the repo (Contract: Offload,
// Box CLI in tmux): the five hooks calling offload event, their stdout to
// /dev/null so nothing reaches the model, and
// skipDangerousModePermissionPrompt, since the bypass-mode dialog would
// hold the first prompt. It is passed with --settings; the user's own
// settings are never touched.
func (s *Server) hooksFile(repo string) ([]byte, error) {
	hooks := map[string]any{}
	for _, h := range []string{"UserPromptSubmit", "Stop", "StopFailure", "Notification", "SessionEnd"} {
		cmd := fmt.Sprintf("%s offload event --repo %s --cli claude --hook %s >/dev/null 2>&1", s.Agent, repo, h)
		hooks[h] = []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": cmd}}}}
	}
	return json.MarshalIndent(map[string]any{"skipDangerousModePermissionPrompt": true, "hooks": hooks}, "", "  ")
}

// MaxPromptArg is the longest first prompt (bytes) that goes to the CLI
// as its argument, "$(cat <prompt file>)": Linux caps one argv string at
// MAX_ARG_STRLEN (128 KiB with its NUL), and a longer one failed the exec
// ("Argument list too long") with the session left starting. The contract
// allows a 256 KiB hand-over; a prompt over this stays in the prompt file
// and the argument is PromptPointer, telling the CLI to read it.
const MaxPromptArg = 127 << 10

// PromptPointer is the first prompt that stands for a prompt file too
// long for the command line.
func PromptPointer(path string, size int) string {
	return fmt.Sprintf("Your first prompt is too long for a command line (%d bytes), so it is in the file %s. "+
		"Read that whole file now, in parts if your tool truncates it, and follow it as your first prompt: "+
		"it holds your instructions, the hand-over of the task and what the packer attached.", size, path)
}

// commandLine is the line typed into the session's login shell, for a
// first prompt of size bytes. exec makes the CLI the pane's process, so
// the pane (and the session) ends when the CLI does, hook or no hook.
func (s *Server) commandLine(repo, cli string, size int) string {
	path := filepath.Join(s.Store.Paths.Repo(repo), "prompt.md")
	prompt := fmt.Sprintf(`"$(cat %s)"`, shellQuote(path))
	if size > MaxPromptArg {
		prompt = shellQuote(PromptPointer(path, size))
	}
	switch cli {
	case "codex":
		notify := fmt.Sprintf(`notify=["%s","offload","event","--repo","%s","--cli","codex","--hook","notify"]`, s.Agent, repo)
		return fmt.Sprintf(`exec codex --dangerously-bypass-approvals-and-sandbox -c %s %s`, shellQuote(notify), prompt)
	default:
		hooks := shellQuote(filepath.Join(s.Store.Paths.Repo(repo), "hooks.json"))
		return fmt.Sprintf(`exec claude --dangerously-skip-permissions --settings %s %s`, hooks, prompt)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// startLocked starts a fresh CLI session with m's body as its first prompt.
func (s *Server) startLocked(repo, name, cli string, m offload.Message) error {
	dir := s.Store.Paths.Repo(repo)
	if err := offload.WriteFile(filepath.Join(dir, "prompt.md"), []byte(m.Body)); err != nil {
		return err
	}
	if cli == "claude" {
		hooks, err := s.hooksFile(repo)
		if err != nil {
			return err
		}
		if err := offload.WriteFile(filepath.Join(dir, "hooks.json"), hooks); err != nil {
			return err
		}
	}
	c, _, err := s.Store.LoadCopy(repo)
	if err != nil {
		return err
	}
	c.Unreturned = true
	c.Kind = cli
	if m.OffloadID != "" {
		c.OffloadID = m.OffloadID
	}
	if err := s.Store.SaveCopy(repo, c); err != nil {
		return err
	}
	env, err := s.sessionEnv(repo)
	if err != nil {
		return err
	}
	se := &offload.Session{Repo: repo, Name: name, CLI: cli, OffloadID: c.OffloadID,
		Status: offload.StatusStarting, Tmux: offload.TmuxSession(repo, cli),
		StartedAtMs: nowMs(), StartSeq: m.Seq, Env: env}
	if s.tm.hasSession(se.Tmux) {
		s.tm.kill(se.Tmux) // a leftover of a stopped session
	}
	if err := s.tm.newSession(se.Tmux, s.Store.Paths.Copy(name), env); err != nil {
		return err
	}
	if err := s.tm.typeLine(se.Tmux, s.commandLine(repo, cli, len(m.Body))); err != nil {
		return err
	}
	se.PanePID, _, _ = s.tm.pane(se.Tmux)
	s.sessions[repo] = se
	if err := s.Store.SaveSession(se); err != nil {
		return err
	}
	m.State = offload.MsgDelivered
	if err := s.Store.SaveMessage(repo, m); err != nil {
		return err
	}
	s.Log.Send(journal.Info, msgSessionStarted, fmt.Sprintf("started %s in tmux session %s for %s", cli, se.Tmux, repo),
		"COCOONBOX_OFFLOAD_REPO", repo, "COCOONBOX_OFFLOAD_ID", se.OffloadID)
	s.notifyLocked(s.eventOf(se))
	return nil
}

// sessionEnv is the tmux environment (Contract: Offload, Box CLI in
// tmux): COCOONBOX_OFFLOAD_REPO, the MISE_<TOOL>_VERSION pins of env.json,
// and the variables of the placed secrets.
func (s *Server) sessionEnv(repo string) ([]string, error) {
	env := []string{"COCOONBOX_OFFLOAD_REPO=" + repo}
	var ej struct {
		Tools map[string]string `json:"tools"`
	}
	if err := offload.ReadJSON(filepath.Join(s.Store.Paths.Repo(repo), "env.json"), &ej); err == nil {
		for tool, v := range ej.Tools {
			env = append(env, "MISE_"+envName(tool)+"_VERSION="+v)
		}
	}
	env = append(env, offload.SecretEnv(s.Store.Paths.RepoSecrets(repo))...)
	return env, nil
}

// envName is a tool's name as mise's MISE_<TOOL>_VERSION spells it: upper
// case, every other character than a letter or digit as _ (npm:cowsay is
// NPM_COWSAY), so the variable is one a shell can export.
func envName(tool string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, tool)
}

func (s *Server) eventOf(se *offload.Session) WatchEvent {
	return WatchEvent{Repo: se.Repo, Name: se.Name, CLI: se.CLI, OffloadID: se.OffloadID, Status: se.Status}
}

// setStatusLocked records a new status; reaching an idle one delivers the
// next queued message.
func (s *Server) setStatusLocked(se *offload.Session, status string) error {
	changed := se.Status != status
	tookFirst := se.Status == offload.StatusStarting && status == offload.StatusWorking
	se.Status = status
	if err := s.Store.SaveSession(se); err != nil {
		return err
	}
	if changed {
		if status == offload.StatusStopped {
			s.Log.Send(journal.Info, msgSessionStopped, fmt.Sprintf("%s session %s stopped", se.CLI, se.Tmux),
				"COCOONBOX_OFFLOAD_REPO", se.Repo)
		}
		s.notifyLocked(s.eventOf(se))
	}
	if idle(status) || tookFirst {
		s.deliverSoon(se.Repo)
	}
	return nil
}

// deliverSoon delivers, KeySettle after a status change, the next queued
// message to a session that is idle, or the interrupts that waited for a
// working session's first prompt. Not inline: the change is often a hook's
// report, and keys typed while the CLI still runs that hook were left in
// the real claude's input, unsubmitted. Under the lock the status is read
// again, so one idle gets one message.
func (s *Server) deliverSoon(repo string) {
	ctx := s.ctx
	go func() {
		select {
		case <-time.After(KeySettle):
		case <-ctx.Done():
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		se := s.sessions[repo]
		if se == nil || ctx.Err() != nil {
			return
		}
		var err error
		switch {
		case idle(se.Status):
			err = s.deliverNextLocked(se)
		case se.Status == offload.StatusWorking:
			err = s.deliverInterruptsLocked(se)
		}
		if err != nil {
			s.Log.Send(journal.Warning, msgDeliveryFailed, fmt.Sprintf("a queued message to %s: %v", se.Tmux, err),
				"COCOONBOX_OFFLOAD_REPO", repo)
		}
	}()
}

// deliverInterruptsLocked delivers the interrupts that waited for the
// session to take its first prompt, oldest first.
func (s *Server) deliverInterruptsLocked(se *offload.Session) error {
	msgs, err := s.Store.Messages(se.Repo)
	if err != nil {
		return err
	}
	for i := range msgs {
		m := &msgs[i]
		if m.State == offload.MsgQueued && m.Interrupt && !m.Start && m.OffloadID == se.OffloadID {
			if err := s.interruptLocked(se, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// interruptLocked sends Esc, then pastes m (Contract: Offload, Inbox:
// "interrupt sends Esc first").
func (s *Server) interruptLocked(se *offload.Session, m *offload.Message) error {
	if err := s.tm.key(se.Tmux, "Escape"); err != nil {
		return err
	}
	time.Sleep(KeySettle)
	return s.pasteLocked(se, m)
}

// confirmSubmit presses Enter again, up to three times SubmitCheck apart,
// while claude has not reported a prompt (UserPromptSubmit) since enterAt
// (Unix ms): under load the real claude left a pasted message in its
// input although the Enter came KeySettle after the paste. An Enter on
// its empty input does nothing, so one more never submits twice.
func (s *Server) confirmSubmit(repo string, enterAt int64) {
	ctx := s.ctx
	go func() {
		for i := 0; i < 3; i++ {
			select {
			case <-time.After(SubmitCheck):
			case <-ctx.Done():
				return
			}
			s.mu.Lock()
			se := s.sessions[repo]
			if se == nil || se.Status == offload.StatusStopped || s.promptAt[repo] >= enterAt || ctx.Err() != nil {
				s.mu.Unlock()
				return
			}
			s.tm.key(se.Tmux, "Enter")
			s.mu.Unlock()
		}
	}()
}

// SubmitCheck is how long confirmSubmit waits for claude's prompt hook
// before it presses Enter again.
const SubmitCheck = 3 * time.Second

// KeySettle is how long the inbox lets the CLI take an Esc or a paste
// before the next keys: the real claude (2.1.197, in tmux) read an Esc
// followed at once by a paste as one sequence (the interrupt lost), and
// an Enter right after a paste often as part of it (the message left in
// its input, never submitted, while the inbox said delivered); 500 ms
// submitted every one of the runs tried. The stand-in cannot show it
// (tests/offload's TestRealCLIsInTheBox does).
const KeySettle = 500 * time.Millisecond

// deliverNextLocked pastes the next queued message: a BACK first, else the
// oldest.
func (s *Server) deliverNextLocked(se *offload.Session) error {
	msgs, err := s.Store.Messages(se.Repo)
	if err != nil {
		return err
	}
	var next *offload.Message
	for i := range msgs {
		m := &msgs[i]
		// Only this offload's messages: one queued for an earlier offload
		// of the repo is not this CLI's to take.
		if m.State != offload.MsgQueued || m.Start || m.OffloadID != se.OffloadID {
			continue
		}
		if next == nil || (m.Back && !next.Back) {
			next = m
		}
	}
	if next == nil {
		return nil
	}
	return s.pasteLocked(se, next)
}

// pasteLocked delivers m to the session: load-buffer into a buffer named
// after the message, paste-buffer -p -d, then Enter as its own key, so a
// long or multi-line message arrives as one message and is submitted once.
// Each step is recorded first, so a crash between them is finished, not
// repeated (finishLocked).
func (s *Server) pasteLocked(se *offload.Session, m *offload.Message) error {
	buf := bufferName(se.Repo, m.Seq)
	// The buffer is loaded before the message is recorded pasting, so a
	// pasting message without its buffer was pasted (-d deleted it). A
	// trailing newline would be typed inside the paste; the Enter of
	// finishLocked is the one submit.
	if err := s.tm.loadBuffer(buf, []byte(strings.TrimRight(m.Body, "\r\n"))); err != nil {
		return err
	}
	m.State = offload.MsgPasting
	if err := s.Store.SaveMessage(se.Repo, *m); err != nil {
		return err
	}
	return s.finishLocked(se, m)
}

// finishLocked does a pasting message's remaining steps: a buffer still
// there is pasted; then Enter, then delivered.
func (s *Server) finishLocked(se *offload.Session, m *offload.Message) error {
	buf := bufferName(se.Repo, m.Seq)
	if m.State == offload.MsgPasting {
		if s.tm.hasBuffer(buf) {
			if err := s.tm.pasteBuffer(se.Tmux, buf); err != nil {
				return err
			}
			time.Sleep(KeySettle)
		}
		m.State = offload.MsgPasted
		if err := s.Store.SaveMessage(se.Repo, *m); err != nil {
			return err
		}
	}
	enterAt := nowMs()
	if err := s.tm.key(se.Tmux, "Enter"); err != nil {
		return err
	}
	if se.CLI == "claude" {
		s.confirmSubmit(se.Repo, enterAt)
	}
	m.State = offload.MsgDelivered
	if err := s.Store.SaveMessage(se.Repo, *m); err != nil {
		return err
	}
	s.Log.Send(journal.Info, msgDelivered, fmt.Sprintf("message %d pasted into %s", m.Seq, se.Tmux),
		"COCOONBOX_OFFLOAD_REPO", se.Repo)
	// A delivered prompt makes the session busy; codex has no prompt hook
	// (Contract: codex: a delivered prompt → working).
	if se.Status != offload.StatusWorking {
		se.Status = offload.StatusWorking
		if err := s.Store.SaveSession(se); err != nil {
			return err
		}
		s.notifyLocked(s.eventOf(se))
	}
	return nil
}

func bufferName(repo string, seq int64) string { return fmt.Sprintf("cbmsg-%s-%d", repo, seq) }

// rescanLocked reloads every session record and runs the restart check:
// a session recorded as not stopped whose tmux session is gone (a reboot,
// a restored home) is restarted from its last hand-over; a message whose
// paste a crash cut short is finished; a start a crash cut short is done.
func (s *Server) rescanLocked() error {
	idx, err := s.Store.LoadIndex()
	if err != nil {
		return err
	}
	s.sessions = map[string]*offload.Session{}
	for key := range idx.Repos {
		se, err := s.Store.LoadSession(key)
		if err != nil {
			return err
		}
		msgs, err := s.Store.Messages(key)
		if err != nil {
			return err
		}
		if se != nil {
			s.sessions[key] = se
		}
		for i := range msgs {
			m := &msgs[i]
			switch {
			case m.Start && m.State == offload.MsgQueued && (se == nil || se.StartSeq < m.Seq):
				if err := s.startLocked(key, idx.Repos[key].Name, copyKind(s.Store, key), *m); err != nil {
					return err
				}
				se = s.sessions[key]
			case se != nil && (m.State == offload.MsgPasting || m.State == offload.MsgPasted) && s.tm.alive(se.Tmux):
				if err := s.finishLocked(se, m); err != nil {
					return err
				}
			}
		}
		// A message stored while the session was idle, whose paste a crash
		// cut short before it began, is still queued: an idle session gets
		// it now, not at an idle that may never come.
		if se != nil && idle(se.Status) && s.tm.alive(se.Tmux) {
			if err := s.deliverNextLocked(se); err != nil {
				return err
			}
		}
		if se != nil && se.Status != offload.StatusStopped && !s.tm.alive(se.Tmux) {
			s.Log.Send(journal.Notice, msgRestartCheck, fmt.Sprintf("%s session of %s is gone (reboot or restore): restarting it from its last hand-over", se.CLI, key),
				"COCOONBOX_OFFLOAD_REPO", key)
			if _, err := s.restartLocked(key); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyKind(st offload.Store, key string) string {
	c, _, _ := st.LoadCopy(key)
	if c.Kind == "" {
		return "claude"
	}
	return c.Kind
}

// restart is the restart op: the repo's CLI session starts afresh from its
// last hand-over (the box agent's handover.md, else the first prompt).
func (s *Server) restart(repo string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restartLocked(repo)
}

func (s *Server) restartLocked(repo string) (map[string]any, error) {
	se := s.sessions[repo]
	if se == nil {
		return nil, offload.Errorf(offload.CodeRefused, "repo %s has no session to restart", repo)
	}
	if s.tm.hasSession(se.Tmux) {
		s.tm.kill(se.Tmux)
	}
	dir := s.Store.Paths.Repo(repo)
	prompt, err := os.ReadFile(filepath.Join(dir, "prompt.md"))
	if err != nil {
		return nil, fmt.Errorf("read the first prompt: %w", err)
	}
	if ho, err := os.ReadFile(filepath.Join(dir, "handover.md")); err == nil && offload.CheckHandover(string(ho)) == nil {
		prompt = ho
	}
	prompt = []byte(RestartPreamble + "\n\n" + string(prompt))
	se.Status = offload.StatusStopped
	m, err := s.Store.AddMessage(repo, offload.Message{OffloadID: se.OffloadID, Body: string(prompt), Start: true, State: offload.MsgQueued, TimeMs: nowMs()})
	if err != nil {
		return nil, err
	}
	if err := s.startLocked(repo, se.Name, se.CLI, m); err != nil {
		return nil, err
	}
	return map[string]any{"delivery": "started", "seq": m.Seq}, nil
}

// RestartPreamble opens the prompt of a restarted session, before its
// last hand-over (or, when it posted none, its first prompt).
const RestartPreamble = "Your previous session in this box ended (the box was restarted, restored or upgraded). " +
	"Continue the task from your last hand-over below; the repository in this directory holds your work so far."

// poll watches the sessions that are not stopped: a tmux session that is
// gone or whose pane is dead (the CLI exited: the pane's process is the
// CLI) makes it stopped;
// a starting session whose transcript appeared is working.
func (s *Server) poll(ctx context.Context) {
	t := time.NewTicker(s.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		for _, se := range s.sessions {
			if se.Status == offload.StatusStopped {
				continue
			}
			if !s.tm.alive(se.Tmux) {
				s.setStatusLocked(se, offload.StatusStopped)
				continue
			}
			if se.Status == offload.StatusStarting && s.transcriptMtime(se) > se.StartedAtMs {
				s.setStatusLocked(se, offload.StatusWorking)
			}
		}
		s.mu.Unlock()
	}
}

// transcriptMtime is the newest mtime of the session's transcript: the
// file a hook named, else the newest under the CLI's transcript directory
// for the copy (claude: ~/.claude/projects/<claudeProject(dir)>/;
// codex: ~/.codex/sessions/).
func (s *Server) transcriptMtime(se *offload.Session) int64 {
	if se.Transcript != "" {
		return fileMtimeMs(se.Transcript)
	}
	home, _ := os.UserHomeDir()
	var root string
	switch se.CLI {
	case "claude":
		root = filepath.Join(home, ".claude/projects", claudeProject(s.Store.Paths.Copy(se.Name)))
	case "codex":
		root = filepath.Join(home, ".codex/sessions")
	}
	var newest int64
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			if m := fileMtimeMs(p); m > newest {
				newest = m
			}
		}
		return nil
	})
	return newest
}

// claudeProject is the claude CLI's directory name under
// ~/.claude/projects for a working directory: every character but an
// ASCII letter or digit becomes '-' (so /workspace/my_app.v2 is
// -workspace-my-app-v2; only / and . was wrong for a name with _).
func claudeProject(dir string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, dir)
}
