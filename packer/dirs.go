package packer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// Dirs is the host's offload directory (Contract: Offload, Directories):
// the Mac's ~/Library/Application Support/CocoonBox/offload/ is
// $XDG_DATA_HOME/cocoonbox/offload/ here (~/.local/share when unset),
// 0700, with a 0700 directory per repo key and repos.json (0600).
type Dirs struct{ Root string }

// DefaultDirs is $XDG_DATA_HOME/cocoonbox/offload, else
// ~/.local/share/cocoonbox/offload.
func DefaultDirs() (Dirs, error) {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Dirs{}, fmt.Errorf("the offload directory: no $XDG_DATA_HOME and no home: %w", err)
		}
		base = filepath.Join(home, ".local/share")
	}
	return Dirs{Root: filepath.Join(base, "cocoonbox/offload")}, nil
}

// Repo is the directory of a repo key: handover.md, env.json, the bundle
// while it is sent, back.md and offload.json.
func (d Dirs) Repo(key string) string { return filepath.Join(d.Root, key) }

// Handover is the hand-over's path, what `cocoonbox offload
// handover-path` prints.
func (d Dirs) Handover(key string) string { return filepath.Join(d.Repo(key), "handover.md") }

// Ensure makes the offload directory and the repo's, both 0700.
func (d Dirs) Ensure(key string) error {
	if err := offload.MkdirPrivate(d.Root); err != nil {
		return err
	}
	return offload.MkdirPrivate(d.Repo(key))
}

// Record is offload.json, the offload in flight (Contract: Offload,
// Directories): written before send, removed after end.
type Record struct {
	ID      string `json:"id"`
	Repo    string `json:"repo"`
	Box     string `json:"box"`
	BoxName string `json:"box_name"`
	Name    string `json:"name"`
	// Dir is the box's copy, /workspace/<name>.
	Dir  string `json:"dir"`
	Kind string `json:"kind"`
	// Base is S, also at refs/cocoonbox/base/<id> in the repository.
	Base        string `json:"base"`
	Top         string `json:"top"`
	StartedAtMs int64  `json:"started_at_ms"`
	// Seen is the last outbox seq `offload read` showed, never past this
	// offload's back entry until back.md holds it.
	Seen int64 `json:"seen"`

	// SecretPaths are the opted-in file: secrets' repo paths: never sent
	// by rsync, left out of S, and never written by back (in the box they
	// are links to its tmpfs). Ours, like the fields below.
	SecretPaths []string `json:"secret_paths,omitempty"`
	// Worktrees are the linked worktrees inside the work tree: never
	// sent, left out of S, and never written by back (linkedWorktrees).
	Worktrees []string `json:"worktrees,omitempty"`

	// Ours, beyond the contract's fields, so that every offload
	// converges (issue 22): a rerun after a lost answer or a kill goes on
	// from what is recorded here, never sending BACK twice or merging
	// twice.

	// Unconfirmed: send's answer never came (the connection dropped); the
	// box may have taken the offload, which the next offload asks it.
	Unconfirmed bool `json:"unconfirmed,omitempty"`
	// BackTried is set before `send --back` goes out, with InboxSeq the
	// box's last inbox seq then: a rerun whose box shows a later seq knows
	// BACK landed. BackSent is set once its answer came.
	BackTried bool  `json:"back_tried,omitempty"`
	InboxSeq  int64 `json:"inbox_seq,omitempty"`
	BackSent  bool  `json:"back_sent,omitempty"`
	// BackSeq is the outbox seq of this offload's back, once back.md
	// holds its hand-over.
	BackSeq int64 `json:"back_seq,omitempty"`
	// Merged is the merge's result once back's merge is done: a rerun
	// goes on to end.
	Merged *MergeResult `json:"merged,omitempty"`
}

func (d Dirs) recordPath(key string) string { return filepath.Join(d.Repo(key), "offload.json") }

// LoadRecord reads the repo's offload.json; nil without an offload in
// flight.
func (d Dirs) LoadRecord(key string) (*Record, error) {
	var r Record
	if err := offload.ReadJSON(d.recordPath(key), &r); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return &r, nil
}

// SaveRecord writes offload.json durably.
func (d Dirs) SaveRecord(r *Record) error { return offload.WriteJSON(d.recordPath(r.Repo), r) }

// RemoveRecord removes offload.json; an absent one is fine.
func (d Dirs) RemoveRecord(key string) error {
	if err := os.Remove(d.recordPath(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Prefs are one repo's entry of repos.json: the opted-in secret entries
// (names and paths only) and whether the user said yes to the size
// confirm.
type Prefs struct {
	Top     string   `json:"top,omitempty"`
	Secrets []string `json:"secrets"`
	SizeYes bool     `json:"size_yes,omitempty"`
}

// Repos is repos.json: per repo key, its Prefs.
type Repos struct {
	Repos map[string]*Prefs `json:"repos"`
}

func (d Dirs) reposPath() string { return filepath.Join(d.Root, "repos.json") }

// LoadRepos reads repos.json; absent is empty.
func (d Dirs) LoadRepos() (*Repos, error) {
	r := &Repos{Repos: map[string]*Prefs{}}
	if err := offload.ReadJSON(d.reposPath(), r); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if r.Repos == nil {
		r.Repos = map[string]*Prefs{}
	}
	return r, nil
}

// Prefs is the repo's entry, made empty when absent.
func (r *Repos) Prefs(key string) *Prefs {
	p := r.Repos[key]
	if p == nil {
		p = &Prefs{Secrets: []string{}}
		r.Repos[key] = p
	}
	return p
}

// SaveRepos writes repos.json durably (0600 in the 0700 directory).
func (d Dirs) SaveRepos(r *Repos) error {
	if err := offload.MkdirPrivate(d.Root); err != nil {
		return err
	}
	return offload.WriteJSON(d.reposPath(), r)
}

var notKey = regexp.MustCompile(`[^a-z0-9_-]+`)

// RepoKey is the repo key of a repository's top directory: its base name
// in the key grammar (lower case, other characters as -), cut to 55, a -
// and 8 hex of the top's SHA-256, so two checkouts of one name differ and
// one checkout keeps its key (offload.CheckRepoKey holds).
func RepoKey(top string) string {
	base := strings.Trim(notKey.ReplaceAllString(strings.ToLower(filepath.Base(top)), "-"), "-_")
	if len(base) > 55 {
		base = base[:55]
	}
	if base == "" {
		base = "repo"
	}
	sum := sha256.Sum256([]byte(top))
	return base + "-" + hex.EncodeToString(sum[:4])
}

var notName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// DefaultName is the copy's name when --name is not given: the top's base
// name in the name grammar.
func DefaultName(top string) string {
	n := strings.TrimLeft(notName.ReplaceAllString(filepath.Base(top), "-"), "._-")
	if len(n) > 64 {
		n = n[:64]
	}
	if n == "" {
		n = "repo"
	}
	return n
}
