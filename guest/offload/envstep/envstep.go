// Package envstep is the offload environment step (Contract: Offload,
// Environment): env.json, written by the host packer, drives mise to
// install the wanted tool versions in the copy, then each lockfile's
// dependencies are fetched. The report says per tool what was wanted and
// from where, what is installed, and ready, missing or failed.
package envstep

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Env is env.json (Contract: Offload, Environment).
type Env struct {
	V               int               `json:"v"`
	Tools           map[string]string `json:"tools"`
	PackageManagers map[string]string `json:"package_managers"`
	Files           []string          `json:"files"`
	Lockfiles       []string          `json:"lockfiles"`
}

// Parse reads env.json and checks it: v 1, tool names and versions of
// printable characters without spaces, lockfiles relative paths in the
// copy.
func Parse(data []byte) (*Env, error) {
	var e Env
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("env.json: %w", err)
	}
	if e.V != 1 {
		return nil, fmt.Errorf("env.json: v %d: only 1 is known", e.V)
	}
	for _, m := range []map[string]string{e.Tools, e.PackageManagers} {
		for k, v := range m {
			if !word(k) || !word(v) {
				return nil, fmt.Errorf("env.json: tool %q version %q: names and versions are 1 to 128 printable characters without spaces", k, v)
			}
		}
	}
	for _, f := range append(append([]string{}, e.Files...), e.Lockfiles...) {
		if f == "" || filepath.IsAbs(f) || strings.Contains("/"+f+"/", "/../") {
			return nil, fmt.Errorf("env.json: file %q: must be a relative path inside the copy", f)
		}
	}
	return &e, nil
}

func word(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return false
		}
	}
	return true
}

// The outcomes of a tool (Contract: ready, missing or failed) and of a
// lockfile fetch (ours: fetched, failed, skipped).
const (
	Ready   = "ready"
	Missing = "missing"
	Failed  = "failed"
	Fetched = "fetched"
	Skipped = "skipped"
)

// Tool is one tool's line of the report: the tool, the version wanted and
// where that came from ("env.json tools" or "env.json package_managers"), the version
// installed ("" for none), and its outcome (ready, missing, failed) with
// the reason of one not ready.
type Tool struct {
	Tool      string `json:"tool"`
	Wanted    string `json:"wanted"`
	Source    string `json:"source"`
	Installed string `json:"installed"`
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason,omitempty"`
}

// Lockfile is one lockfile fetch: the lockfile (relative to the copy),
// the command run for it, and its outcome (fetched, failed, skipped) with
// the reason of a failed or skipped one.
type Lockfile struct {
	File    string `json:"file"`
	Command string `json:"command"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

// Report is the environment report (env-report.json in the repo's state
// directory). Done is false while the step runs; a step cut short by an
// inbox restart is done with Outcome failed. The times are Unix
// milliseconds, EndedAtMs 0 until the step ends.
type Report struct {
	V           int        `json:"v"`
	Done        bool       `json:"done"`
	Outcome     string     `json:"outcome"`
	Reason      string     `json:"reason,omitempty"`
	StartedAtMs int64      `json:"started_at_ms"`
	EndedAtMs   int64      `json:"ended_at_ms,omitempty"`
	Tools       []Tool     `json:"tools"`
	Lockfiles   []Lockfile `json:"lockfiles"`
}

// fetchCommands are the commands that fetch a lockfile's dependencies,
// run through `mise exec` so the pinned tools are used.
var fetchCommands = map[string]string{
	"go.sum":            "go mod download",
	"Cargo.lock":        "cargo fetch",
	"package-lock.json": "npm ci --ignore-scripts",
	"pnpm-lock.yaml":    "pnpm fetch",
	"yarn.lock":         "yarn install --frozen-lockfile --ignore-scripts",
	"uv.lock":           "uv sync --frozen",
	"poetry.lock":       "poetry install --no-root",
	"Gemfile.lock":      "bundle install",
}

// LockfileNames are the lockfiles the step fetches, sorted (the host
// packer lists those a repository has in env.json).
func LockfileNames() []string {
	names := make([]string, 0, len(fetchCommands))
	for n := range fetchCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Runner runs the step. Mise is the mise binary ("mise" on PATH unless
// set); Log receives the commands' output (env.log); Save is called with
// the report after every change, so a reader sees it grow.
type Runner struct {
	Mise string
	Log  io.Writer
	Save func(*Report) error
}

// Run installs env's tools in dir with mise and fetches its lockfiles.
// The report's Outcome is ready when every tool is ready and no fetch
// failed, else failed. When ctx ends (the inbox stops) Run returns at once
// and saves nothing more: the report stays unfinished, and the next inbox
// reports the step as cut short.
func (r *Runner) Run(ctx context.Context, dir string, env *Env) *Report {
	rep := &Report{V: 1, StartedAtMs: time.Now().UnixMilli(), Tools: []Tool{}, Lockfiles: []Lockfile{}}
	for _, src := range []struct {
		name string
		m    map[string]string
	}{{"env.json tools", env.Tools}, {"env.json package_managers", env.PackageManagers}} {
		for _, k := range sortedKeys(src.m) {
			rep.Tools = append(rep.Tools, Tool{Tool: k, Wanted: src.m[k], Source: src.name, Outcome: Missing})
		}
	}
	r.save(ctx, rep)
	outcome := Ready
	for i := range rep.Tools {
		t := &rep.Tools[i]
		spec := t.Tool + "@" + t.Wanted
		if ctx.Err() != nil {
			return rep
		}
		if _, err := r.mise(ctx, dir, "install", spec); err != nil {
			t.Outcome, t.Reason = Failed, err.Error()
		}
		if where, err := r.mise(ctx, dir, "where", spec); err == nil && where != "" {
			t.Installed = t.Wanted
			t.Outcome, t.Reason = Ready, ""
		} else if t.Outcome != Failed {
			t.Outcome = Missing
		}
		if t.Outcome != Ready {
			outcome = Failed
		}
		r.save(ctx, rep)
	}
	for _, f := range env.Lockfiles {
		if ctx.Err() != nil {
			return rep
		}
		l := Lockfile{File: f, Command: fetchCommands[filepath.Base(f)], Outcome: Fetched}
		switch {
		case l.Command == "":
			l.Outcome, l.Reason = Skipped, "no fetch command is known for "+filepath.Base(f)
		default:
			args := append([]string{"exec", "--"}, "sh", "-c", l.Command)
			if _, err := r.mise(ctx, filepath.Join(dir, filepath.Dir(f)), args...); err != nil {
				l.Outcome, l.Reason, outcome = Failed, err.Error(), Failed
			}
		}
		rep.Lockfiles = append(rep.Lockfiles, l)
		r.save(ctx, rep)
	}
	rep.Done, rep.Outcome, rep.EndedAtMs = true, outcome, time.Now().UnixMilli()
	r.save(ctx, rep)
	return rep
}

func (r *Runner) save(ctx context.Context, rep *Report) {
	if r.Save != nil && ctx.Err() == nil {
		r.Save(rep)
	}
}

// mise runs one mise command in dir; its output goes to the log, and a
// failure's error carries the last line mise printed (the reason).
func (r *Runner) mise(ctx context.Context, dir string, args ...string) (string, error) {
	bin := r.Mise
	if bin == "" {
		bin = "mise"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	// npm: tools install through npm, the registry a box reaches; yes to
	// mise's trust and install questions (nobody answers them).
	cmd.Env = append(os.Environ(), "MISE_NPM_PACKAGE_MANAGER=npm", "MISE_YES=1", "MISE_TRUSTED_CONFIG_PATHS="+dir)
	// mise dies with the inbox: a step an inbox restart cut short is
	// reported failed, not left running unseen.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err := cmd.Run()
	if r.Log != nil {
		fmt.Fprintf(r.Log, "$ mise %s (in %s)\n%s%s", strings.Join(args, " "), dir, out.String(), errb.String())
	}
	if err != nil {
		return "", fmt.Errorf("mise %s: %v: %s", strings.Join(args, " "), err, reason(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// reason picks mise's most telling line: the first that is not its
// version banner or its --verbose hint.
func reason(stderr string) string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.Contains(l, "mise ERROR Version:") || strings.Contains(l, "--verbose") {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return "no output"
	}
	return lines[len(lines)-1]
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
