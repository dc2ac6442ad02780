package verbs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// Finding is one preflight finding (Contract: Offload, Preflight).
type Finding = offload.Finding

// CLI is begin's cli field: the box CLI of the chosen kind.
type CLI struct {
	Kind     string `json:"kind"`
	Version  string `json:"version"`
	SignedIn bool   `json:"signed_in"`
	Account  string `json:"account"`
	// HooksBlocked (claude only) is the first settings file that sets
	// allowManagedHooksOnly or disableAllHooks.
	HooksBlocked string `json:"hooks_blocked,omitempty"`
}

// Packer is the verbs' shared state: the paths and the store (the inbox
// is passed to each verb that needs it, as an Inbox).
type Packer struct {
	Paths offload.Paths
	Store offload.Store
	// Progress receives lines for a person (stderr).
	Progress func(format string, a ...any)
}

// New returns a Packer on paths.
func New(p offload.Paths, progress func(string, ...any)) *Packer {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	return &Packer{Paths: p, Store: offload.Store{Paths: p}, Progress: progress}
}

// loginShell runs a command line in the user's login shell, so the PATH
// is the one a session in tmux gets (Contract: Preflight: "on a login
// shell's PATH"). args are the line's $1, $2, ... It returns stdout and
// the exit code (-1: not run).
func loginShell(line string, timeout time.Duration, args ...string) (string, int) {
	cmd := exec.Command("bash", append([]string{"-lc", line, "bash"}, args...)...)
	cmd.Stdin = nil
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		return "", -1
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		return "", -1
	}
	return string(out), 0
}

// Preflight is the box half of the preflight for kind: the box tools, the
// CLI installed and signed in, the copy's state and the sessions running.
func (p *Packer) Preflight(key, kind string, sessions int) (CLI, []Finding) {
	findings := []Finding{}
	// The tools and the CLI are asked at once: each answer is a login
	// shell (and the CLI a node program), and the preflight waits on all
	// of them before anything is sent (issue 39, Deliver 4's fixed cost).
	tools := make(chan []string, 1)
	go func() { tools <- missingTools() }()
	cli := checkCLI(kind)
	missing := <-tools
	if len(missing) > 0 {
		findings = append(findings, offload.Found("Box tools missing", "block", "not on a login shell's PATH: "+strings.Join(missing, ", ")))
	}
	switch {
	case cli.Version == "":
		findings = append(findings, offload.Found("Box CLI missing or signed out", "block",
			fmt.Sprintf("%s is not installed in the box: Install in box (the vendor's official installer over rsh, into /home/user)", kind)))
	case !cli.SignedIn:
		findings = append(findings, offload.Found("Box CLI missing or signed out", "block",
			fmt.Sprintf("%s %s is installed but signed out: Sign in in the box", kind, cli.Version)))
	}
	if state, err := p.Store.CopyState(key); err == nil && (state == "unreturned" || state == "busy") {
		findings = append(findings, offload.Found("Unreturned or busy copy", "block",
			fmt.Sprintf("the copy is %s: bring the last offload back first", state)))
	}
	if sessions >= 3 {
		findings = append(findings, offload.Found("Three box sessions running", "block",
			fmt.Sprintf("%d box sessions are not stopped: end one first", sessions)))
	}
	return cli, findings
}

// boxTools are the tools the preflight wants on a login shell's PATH.
var boxTools = []string{"git", "rsync", "tmux", "mise"}

// missingTools is the boxTools a login shell does not find, asked in one
// shell; a shell that does not answer finds none of them.
func missingTools() []string {
	out, code := loginShell(`for t in "$@"; do command -v "$t" >/dev/null || echo "$t"; done`, 20*time.Second, boxTools...)
	if code != 0 {
		return boxTools
	}
	return strings.Fields(out)
}

// checkCLI runs the kind's version and sign-in commands (Contract:
// Preflight: claude --version, claude auth status; codex --version, codex
// login status).
func checkCLI(kind string) CLI {
	c := CLI{Kind: kind}
	switch kind {
	case "claude":
		authStatus := make(chan string, 1)
		go func() { out, _ := loginShell("claude auth status", 30*time.Second); authStatus <- out }()
		out, code := loginShell("claude --version", 30*time.Second)
		status := <-authStatus
		if code != 0 {
			return c
		}
		c.Version = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(out), "(Claude Code)"))
		var st struct {
			LoggedIn bool   `json:"loggedIn"`
			Email    string `json:"email"`
			Account  struct {
				Email string `json:"email"`
			} `json:"account"`
		}
		if json.Unmarshal([]byte(status), &st) == nil {
			c.SignedIn = st.LoggedIn
			c.Account = st.Email
			if c.Account == "" {
				c.Account = st.Account.Email
			}
		}
		c.HooksBlocked = hooksBlocked()
	case "codex":
		type answer struct {
			out  string
			code int
		}
		login := make(chan answer, 1)
		go func() { out, code := loginShell("codex login status 2>&1", 30*time.Second); login <- answer{out, code} }()
		out, code := loginShell("codex --version", 30*time.Second)
		st := <-login
		if code != 0 {
			return c
		}
		c.Version = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "codex-cli"))
		status := st.out
		c.SignedIn = st.code == 0 && !strings.Contains(status, "Not logged in")
		if c.SignedIn {
			c.Account = strings.TrimSpace(status)
		}
	}
	return c
}

// hooksBlocked is the first of the managed and user settings files that
// turns our hooks off (Contract: Offload, begin's hooks_blocked).
func hooksBlocked() string {
	home, _ := os.UserHomeDir()
	files := []string{"/etc/claude-code/managed-settings.json"}
	d, _ := filepath.Glob("/etc/claude-code/managed-settings.d/*")
	files = append(files, d...)
	files = append(files, filepath.Join(home, ".claude/remote-settings.json"), filepath.Join(home, ".claude/settings.json"))
	for _, f := range files {
		var s map[string]any
		if offload.ReadJSON(f, &s) != nil {
			continue
		}
		if s["allowManagedHooksOnly"] == true || s["disableAllHooks"] == true {
			return f
		}
	}
	return ""
}

// BeginResult is begin's answer (Contract: Offload, Verbs, begin): the
// copy's directory, its state (absent or mirror), its refs (ref → oid),
// the CLI, its git-ignored paths (a directory ends in /) and the warnings.
// The contract's ignored lists directories only; ours lists the ignored
// files too, so that its "the box's own ignored files stay" holds.
type BeginResult struct {
	Dir      string            `json:"dir"`
	Copy     string            `json:"copy"`
	Refs     map[string]string `json:"refs"`
	CLI      CLI               `json:"cli"`
	Ignored  []string          `json:"ignored"`
	Findings []Finding         `json:"findings"`
}

// Begin runs the preflight and, without a block, takes the copy for id,
// records its name and makes /workspace/<name>. A block is a *Refusal.
func (p *Packer) Begin(key, name, kind, id string, noRepo bool, sessions int) (*BeginResult, error) {
	cli, findings := p.Preflight(key, kind, sessions)
	res := &BeginResult{Dir: p.Paths.Copy(name), CLI: cli, Findings: findings, Refs: map[string]string{}, Ignored: []string{}}
	for _, f := range findings {
		if f.Outcome == "block" {
			return res, &Refusal{Msg: f.Check + ": " + f.Detail}
		}
	}
	unlock, err := p.lock(key)
	if err != nil {
		return res, err
	}
	defer unlock()
	idx, err := p.Store.LoadIndex()
	if err != nil {
		return res, err
	}
	for other, ent := range idx.Repos {
		if other != key && ent.Name == name {
			return res, &Refusal{Msg: fmt.Sprintf("the name %s is taken by repo %s", name, other)}
		}
	}
	if ent, ok := idx.Repos[key]; ok && ent.Name != name {
		return res, &Refusal{Msg: fmt.Sprintf("repo %s has its copy at %s; a new name needs its copy removed first", key, p.Paths.Copy(ent.Name))}
	}
	if res.Copy, err = p.Store.CopyState(key); err != nil {
		return res, err
	}
	if err := p.Store.EnsureRepo(key); err != nil {
		return res, err
	}
	idx.Repos[key] = offload.IndexEntry{Name: name}
	if err := p.Store.SaveIndex(idx); err != nil {
		return res, err
	}
	if err := os.MkdirAll(res.Dir, 0o755); err != nil {
		return res, fmt.Errorf("make %s: %w", res.Dir, err)
	}
	if !noRepo && isGitDir(res.Dir) {
		// A copy whose .git rsync filled while its bundle never came (an
		// offload killed at send) lacks .git/objects, and git does not
		// read it at all; made now, as send would, its refs show as
		// missing (left out) and its ignored paths are listed, so the box's
		// own ignored files stay there too.
		if err := os.MkdirAll(filepath.Join(res.Dir, ".git/objects"), 0o755); err != nil {
			return res, err
		}
		if err := p.removeTempPacks(res.Dir); err != nil {
			return res, err
		}
		res.Refs = gitcmd.Refs(res.Dir)
		// Every ignored path, files too: the host leaves each out of rsync,
		// and without --delete-excluded that keeps it, so the box's own
		// ignored files stay (.env, tmp/old.log under a tracked tmp/;
		// directories alone let rsync's --delete remove them).
		// Listed before the copy is taken, so a failure leaves it as it was.
		all, err := gitcmd.Ignored(res.Dir)
		if _, rerr := gitcmd.Run(res.Dir, nil, nil, "rev-parse", "--git-dir"); err != nil && rerr != nil {
			// A copy git cannot read (rsync filled its .git, the bundle
			// with .git/objects never came: an offload killed at send)
			// has no ignored paths, as it has no refs.
			all, err = []string{}, nil
		}
		if err != nil {
			return res, fmt.Errorf("list the copy's ignored files (the copy is not taken): %w", err)
		}
		res.Ignored = all
	}
	c, _, err := p.Store.LoadCopy(key)
	if err != nil {
		return res, err
	}
	c.OffloadID, c.Kind = id, kind
	if err := p.Store.SaveCopy(key, c); err != nil {
		return res, err
	}
	p.Progress("begin: copy %s (%s) taken for offload %s", res.Dir, res.Copy, id)
	return res, nil
}

// removeTempPacks removes what a killed send's git index-pack left in the
// copy (.git/objects/pack/tmp_pack_*, tmp_idx_*, tmp_rev_*: a pack being
// written, hundreds of MB for a large history). Send indexes under the
// repo's lock, which the caller holds, so no index-pack of ours is
// writing them now.
func (p *Packer) removeTempPacks(dir string) error {
	tmp, err := filepath.Glob(filepath.Join(dir, ".git/objects/pack/tmp_*"))
	if err != nil {
		return err
	}
	for _, f := range tmp {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove a killed send's temporary pack: %w", err)
		}
		p.Progress("begin: removed %s, left by a send that was stopped", f)
	}
	return nil
}

// Refusal is a verb's refusal: nothing changed (exit 3).
type Refusal struct{ Msg string }

func (r *Refusal) Error() string { return r.Msg }

// Failure is a verb that failed and rolled back as the contract states
// (exit 1).
type Failure struct{ Err error }

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }
