package packer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// Packer drives the offloads of one user's repositories to one box.
type Packer struct {
	Dirs      Dirs
	Transport Transport
	Box       BoxInfo
	Progress  Progress
	// Yes is the go-ahead given beforehand for every warning (--yes).
	Yes bool
	// Ask asks the person to go on past the findings shown; nil (no
	// terminal, --json) is no.
	Ask func(question string) bool
	// BackWait bounds back's wait for the box's back, 600 s when zero.
	BackWait time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// BoxState, when set, reads the box's state as the api names it
	// (running, hibernating, hibernated, ...): the steps that talk to the
	// box read it every watchEvery and stop, naming it, once it is not
	// running (watchBox), rather than wait on a frozen box.
	BoxState func(ctx context.Context) (string, error)
}

func (p *Packer) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Repo is a repository as the packer names it.
type Repo struct {
	Top, Key string
	// Linked is a linked worktree (.git is a file).
	Linked bool
}

// FindRepo is the repository holding dir (git rev-parse --show-toplevel);
// outside one it is the preflight's block "Not a git repository".
func FindRepo(dir string) (Repo, error) {
	top, err := gitcmd.Run(dir, nil, nil, "rev-parse", "--show-toplevel")
	if err != nil || top == "" {
		f := offload.Found("Not a git repository", Block, fmt.Sprintf("%s is not inside a git work tree (git rev-parse --show-toplevel)", dir))
		return Repo{}, &Refusal{Msg: "Not a git repository: " + f.Detail, Findings: []Finding{f}}
	}
	fi, err := os.Lstat(filepath.Join(top, ".git"))
	return Repo{Top: top, Key: RepoKey(top), Linked: err == nil && fi.Mode().IsRegular()}, nil
}

// OffloadOptions are `cocoonbox offload`'s choices.
type OffloadOptions struct {
	// Dir is where the command runs (inside the repository).
	Dir string
	// Kind is the box CLI, claude or codex; Name the copy's name
	// (/workspace/<name>), the top's base name when empty.
	Kind, Name string
}

// OffloadResult is what an offload did.
type OffloadResult struct {
	ID       string    `json:"id"`
	Repo     string    `json:"repo"`
	Name     string    `json:"name"`
	Dir      string    `json:"dir"`
	Base     string    `json:"base"`
	Tmux     string    `json:"tmux"`
	Accepted bool      `json:"accepted"`
	Bundle   bool      `json:"bundle"`
	Findings []Finding `json:"findings"`
	// Timings are the host's steps, in milliseconds, one after another
	// but bundle: setup (the repository, the hand-over, a stale record),
	// preflight (the host findings), local (the secrets and the linked
	// worktrees), begin, account (what begin's answer still waited for
	// the user's own CLI's account, asked beside the two), excludes,
	// dry-run, snapshot (env.json, S, offload.json), rsync, bundle (made
	// beside rsync), send.
	Timings map[string]int64 `json:"timings_ms"`
	// BoxTimings are send's steps in the box, in milliseconds.
	BoxTimings map[string]any `json:"box_timings_ms"`
}

// Offload moves the repository's task into the box (Contract: Offload,
// "Offload, Mac side"): the hand-over check before anything else, the
// host findings, begin (the box half), the size dry run, the user's yes
// for warnings, then S at refs/cocoonbox/base/<id>, env.json, offload.json,
// rsync, the bundle and send with the stream. Before begin a refusal
// changes nothing; after it a failure removes S's ref, offload.json and
// the bundle again and says that the box's copy may be partly synced
// (it holds nothing unreturned; the next offload syncs it again).
func (p *Packer) Offload(ctx context.Context, o OffloadOptions) (*OffloadResult, error) {
	repo, err := FindRepo(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := offload.CheckKind(o.Kind); err != nil {
		return nil, &Refusal{Msg: err.Error()}
	}
	setup := time.Now()
	name := o.Name
	if name == "" {
		name = DefaultName(repo.Top)
	}
	if err := offload.CheckName(name); err != nil {
		return nil, &Refusal{Msg: err.Error()}
	}
	handover, err := p.Dirs.ReadHandover(repo.Key)
	if err != nil {
		return nil, err
	}
	taken, err := p.clearStale(ctx, repo)
	if err != nil || taken != nil {
		return taken, err
	}
	res := &OffloadResult{Repo: repo.Key, Name: name, Timings: map[string]int64{}}
	step := func(name string, t time.Time) { res.Timings[name] = time.Since(t).Milliseconds() }
	step("setup", setup)
	// The account of the user's own CLI here (the sign-in finding's
	// other side) is asked while the preflight and begin run: the real
	// claude's auth status is a node start (0.8 to 4 s on this 2-core
	// host), which begin's answer waited behind before (issue 39,
	// Deliver 4). It reads and changes nothing; an offload that ends
	// before it is read cancels it.
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	account := make(chan string, 1)
	go func() { account <- HostAccount(actx, o.Kind) }()
	t := time.Now()
	repos, err := p.Dirs.LoadRepos()
	if err != nil {
		return nil, err
	}
	prefs := repos.Prefs(repo.Key)
	findings, err := HostFindings(repo.Top, string(handover), prefs.Secrets)
	if err != nil {
		return nil, err
	}
	if f := ImageFinding(p.Box.Image); f != nil {
		findings = append([]Finding{*f}, findings...)
	}
	step("preflight", t)
	if blocked(findings) {
		return nil, refusal(findings)
	}
	t = time.Now()
	secrets, err := secretFiles(repo.Top, prefs.Secrets)
	if err != nil {
		return nil, &Refusal{Msg: err.Error() + " (cocoonbox offload secrets remove it, or put the file back)"}
	}
	secretPaths, err := fileSecretPaths(repo.Top, prefs.Secrets)
	if err != nil {
		return nil, err
	}
	worktrees, err := p.linkedWorktrees(repo)
	if err != nil {
		return nil, err
	}
	step("local", t)

	res.ID = p.newID()
	t = time.Now()
	p.Progress.Printf("begin: the box half of the preflight for %s in box %s", repo.Top, p.Box.Name)
	begin, err := p.verb(ctx, nil, "begin", "--repo", repo.Key, "--name", name, "--kind", o.Kind, "--id", res.ID)
	if err != nil {
		return nil, &Failure{Step: "begin", Err: err, Left: "nothing changed here; the box may have taken its copy for " + res.ID + " (the next cocoonbox offload takes it again)"}
	}
	for _, f := range anyList(begin.resp["findings"]) {
		m, _ := f.(map[string]any)
		findings = append(findings, offload.Found(str(m, "check"), str(m, "outcome"), str(m, "detail")))
	}
	step("begin", t)
	cli, _ := begin.resp["cli"].(map[string]any)
	t = time.Now()
	hostAccount := <-account
	step("account", t)
	if f := AccountFinding(o.Kind, str(cli, "account"), hostAccount); f != nil {
		findings = append(findings, *f)
	}
	if str(cli, "hooks_blocked") != "" {
		findings = append(findings, offload.Found("Box CLI hooks", Warn, str(cli, "hooks_blocked")+" turns hooks off: the box cannot see when claude is idle"))
	}
	if err := begin.err("begin"); err != nil {
		res.Findings = findings
		if r, ok := err.(*Refusal); ok {
			r.Findings = findings
		}
		return nil, err
	}
	res.Dir = begin.str("dir")

	// From here on a failure rolls back what this host holds.
	var bundle, excludes string
	rollback := func(stepName string, err error) error {
		os.Remove(bundle)
		os.Remove(excludes)
		p.Dirs.RemoveRecord(repo.Key)
		gitcmd.DropOffload(repo.Top, res.ID)
		var r *Refusal
		if errors.As(err, &r) {
			return err
		}
		return &Failure{Step: stepName, Err: err, Left: fmt.Sprintf("rolled back here (refs/cocoonbox/base/%s and offload.json removed); the box's copy %s may be partly synced: it holds nothing unreturned and the next offload syncs it again", res.ID, res.Dir)}
	}
	t = time.Now()
	if excludes, err = p.writeExcludes(repo, begin, secretPaths); err != nil {
		return nil, rollback("excludes", err)
	}
	step("excludes", t)
	t = time.Now()
	size, err := p.rsync(ctx, repo, excludes, worktrees, name, true)
	if err != nil {
		return nil, rollback("rsync --dry-run", err)
	}
	step("dry-run", t)
	if f := SizeFinding(size, prefs.SizeYes); f != nil {
		findings = append(findings, *f)
	}
	res.Findings = findings
	if err := p.confirm(findings); err != nil {
		return nil, rollback("confirm", err)
	}
	if f := SizeFinding(size, false); f != nil && !prefs.SizeYes {
		prefs.SizeYes = true
		if err := p.Dirs.SaveRepos(repos); err != nil {
			return nil, rollback("repos.json", err)
		}
	}

	t = time.Now()
	env, err := DetectEnv(repo.Top)
	if err != nil {
		return nil, rollback("env.json", err)
	}
	if err := offload.WriteFile(filepath.Join(p.Dirs.Repo(repo.Key), "env.json"), env); err != nil {
		return nil, rollback("env.json", err)
	}
	// offload.json before S's ref: a packer killed after it leaves a
	// record the next offload finds stale and clears, ref and all.
	if res.Base, err = gitcmd.Snapshot(repo.Top, "cocoonbox offload "+res.ID, false, append(append([]string{}, secretPaths...), worktrees...)...); err != nil {
		return nil, rollback("S", err)
	}
	rec := &Record{ID: res.ID, Repo: repo.Key, Box: p.Box.ID, BoxName: p.Box.Name, Name: name, Dir: res.Dir,
		Kind: o.Kind, Base: res.Base, Top: repo.Top, StartedAtMs: p.now().UnixMilli(), SecretPaths: secretPaths, Worktrees: worktrees}
	if err := p.Dirs.SaveRecord(rec); err != nil {
		return nil, rollback("offload.json", err)
	}
	if _, err := gitcmd.Run(repo.Top, nil, nil, "update-ref", "refs/cocoonbox/base/"+res.ID, res.Base); err != nil {
		return nil, rollback("S", err)
	}
	step("snapshot", t)

	// The bundle is made while rsync sends the tree (they read different
	// things: the history, the work tree), so a large first offload waits
	// for the slower of the two, not their sum (issue 39, Deliver 4).
	t = time.Now()
	bundle = filepath.Join(p.Dirs.Repo(repo.Key), "offload.bundle")
	type made struct {
		ok  bool
		err error
		ms  int64
	}
	bundled := make(chan made, 1)
	go func() {
		ok, err := makeBundle(repo.Top, bundle, begin.resp["refs"], "refs/cocoonbox/base/"+res.ID)
		bundled <- made{ok, err, time.Since(t).Milliseconds()}
	}()
	p.Progress.Printf("rsync: %s/ to the box's %s (%d bytes to send)", repo.Top, res.Dir, size)
	_, rerr := p.rsync(ctx, repo, excludes, worktrees, name, false)
	step("rsync", t)
	b := <-bundled
	res.Timings["bundle"] = b.ms
	if rerr != nil {
		return nil, rollback("rsync", rerr)
	}
	if res.Bundle, err = b.ok, b.err; err != nil {
		return nil, rollback("bundle", err)
	}
	if !res.Bundle {
		bundle = ""
	}
	in := streamInput{handover: handover, env: env, bundle: bundle, secrets: secrets}
	if repo.Linked {
		if in.head, err = gitcmd.GitPath(repo.Top, "HEAD"); err == nil {
			in.index, err = gitcmd.GitPath(repo.Top, "index")
		}
		if err != nil {
			return nil, rollback("stream", err)
		}
	}
	t = time.Now()
	p.Progress.Printf("send: the stream (hand-over, env.json%s%s, %d secrets) to the box", map[bool]string{true: ", the bundle"}[res.Bundle], map[bool]string{true: ", HEAD and index"}[repo.Linked], len(secrets))
	send, err := p.send(ctx, repo.Key, o.Kind, res.ID, in)
	// No answer (the connection dropped): the box may have acted.
	lost := err != nil && send.resp == nil
	if err == nil {
		err = send.err("send")
	}
	if bundle != "" {
		os.Remove(bundle)
	}
	os.Remove(excludes)
	if lost {
		rec.Unconfirmed = true
		if serr := p.Dirs.SaveRecord(rec); serr != nil {
			return nil, rollback("send", errors.Join(err, serr))
		}
		return nil, &Failure{Step: "send", Err: err, Left: fmt.Sprintf("the box's answer was lost, and it may have taken the offload: offload.json and S (refs/cocoonbox/base/%s) are kept; run cocoonbox offload again: it asks the box, then finishes this offload or starts over", res.ID)}
	}
	if err != nil {
		return nil, rollback("send", err)
	}
	step("send", t)
	res.Tmux = send.str("tmux")
	res.Accepted, _ = send.resp["accepted"].(bool)
	res.BoxTimings, _ = send.resp["timings_ms"].(map[string]any)
	if res.Accepted {
		p.Progress.Printf("offloaded: %s works in %s; watch it with: cocoonbox rsh --box %s -- tmux attach -t %s; bring it back with: cocoonbox back", o.Kind, res.Dir, p.Box.Name, res.Tmux)
	} else {
		p.Progress.Printf("offloaded, but %s did not take the first prompt within 30 s: look with cocoonbox rsh --box %s -- tmux attach -t %s", o.Kind, p.Box.Name, res.Tmux)
	}
	return res, nil
}

func (p *Packer) newID() string {
	b := make([]byte, 3)
	rand.Read(b)
	return "off-" + p.now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// ReadHandover reads the repo's handover.md and checks it against the
// template (Contract: Offload, Hand-over: the first line "# Hand-over: ",
// every heading once, at most 256 KiB), before any other check; a missing
// or broken one is a *Refusal naming the path and the rule.
func (d Dirs) ReadHandover(key string) ([]byte, error) {
	path := d.Handover(key)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &Refusal{Msg: fmt.Sprintf("no hand-over at %s: write it there first (cocoonbox offload handover-path prints the path; --handover-prompt the request for a CLI)", path)}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, offload.MaxHandover+1))
	if err != nil {
		return nil, err
	}
	if err := offload.CheckHandover(string(data)); err != nil {
		return nil, &Refusal{Msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return data, nil
}

// clearStale handles an offload.json left by an earlier offload. When
// the box has no session of that offload (a packer killed before the box
// took it, or a box that refused), the record and its S ref go and the
// new offload starts over. When it has one, the box took it: an offload
// whose send answer was lost (Unconfirmed) is done, and its result is
// returned; any other is in flight, a refusal saying to bring it back.
func (p *Packer) clearStale(ctx context.Context, repo Repo) (*OffloadResult, error) {
	rec, err := p.Dirs.LoadRecord(repo.Key)
	if err != nil || rec == nil {
		return nil, err
	}
	ss, err := p.Status(ctx, repo.Key)
	if err != nil {
		return nil, err
	}
	for _, s := range ss {
		if str(s, "offload_id") != rec.ID {
			continue
		}
		if !rec.Unconfirmed {
			return nil, &Refusal{Msg: fmt.Sprintf("offload %s of this repository is in flight in box %s (%s, session %s): bring it back first with cocoonbox back", rec.ID, rec.BoxName, rec.Dir, str(s, "status"))}
		}
		rec.Unconfirmed = false
		if err := p.Dirs.SaveRecord(rec); err != nil {
			return nil, err
		}
		res := &OffloadResult{ID: rec.ID, Repo: rec.Repo, Name: rec.Name, Dir: rec.Dir, Base: rec.Base, Tmux: "cb-off-" + rec.Repo + "-" + rec.Kind,
			Accepted: str(s, "status") != "starting", Findings: []Finding{}, Timings: map[string]int64{}}
		p.Progress.Printf("offloaded: the box had taken offload %s (its answer was lost): %s works in %s (session %s); bring it back with: cocoonbox back", rec.ID, rec.Kind, rec.Dir, str(s, "status"))
		return res, nil
	}
	p.Progress.Printf("offload %s stopped before the box took it; starting over", rec.ID)
	gitcmd.DropOffload(repo.Top, rec.ID)
	os.Remove(filepath.Join(p.Dirs.Repo(repo.Key), "offload.bundle"))
	return nil, p.Dirs.RemoveRecord(repo.Key)
}

// writeExcludes is rsync's --exclude-from file (read with --from0, one
// rule per NUL): git's ignored paths here and begin's ignored in the box,
// each anchored at the top (/<path>) and matched literally
// (offload.RsyncLiteral: a name with [ * ? or \ is no wildcard, and one
// with a newline is one rule), so what git lists as ignored is what rsync
// leaves out, and the preflight's "not sent" holds; the box's own ignored
// files stay (no --delete-excluded). Then what is never carried
// (excludeLines: the history, LFS objects, submodules, git's lock files,
// the opted-in file: secrets).
func (p *Packer) writeExcludes(repo Repo, begin verbResult, secretPaths []string) (string, error) {
	ign, err := gitcmd.Ignored(repo.Top)
	if err != nil {
		return "", err
	}
	extra, err := excludeLines(repo.Top, secretPaths)
	if err != nil {
		return "", err
	}
	for _, v := range anyList(begin.resp["ignored"]) {
		if s, ok := v.(string); ok {
			ign = append(ign, s)
		}
	}
	var rules []string
	for _, l := range uniq(ign) {
		rules = append(rules, "/"+offload.RsyncLiteral(l))
	}
	path := filepath.Join(p.Dirs.Repo(repo.Key), "excludes")
	return path, offload.WriteFile(path, offload.RsyncRules(append(rules, extra...)))
}

var totalSizeRe = regexp.MustCompile(`Total transferred file size: ([0-9,]+) bytes`)

// rsync runs the contract's rsync (a dry run first, for the size):
// rsync -az --delete --exclude-from=<ignored> --exclude=/.git/objects/
// -e "<rsh>" <top>/ box:/workspace/<name>/, with --from0 for the excludes
// file (rsyncFilter); a linked worktree also leaves out its .git file, and
// the linked worktrees inside are hidden. It returns the bytes rsync sends.
func (p *Packer) rsync(ctx context.Context, repo Repo, excludes string, hide []string, name string, dry bool) (int64, error) {
	args := append([]string{"-z"}, rsyncFilter(repo, excludes, hide)...)
	if dry {
		args = append(args, "--dry-run", "--stats")
	} else {
		args = append(args, "--stats", "--info=progress2")
	}
	args = append(args, "-e", p.Transport.Shell(), repo.Top+"/", "box:/workspace/"+name+"/")
	ctx, stop := p.watchBox(ctx)
	defer stop()
	cmd := exec.CommandContext(ctx, "rsync", args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var size int64
	var shown time.Time
	sc := bufio.NewScanner(stdout)
	sc.Split(scanCRLF)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if m := totalSizeRe.FindStringSubmatch(l); m != nil {
			size, _ = strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
		}
		// progress2 redraws its line many times a second: one a second
		// is enough for a person; the stats lines all show.
		if dry || l == "" || strings.Contains(l, "-chk=") && time.Since(shown) < time.Second {
			continue
		}
		shown = time.Now()
		p.Progress.Printf("rsync: %s", l)
	}
	if err := cmd.Wait(); err != nil {
		// 24 is source files that vanished while rsync ran: git's own
		// transient files (gc.pid, *.lock of a background gc --auto) come
		// and go in .git; the box checks the copy against S anyway.
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 24 {
			p.Progress.Printf("rsync: some files vanished while they were sent (exit 24); the box checks the copy against S")
			return size, nil
		}
		if serr := stop(); serr != nil {
			return 0, fmt.Errorf("rsync into the box: %w", serr)
		}
		return 0, fmt.Errorf("rsync into the box: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	return size, nil
}

// rsyncFilter is the copy's rsync arguments besides compression, output
// and the ends: -a --delete, the excludes file (NUL-separated:
// --from0), the history (/.git/objects/, which travels as the bundle),
// a linked worktree's .git file, and a hide rule (H: left out of what is
// sent, and deleted from the box's copy, where an earlier offload may
// have put it) for each path of hide (the linked worktrees inside).
func rsyncFilter(repo Repo, excludes string, hide []string) []string {
	args := []string{"-a", "--delete", "--from0", "--exclude-from=" + excludes, "--exclude=/.git/objects/"}
	if repo.Linked {
		args = append(args, "--exclude=/.git")
	}
	for _, h := range hide {
		args = append(args, "--filter=H /"+offload.RsyncLiteral(h))
	}
	return args
}

// scanCRLF splits rsync's output at \n and at the \r its progress line
// redraws with.
func scanCRLF(data []byte, atEOF bool) (int, []byte, error) {
	for i, c := range data {
		if c == '\n' || c == '\r' {
			return i + 1, data[:i], nil
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// makeBundle writes the history the box lacks as a v2 git bundle: every
// ref (S's among them, and IndexRef, the index's tree held meanwhile)
// over the prerequisites, the values of begin's refs the host has. It is
// what git bundle create <file> --all --not <those> carries (Contract:
// Offload, Mac side) but for the blobs only S reaches, when sRef names S:
// the untracked and changed files rsync has just sent, which the box's
// check writes into its copy's objects as it hashes them (Contract:
// Offload, send steps), so that content travels once (issue 39, Deliver
// 3); S's commit and trees travel. False when there is nothing to send.
func makeBundle(top, file string, boxRefs any, sRef string) (bool, error) {
	refs, _ := boxRefs.(map[string]any)
	var oids strings.Builder
	for _, v := range refs {
		if s, ok := v.(string); ok && oidRe.MatchString(s) {
			oids.WriteString(s + "\n")
		}
	}
	var not, prereqs []string
	if oids.Len() > 0 {
		out, err := gitcmd.Run(top, nil, strings.NewReader(oids.String()), "cat-file", "--batch-check=%(objectname) %(objecttype)")
		if err != nil {
			return false, err
		}
		for _, l := range strings.Split(out, "\n") {
			if oid, typ, _ := strings.Cut(l, " "); typ != "missing" && oidRe.MatchString(oid) {
				not = append(not, "^"+oid)
				if typ == "commit" {
					prereqs = append(prereqs, oid)
				}
			}
		}
	}
	defer holdIndexTree(top)()
	list, err := gitcmd.Run(top, nil, nil, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return false, err
	}
	var header strings.Builder
	header.WriteString("# v2 git bundle\n")
	for _, oid := range uniq(prereqs) {
		header.WriteString("-" + oid + "\n")
	}
	var others []string
	sOID := ""
	for _, l := range strings.Split(list, "\n") {
		oid, ref, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		header.WriteString(oid + " " + ref + "\n")
		if ref == sRef {
			sOID = oid
		} else {
			others = append(others, oid)
		}
	}
	if head, err := gitcmd.Run(top, nil, nil, "rev-parse", "--verify", "-q", "HEAD"); err == nil && head != "" {
		others = append(others, head)
	}
	header.WriteString("\n")
	// What the other refs reach, then S's commit and trees the others lack.
	objects, err := gitcmd.Raw(top, nil, nil, append(append([]string{"rev-list", "--objects"}, others...), not...)...)
	if err != nil {
		return false, err
	}
	if sOID != "" {
		negOthers := make([]string, 0, len(others))
		for _, o := range others {
			negOthers = append(negOthers, "^"+o)
		}
		own, err := gitcmd.Raw(top, nil, nil, append(append([]string{"rev-list", "--objects", "--filter=blob:none", sOID}, negOthers...), not...)...)
		if err != nil {
			return false, err
		}
		objects = append(objects, own...)
	}
	if len(bytes.TrimSpace(objects)) == 0 {
		os.Remove(file)
		return false, nil
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if _, err := f.WriteString(header.String()); err != nil {
		return false, err
	}
	cmd := exec.Command("git", "pack-objects", "--stdout", "-q", "--delta-base-offset")
	cmd.Dir, cmd.Stdin, cmd.Stdout = top, bytes.NewReader(objects), f
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("git pack-objects for the bundle: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	return true, f.Close()
}

var oidRe = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// send runs the box's send with the stream on its stdin.
func (p *Packer) send(ctx context.Context, key, kind, id string, in streamInput) (verbResult, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := writeStream(pw, in)
		pw.CloseWithError(err)
		done <- err
	}()
	res, err := p.verb(ctx, pr, "send", "--repo", key, "--kind", kind, "--id", id)
	pr.Close()
	if werr := <-done; werr != nil && err == nil && res.code == 0 {
		err = fmt.Errorf("write the stream: %w", werr)
	}
	return res, err
}

// confirm asks for the go-ahead past warnings; a refusal when not given.
func (p *Packer) confirm(findings []Finding) error {
	var open []Finding
	for _, f := range findings {
		if f.Outcome == Warn || f.Outcome == Confirm {
			open = append(open, f)
		}
	}
	if len(open) == 0 || p.Yes {
		return nil
	}
	if p.Ask != nil && p.Ask(FindingsTable(open)+"go on? [y/N] ") {
		return nil
	}
	r := refusal(open)
	r.Msg = "the preflight's warnings need a yes (--yes, or answer y): " + r.Msg
	return r
}

func blocked(fs []Finding) bool {
	for _, f := range fs {
		if f.Outcome == Block {
			return true
		}
	}
	return false
}

func refusal(fs []Finding) *Refusal {
	var parts []string
	for _, f := range fs {
		if f.Outcome == Block || !blocked(fs) {
			parts = append(parts, f.Check+": "+f.Detail)
		}
	}
	return &Refusal{Msg: strings.Join(parts, "; "), Findings: fs}
}

// FindingsTable is the findings as a person reads them, one a line.
func FindingsTable(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %-7s  %-30s  %s\n", f.Outcome, f.Check, f.Detail)
	}
	return b.String()
}

func anyList(v any) []any { l, _ := v.([]any); return l }

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }
