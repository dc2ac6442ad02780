package verbs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/guest/offload/envstep"
	"github.com/cocoonbox/cocoonbox/guest/offload/stream"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// BaseRef names S for offload id in the bundle and the copy: the commit
// of the host's state (its tree the work tree, its parent HEAD). The
// contract's send takes S from the stream without naming how; ours is
// this ref (the host packer, issue 13, writes it).
func BaseRef(id string) string { return "refs/cocoonbox/base/" + id }

// BackRef names S′, the box's state when it posts back:
// refs/cocoonbox/back/<offload id>.
func BackRef(id string) string { return "refs/cocoonbox/back/" + id }

// SendOptions are send's flags.
type SendOptions struct {
	Key, Kind, ID   string
	Prepare, NoRepo bool
}

// SendResult is send's answer: delivery (started), accepted, tmux and
// timings_ms per step.
type SendResult struct {
	Delivery string           `json:"delivery,omitempty"`
	Accepted bool             `json:"accepted"`
	Tmux     string           `json:"tmux,omitempty"`
	Timings  map[string]int64 `json:"timings_ms"`
}

// Inbox is how the packer reaches the inbox (a test may point it
// elsewhere).
type Inbox func(req *offload.Request, timeout time.Duration) (map[string]any, error)

// Send runs the send steps on the stream (Contract: Offload, send steps).
// Before the inbox accepts, a failure wipes the repo's secrets, empties
// stage/ and releases the copy, and is a *Failure; a copy held by another
// offload is a *Refusal with nothing changed.
func (p *Packer) Send(o SendOptions, r io.Reader, inbox Inbox) (*SendResult, error) {
	res := &SendResult{Timings: map[string]int64{}}
	step := func(name string, start time.Time) { res.Timings[name] = time.Since(start).Milliseconds() }
	unlock, err := p.lock(o.Key)
	if err != nil {
		return res, err
	}
	defer unlock()
	idx, err := p.Store.LoadIndex()
	if err != nil {
		return res, err
	}
	ent, ok := idx.Repos[o.Key]
	c, _, err := p.Store.LoadCopy(o.Key)
	if err != nil {
		return res, err
	}
	if !ok || c.OffloadID == "" {
		return res, &Refusal{Msg: fmt.Sprintf("repo %s has no copy taken for an offload: run begin first", o.Key)}
	}
	if c.OffloadID != o.ID {
		return res, &Refusal{Msg: fmt.Sprintf("the copy of %s is taken by offload %s, not %s", o.Key, c.OffloadID, o.ID)}
	}
	dir := p.Paths.Copy(ent.Name)
	s := &sendRun{p: p, o: o, dir: dir, stage: filepath.Join(p.Paths.Repo(o.Key), "stage")}
	accepted := false
	defer func() {
		s.emptyStage()
		if !accepted {
			offload.WipeSecrets(p.Paths, o.Key, ent.Name)
			c.OffloadID = ""
			p.Store.SaveCopy(o.Key, c)
		}
	}()
	fail := func(err error) (*SendResult, error) { return res, &Failure{err} }

	t := time.Now()
	if err := s.read(r); err != nil {
		return fail(err)
	}
	step("read", t)
	if !o.NoRepo {
		t = time.Now()
		if err := s.index(); err != nil {
			return fail(err)
		}
		step("index", t)
		t = time.Now()
		if err := s.check(); err != nil {
			return fail(err)
		}
		step("check", t)
		t = time.Now()
		if err := p.writeExcludes(ent.Name, dir); err != nil {
			return fail(err)
		}
		step("excludes", t)
	}
	t = time.Now()
	if err := s.placeLinks(); err != nil {
		return fail(err)
	}
	step("secrets", t)
	if s.env != nil {
		t = time.Now()
		if err := offload.WriteFile(filepath.Join(p.Paths.Repo(o.Key), "env.json"), s.env); err != nil {
			return fail(err)
		}
		if _, err := inbox(&offload.Request{Op: "env", Repo: o.Key, Start: true}, 30*time.Second); err != nil {
			return fail(err)
		}
		step("env", t)
	}
	if o.Prepare {
		accepted = true // nothing for the inbox to accept; keep the copy and secrets
		return res, nil
	}
	t = time.Now()
	home, _ := os.UserHomeDir()
	switch o.Kind {
	case "claude":
		err = TrustClaude(home, dir)
	case "codex":
		err = TrustCodex(home, dir)
	}
	if err != nil {
		return fail(err)
	}
	step("trust", t)
	t = time.Now()
	prompt := p.FirstPrompt(o, ent.Name, dir, s.handover, s.env)
	resp, err := inbox(&offload.Request{Op: "send", Repo: o.Key, Name: ent.Name, CLI: o.Kind, OffloadID: o.ID,
		Body: prompt, Start: true, RequestID: "send-" + o.ID}, 30*time.Second)
	if err != nil {
		return fail(err)
	}
	accepted = true
	step("start", t)
	res.Delivery, _ = resp["delivery"].(string)
	res.Tmux = offload.TmuxSession(o.Key, o.Kind)
	p.Progress("send: %s started in tmux session %s; waiting for it to take the first prompt", o.Kind, res.Tmux)
	t = time.Now()
	res.Accepted = waitAccepted(p.Paths.Socket, o.Key, inbox, 30*time.Second)
	step("accepted", t)
	return res, nil
}

// waitAccepted waits until the session has taken its first prompt (its
// status leaves starting: the prompt hook, or a new transcript file; at
// most limit, the contract's 30 s). It is woken by the inbox's watch feed
// (socket's watch op: a line per status change), so it answers as soon
// as the status changes: the outbox read it waited on before wakes only
// for an outbox entry, and a status change waited out its whole second
// (send's accepted step was about 1.0 s for a CLI that took its prompt
// at once; issue 39, Deliver 4). A watch line is only a wake-up: the
// status op decides, at least once a second, so a change between the
// watch's opening and its start is seen all the same, and without a
// watch (the inbox refuses one) this is the status op every second.
func waitAccepted(socket, key string, inbox Inbox, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	w := openWatch(socket)
	defer w.close()
	for {
		resp, err := inbox(&offload.Request{Op: "status", Repo: key}, 10*time.Second)
		if err == nil {
			if ss, _ := resp["sessions"].([]any); len(ss) == 1 {
				st, _ := ss[0].(map[string]any)["status"].(string)
				if st != offload.StatusStarting && st != "" {
					return st != offload.StatusStopped
				}
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		w.next(key, min(left, time.Second))
	}
}

// watch is a connection to the inbox's watch op, or nil without one.
type watch struct {
	conn net.Conn
	rd   *bufio.Reader
}

// openWatch opens the inbox's watch feed; nil when the inbox cannot be
// reached (next then only waits).
func openWatch(socket string) *watch {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return nil
	}
	if _, err := conn.Write([]byte(`{"op":"watch"}` + "\n")); err != nil {
		conn.Close()
		return nil
	}
	return &watch{conn: conn, rd: bufio.NewReaderSize(conn, 64<<10)}
}

// next returns at the first watch line about repo key, or after wait.
func (w *watch) next(key string, wait time.Duration) {
	if w == nil || w.conn == nil {
		time.Sleep(wait)
		return
	}
	w.conn.SetReadDeadline(time.Now().Add(wait))
	for {
		line, err := w.rd.ReadBytes('\n')
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				// The feed ended (an inbox restarting): wait out this
				// round, then the status op alone.
				w.conn.Close()
				w.conn = nil
				time.Sleep(wait)
			}
			return
		}
		var ev struct {
			Repo string `json:"repo"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.Repo == key {
			return
		}
	}
}

func (w *watch) close() {
	if w != nil && w.conn != nil {
		w.conn.Close()
	}
}

// sendRun is one send's state.
type sendRun struct {
	p          *Packer
	o          SendOptions
	dir, stage string
	handover   []byte
	env        []byte
	// bundleRefs are the refs of the bundle indexPack took, nil when the
	// stream had none.
	bundleRefs map[string]string
	head       []byte
	gitIndex   []byte
	links      []string // secrets/file/<path> placed
}

// read reads the stream: small members into memory, the bundle's pack
// straight into git index-pack (indexPack), secrets straight onto the
// tmpfs (never a disk).
func (s *sendRun) read(r io.Reader) error {
	secrets := s.p.Paths.RepoSecrets(s.o.Key)
	return stream.Read(r, func(m stream.Member, body io.Reader) error {
		var err error
		switch m.Kind {
		case stream.Handover:
			if s.handover, err = io.ReadAll(body); err == nil {
				if herr := offload.CheckHandover(string(s.handover)); herr != nil {
					return herr
				}
			}
		case stream.EnvJSON:
			if s.env, err = io.ReadAll(body); err == nil {
				_, err = envstep.Parse(s.env)
			}
		case stream.HEAD:
			s.head, err = io.ReadAll(body)
		case stream.Index:
			s.gitIndex, err = io.ReadAll(body)
		case stream.Bundle:
			if s.o.NoRepo {
				_, err = io.Copy(io.Discard, body)
			} else {
				err = s.indexPack(body)
			}
		case stream.Secret:
			rel, serr := offload.SecretMember(m.Rel)
			if serr != nil {
				return &stream.MemberError{Member: m.Name, Rule: serr.Error()}
			}
			path := filepath.Join(secrets, rel)
			if err = mkdirs(secrets, filepath.Dir(path)); err == nil {
				err = writeFile(path, body, 0o600)
			}
			if strings.HasPrefix(rel, "file/") {
				s.links = append(s.links, strings.TrimPrefix(rel, "file/"))
			}
		}
		return err
	})
}

func mkdirs(root, dir string) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	os.Chmod(filepath.Dir(root), 0o700)
	return os.MkdirAll(dir, 0o700)
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		os.Remove(path)
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	}
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (s *sendRun) emptyStage() {
	entries, _ := os.ReadDir(s.stage)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(s.stage, e.Name()))
	}
}

// gitDir creates the copy's .git/objects when absent (rsync leaves them
// out), once.
func (s *sendRun) gitDir() (string, error) {
	gitDir := filepath.Join(s.dir, ".git")
	if _, err := os.Stat(gitDir); errors.Is(err, os.ErrNotExist) {
		if _, err := git(s.dir, nil, nil, "init", "-q"); err != nil {
			return "", err
		}
	}
	for _, d := range []string{"objects/pack", "objects/info", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(gitDir, d), 0o755); err != nil {
			return "", err
		}
	}
	return gitDir, nil
}

// indexPack takes the bundle as the stream brings it: its header's
// prerequisites checked in the copy, then git index-pack --stdin
// --fix-thin reading its pack straight from the stream, so the box
// indexes while the host sends instead of after (issue 39, Deliver 4);
// its refs are set once the whole stream is read (index). Nothing is
// staged: a send cut short leaves at most index-pack's tmp_pack_*, which
// the next begin removes.
func (s *sendRun) indexPack(body io.Reader) error {
	if _, err := s.gitDir(); err != nil {
		return err
	}
	br := bufio.NewReaderSize(body, 64<<10)
	prereqs, bundleRefs, err := bundleHeader(br)
	if err != nil {
		return err
	}
	for _, oid := range prereqs {
		if _, err := git(s.dir, nil, nil, "cat-file", "-e", oid+"^{commit}"); err != nil {
			return fmt.Errorf("the bundle needs commit %s, which the copy lacks; the copy's refs are untouched (the host must send the history from an older point)", oid)
		}
	}
	if _, err := git(s.dir, nil, br, "index-pack", "--stdin", "--fix-thin"); err != nil {
		return fmt.Errorf("index the bundle's pack (refs untouched): %w", err)
	}
	s.bundleRefs = bundleRefs
	return nil
}

// index writes a linked worktree's HEAD and index and sets the refs of
// the bundle indexPack took (Contract: never git bundle unbundle, which
// refuses the prerequisites the refs rsync brought already name).
func (s *sendRun) index() error {
	gitDir, err := s.gitDir()
	if err != nil {
		return err
	}
	if s.head != nil {
		if err := offload.WriteFile(filepath.Join(gitDir, "HEAD"), s.head); err != nil {
			return err
		}
	}
	if s.gitIndex != nil {
		if err := offload.WriteFile(filepath.Join(gitDir, "index"), s.gitIndex); err != nil {
			return err
		}
	}
	bundleRefs := s.bundleRefs
	if bundleRefs == nil {
		return nil
	}
	names := make([]string, 0, len(bundleRefs))
	for ref := range bundleRefs {
		names = append(names, ref)
	}
	sort.Strings(names)
	symrefs, err := symrefs(s.dir)
	if err != nil {
		return err
	}
	var batch bytes.Buffer
	for _, ref := range names {
		// Only refs/…: HEAD and, from a linked worktree, pseudo-refs such as
		// main-worktree/HEAD name the host's worktrees, not refs to set.
		// A symref of the copy (refs/remotes/origin/HEAD, which rsync
		// carried from the host) stays one: its target has its own line,
		// and a second update through it is refused by git ("multiple
		// updates ... including one via symref"), which failed the first
		// offload of every clone.
		if !strings.HasPrefix(ref, "refs/") || symrefs[ref] {
			continue
		}
		fmt.Fprintf(&batch, "update %s %s\n", ref, bundleRefs[ref])
	}
	if _, err := git(s.dir, nil, &batch, "update-ref", "--no-deref", "--stdin"); err != nil {
		return fmt.Errorf("set the bundle's refs: %w", err)
	}
	return nil
}

// symrefs is the set of the copy's refs that are symbolic refs.
func symrefs(dir string) (map[string]bool, error) {
	out, err := git(dir, nil, nil, "for-each-ref", "--format=%(refname) %(symref)")
	if err != nil {
		return nil, fmt.Errorf("list the copy's refs (refs untouched): %w", err)
	}
	set := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if ref, target, _ := strings.Cut(l, " "); target != "" {
			set[ref] = true
		}
	}
	return set, nil
}

// bundleHeader reads a v2 or v3 bundle's header up to its pack: the
// prerequisites and the refs.
func bundleHeader(br *bufio.Reader) (prereqs []string, refs map[string]string, err error) {
	refs = map[string]string{}
	first, err := br.ReadString('\n')
	if err != nil || (first != "# v2 git bundle\n" && first != "# v3 git bundle\n") {
		return nil, nil, errors.New("offload.bundle is not a git bundle (v2 or v3)")
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			return nil, nil, errors.New("offload.bundle: its header is truncated")
		}
		l = strings.TrimSuffix(l, "\n")
		switch {
		case l == "":
			return prereqs, refs, nil
		case strings.HasPrefix(l, "@"): // v3 capability
		case strings.HasPrefix(l, "-"):
			oid, _, _ := strings.Cut(l[1:], " ")
			prereqs = append(prereqs, oid)
		default:
			oid, ref, ok := strings.Cut(l, " ")
			if !ok {
				return nil, nil, fmt.Errorf("offload.bundle: header line %q is not <oid> <ref>", l)
			}
			refs[ref] = oid
		}
	}
}

// check: the copy equals S, a temporary-index snapshot's tree equals
// S^{tree} and HEAD equals S's parent (Contract: send steps). An empty
// history (no S sent, HEAD unborn) has nothing to compare.
func (s *sendRun) check() error {
	git(s.dir, nil, nil, "-c", "core.fsmonitor=false", "update-index", "-q", "--refresh")
	base := BaseRef(s.o.ID)
	sTree, err := git(s.dir, nil, nil, "rev-parse", "--verify", "-q", base+"^{tree}")
	if err != nil {
		if _, herr := git(s.dir, nil, nil, "rev-parse", "--verify", "-q", "HEAD"); herr != nil {
			return nil // an empty history
		}
		return fmt.Errorf("the stream names no %s, so the copy cannot be checked against S", base)
	}
	tmp, err := os.CreateTemp(s.stage, "index-*")
	if err != nil {
		return err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if idx, err := os.ReadFile(filepath.Join(s.dir, ".git/index")); err == nil {
		os.WriteFile(tmp.Name(), idx, 0o600)
	} else {
		os.Remove(tmp.Name())
	}
	env := []string{"GIT_INDEX_FILE=" + tmp.Name()}
	if _, err := git(s.dir, env, nil, "-c", "core.fsmonitor=false", "add", "-A"); err != nil {
		return fmt.Errorf("snapshot the copy: %w", err)
	}
	tree, err := git(s.dir, env, nil, "write-tree")
	if err != nil {
		return err
	}
	if tree != sTree {
		diff, _ := git(s.dir, nil, nil, "diff", "--stat", base, tree)
		return fmt.Errorf("the copy does not equal S (%s): its tree is %s, S's is %s; differs in: %s", base, tree, sTree, firstLines(diff, 5))
	}
	head, _ := git(s.dir, nil, nil, "rev-parse", "--verify", "-q", "HEAD")
	parent, _ := git(s.dir, nil, nil, "rev-parse", "--verify", "-q", base+"^")
	if head != parent {
		return fmt.Errorf("the copy's HEAD %s is not S's parent %s", head, parent)
	}
	return nil
}

func firstLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, "; ")
}

// placeLinks makes each file/<repo path> secret's place in the copy a
// link to the tmpfs; a real file there is left alone and is an error.
func (s *sendRun) placeLinks() error {
	secrets := s.p.Paths.RepoSecrets(s.o.Key)
	for _, rel := range s.links {
		target := filepath.Join(secrets, "file", rel)
		link := filepath.Join(s.dir, rel)
		if t, err := os.Readlink(link); err == nil && t == target {
			continue
		}
		if _, err := os.Lstat(link); err == nil {
			return fmt.Errorf("secret file/%s: %s exists in the copy and is not our link; it is left alone", rel, link)
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("link %s to its secret: %w", link, err)
		}
	}
	return nil
}

// writeExcludes rewrites the copy's lines of the excludes file: its
// git-ignored directories, one absolute path a line; the other copies'
// lines stay (Contract: Offload, State excludes).
func (p *Packer) writeExcludes(name, dir string) error {
	path := filepath.Join(p.Paths.State, "excludes")
	old, _ := os.ReadFile(path)
	prefix := dir + "/"
	var lines []string
	for _, l := range strings.Split(string(old), "\n") {
		if l != "" && !strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	for _, d := range gitcmd.IgnoredDirs(dir) {
		lines = append(lines, prefix+d)
	}
	sort.Strings(lines)
	data := strings.Join(lines, "\n")
	if data != "" {
		data += "\n"
	}
	return offload.WriteFile(path, []byte(data))
}
