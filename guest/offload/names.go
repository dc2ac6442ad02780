// Package offload is the box side of an offload (Contract: Offload): the
// names and directories, the durable records the verbs and the inbox share
// (index, copy, session, inbox messages, outbox entries), and the hand-over
// check. The inbox server is in offload/inbox, the send stream in
// offload/stream, the verbs' steps in offload/verbs.
package offload

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// The contract's "Names" table lost its rows; these grammars are ours and
// the host packer (issue 13) uses the same. A repo key also names a tmux
// session (cb-off-<key>-<kind>), where '.' and ':' are tmux separators, so
// it has neither.
var (
	repoKeyRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	nameRe      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	offloadIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
)

// Kinds are the box CLIs a session can run (Contract: Offload, Box CLI in
// tmux). cursor-agent has no command line in the contract ("cursor at O6"),
// so it is refused until one is written down.
var Kinds = []string{"claude", "codex"}

// CheckRepoKey refuses a repo key outside its grammar: 1 to 64 of
// [a-z0-9_-], starting with a letter or digit.
func CheckRepoKey(k string) error {
	if !repoKeyRe.MatchString(k) {
		return fmt.Errorf("repo key %q: must be 1 to 64 of [a-z0-9_-], starting with a letter or digit", k)
	}
	return nil
}

// CheckName refuses a copy name (the directory /workspace/<name>) outside
// its grammar: 1 to 64 of [A-Za-z0-9._-], starting with a letter or digit.
func CheckName(n string) error {
	if !nameRe.MatchString(n) {
		return fmt.Errorf("name %q: must be 1 to 64 of [A-Za-z0-9._-], starting with a letter or digit", n)
	}
	return nil
}

// CheckOffloadID refuses an offload id outside 1 to 64 of [A-Za-z0-9_-].
func CheckOffloadID(id string) error {
	if !offloadIDRe.MatchString(id) {
		return fmt.Errorf("offload id %q: must be 1 to 64 of [A-Za-z0-9_-], starting with a letter or digit", id)
	}
	return nil
}

// CheckKind refuses a CLI kind other than claude and codex.
func CheckKind(c string) error {
	for _, k := range Kinds {
		if c == k {
			return nil
		}
	}
	return fmt.Errorf("kind %q: must be claude or codex", c)
}

// TmuxSession is the session name of a repo's CLI: cb-off-<repo key>-<kind>.
func TmuxSession(key, kind string) string { return "cb-off-" + key + "-" + kind }

// Paths are the box directories of the contract's Directories table. The
// environment overrides them (COCOONBOX_OFFLOAD_STATE, _SECRETS, _SOCKET,
// COCOONBOX_WORKSPACE) so unit tests run on a temporary directory; a box
// never sets them.
type Paths struct {
	// State is /home/user/.local/share/cocoonbox/offload (user, 0700).
	State string
	// Secrets is /run/cocoonbox-offload/secrets, on the image's tmpfs.
	Secrets string
	// Socket is the inbox's /run/cocoonbox/offload.sock.
	Socket string
	// Workspace is /workspace, where each copy is <name>.
	Workspace string
}

// DefaultPaths are the contract's paths for the running user, as the
// environment may override them.
func DefaultPaths() Paths {
	home, _ := os.UserHomeDir()
	p := Paths{
		State:     filepath.Join(home, ".local/share/cocoonbox/offload"),
		Secrets:   "/run/cocoonbox-offload/secrets",
		Socket:    "/run/cocoonbox/offload.sock",
		Workspace: "/workspace",
	}
	for env, dst := range map[string]*string{
		"COCOONBOX_OFFLOAD_STATE":   &p.State,
		"COCOONBOX_OFFLOAD_SECRETS": &p.Secrets,
		"COCOONBOX_OFFLOAD_SOCKET":  &p.Socket,
		"COCOONBOX_WORKSPACE":       &p.Workspace,
	} {
		if v := os.Getenv(env); v != "" {
			*dst = v
		}
	}
	return p
}

// Repo is the state directory of one repo key.
func (p Paths) Repo(key string) string { return filepath.Join(p.State, key) }

// Copy is the repo's copy, /workspace/<name>.
func (p Paths) Copy(name string) string { return filepath.Join(p.Workspace, name) }

// RepoSecrets is /run/cocoonbox-offload/secrets/<repo key>.
func (p Paths) RepoSecrets(key string) string { return filepath.Join(p.Secrets, key) }
