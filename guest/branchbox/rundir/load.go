// Package rundir loads an assignment from its run directory and checks
// every rule about the files (Contract: BranchBox managed runtime manifest,
// Security contract): where the assignment lives, its owner and mode, the
// file materializations' place, type, links and digests, the directory and
// socket sources' owners and modes. Every check is made on a descriptor
// opened with openat2 and no symlinks, never on a name.
package rundir

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// maxValueSize bounds a file materialization (a value or a capability), bytes.
const maxValueSize = 64 << 10

// Kind is what a source is.
type Kind string

// The kinds of source.
const (
	KindFile      Kind = "file"
	KindDirectory Kind = "directory"
	KindSocket    Kind = "socket"
)

// Source is one checked materialization source, as found.
type Source struct {
	LeaseID string          `json:"lease_id"`
	Scope   branchbox.Scope `json:"scope"`
	Path    string          `json:"path"`
	Target  string          `json:"target,omitempty"`
	Kind    Kind            `json:"kind"`
	// Dev and Ino identify what was checked; materialize records them in
	// the run's ledger for part 2's final mount inspection (a swapped
	// source is another inode).
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// Run is an assignment loaded from its run directory with every rule met.
type Run struct {
	Assignment *branchbox.Assignment
	// Dir is the run directory; Owner the UID owning it and the assignment.
	Dir   string
	Owner uint32
	// Sources are the materializations in assignment order.
	Sources []Source
	opt     branchbox.Options
	// held are the O_PATH descriptors of the directory and socket
	// sources, by path, opened once by Load and kept until Close: what
	// Verify and a launch compare against, and an inode that cannot be
	// freed and handed to a replacement meanwhile.
	held map[string]int
}

// Close releases the descriptors Load holds on the directory and socket
// sources.
func (r *Run) Close() {
	for p, fd := range r.held {
		unix.Close(fd)
		delete(r.held, p)
	}
}

// Load opens <root>/managed/<runID>/assignment.json and checks it and
// every source it names. The run directory: a directory, mode 0700, owned
// by the assignment's owner, and no ancestor another UID could replace.
// The assignment: a regular file directly in it, owner-only (no group or
// other bits), one link, the run directory's owner; when branchbox runs
// as neither root nor that owner it is refused. Its run_id must be runID;
// a version 3 workspace consumer must differ from the owner.
//
// Errors: refusals are *branchbox.RuleError naming the file; others are
// I/O errors with the path.
func Load(opt branchbox.Options, runID string) (*Run, error) {
	dir := opt.RunDir(runID)
	if !branchbox.ValidRunID(runID) {
		return nil, branchbox.Refuse(branchbox.RuleRunDirectory, dir, "run id %q is not a run id ([a-z0-9][a-z0-9-]{0,62})", runID)
	}
	dfd, err := OpenPath(dir, openDirFlags)
	if err != nil {
		return nil, placeError(branchbox.RuleRunDirectory, dir, err)
	}
	defer unix.Close(dfd)
	st, err := fstat(dfd, dir)
	if err != nil {
		return nil, err
	}
	if st.Mode&0o7777 != 0o700 {
		return nil, branchbox.Refuse(branchbox.RuleRunDirectory, dir, "has mode %04o; the run directory must be 0700", st.Mode&0o7777)
	}
	owner := st.Uid
	if euid := uint32(os.Geteuid()); euid != 0 && euid != owner {
		return nil, branchbox.Refuse(branchbox.RuleRunDirectory, dir, "belongs to uid %d; run branchbox as root or as uid %d", owner, owner)
	}
	if err := CheckAncestors(branchbox.RuleRunDirectory, dir, owner); err != nil {
		return nil, err
	}
	path := dir + "/" + branchbox.AssignmentFile
	data, _, err := readOwnerOnly(dfd, branchbox.AssignmentFile, path, owner, branchbox.MaxAssignmentSize, branchbox.RuleOwnerOnly)
	if err != nil {
		return nil, err
	}
	a, err := branchbox.Parse(data, opt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if a.RunID != runID {
		return nil, branchbox.Refuse(branchbox.RuleRunDirectory, path, "names run %q but is stored in the directory of run %q", a.RunID, runID)
	}
	if w := a.Workspace; w.ConsumerUID != nil && *w.ConsumerUID == owner {
		return nil, branchbox.Refuse(branchbox.RuleWorkspaceConsumer, path, "the workspace consumer uid %d is the runtime owner; it must be distinct", owner)
	}
	r := &Run{Assignment: a, Dir: dir, Owner: owner, opt: opt, held: map[string]int{}}
	for i := range a.Leases {
		l := &a.Leases[i]
		for _, m := range l.Materializations {
			s, err := r.checkSource(dfd, l, m)
			if err != nil {
				r.Close()
				return nil, err
			}
			r.Sources = append(r.Sources, *s)
		}
	}
	if err := r.checkLinks(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

const openDirFlags = unix.O_RDONLY | unix.O_DIRECTORY

// checkRunDir checks a run directory opened again: still 0700 and the owner's.
func (r *Run) checkRunDir(dfd int) error {
	st, err := fstat(dfd, r.Dir)
	if err != nil {
		return err
	}
	if st.Mode&0o7777 != 0o700 || st.Uid != r.Owner {
		return branchbox.Refuse(branchbox.RuleRunDirectory, r.Dir, "is now uid %d mode %04o; it was checked as uid %d mode 0700", st.Uid, st.Mode&0o7777, r.Owner)
	}
	return nil
}

// checkSource checks one source against its scope's rules, on descriptors.
func (r *Run) checkSource(dfd int, l *branchbox.Lease, m branchbox.Materialization) (*Source, error) {
	rel := m.SourcePath[len(r.Dir)+1:]
	s := &Source{LeaseID: l.LeaseID, Scope: l.Scope, Path: m.SourcePath, Target: m.TargetPath}
	if branchbox.IsFileScope(l.Scope) {
		data, st, err := r.readFile(dfd, rel, m.SourcePath, m.SHA256)
		if err != nil {
			return nil, err
		}
		// Every file materialization, a capability too, is held to the
		// rule each use holds it to (Value): a capability with a trailing
		// newline passed check and was refused only by launch, after the
		// containers were up.
		if reason := valueReason(data); reason != "" {
			return nil, branchbox.Refuse(branchbox.RuleValueFile, m.SourcePath, "%s", reason)
		}
		s.Kind, s.Dev, s.Ino = KindFile, st.Dev, st.Ino
		return s, nil
	}
	// Every directory between the run directory and the leaf: 0700, the owner's.
	comps := strings.Split(rel, "/")
	for i := 1; i < len(comps); i++ {
		p := strings.Join(comps[:i], "/")
		if err := r.checkDir(dfd, p, 0o700); err != nil {
			return nil, err
		}
	}
	fd, err := OpenBeneath(dfd, rel, unix.O_PATH)
	if err != nil {
		return nil, placeError(branchbox.RuleSourceType, m.SourcePath, err)
	}
	st, err := fstat(fd, m.SourcePath)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	kept := false
	defer func() {
		if !kept {
			unix.Close(fd)
		}
	}()
	if st.Uid != r.Owner {
		return nil, branchbox.Refuse(branchbox.RuleSourceType, m.SourcePath, "belongs to uid %d, not the assignment's owner %d", st.Uid, r.Owner)
	}
	mode := st.Mode & 0o7777
	switch {
	case l.Scope == branchbox.ScopeSharedDirectory && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		// Contract: "A shared-directory leaf uses mode 0755".
		if mode != 0o755 {
			return nil, branchbox.Refuse(branchbox.RuleSourceType, m.SourcePath, "a shared-directory leaf has mode 0755, not %04o", mode)
		}
		s.Kind = KindDirectory
	case l.Scope == branchbox.ScopeToolEndpoint && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		if mode != 0o700 {
			return nil, branchbox.Refuse(branchbox.RuleSourceType, m.SourcePath, "a tool-endpoint directory has mode 0700, not %04o", mode)
		}
		s.Kind = KindDirectory
	case l.Scope == branchbox.ScopeToolEndpoint && st.Mode&unix.S_IFMT == unix.S_IFSOCK:
		if mode&0o077 != 0 {
			return nil, branchbox.Refuse(branchbox.RuleSourceType, m.SourcePath, "a tool-endpoint socket is owner-only, not %04o", mode)
		}
		s.Kind = KindSocket
	default:
		return nil, branchbox.Refuse(branchbox.RuleSourceType, m.SourcePath, "is not what a %s lease binds (a %s)", l.Scope, map[bool]string{true: "directory 0755", false: "directory 0700 or an owner-only socket"}[l.Scope == branchbox.ScopeSharedDirectory])
	}
	s.Dev, s.Ino = st.Dev, st.Ino
	r.held[m.SourcePath], kept = fd, true
	return s, nil
}

// checkLinks: a tool-request's endpoint is a socket (Contract: Security
// contract, "one same-consumer live socket endpoint").
func (r *Run) checkLinks() error {
	for _, l := range r.Assignment.Leases {
		if l.Scope != branchbox.ScopeToolRequest {
			continue
		}
		for _, s := range r.Sources {
			if s.LeaseID == l.EndpointLeaseID && s.Kind != KindSocket {
				return branchbox.Refuse(branchbox.RuleToolRequest, s.Path, "endpoint %s linked by %s must be a socket, not a %s", s.LeaseID, l.LeaseID, s.Kind)
			}
		}
	}
	return nil
}

func (r *Run) checkDir(dfd int, rel string, mode uint32) error {
	path := r.Dir + "/" + rel
	fd, err := OpenBeneath(dfd, rel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return placeError(branchbox.RuleSourceType, path, err)
	}
	defer unix.Close(fd)
	st, err := fstat(fd, path)
	if err != nil {
		return err
	}
	if st.Uid != r.Owner || st.Mode&0o7777 != mode {
		return branchbox.Refuse(branchbox.RuleSourceType, path, "is uid %d mode %04o; a source-directory ancestor is uid %d mode %04o", st.Uid, st.Mode&0o7777, r.Owner, mode)
	}
	return nil
}

// readFile reads a file materialization (Contract: Security contract:
// "owner-only regular files ... siblings below the assignment's
// materializations directory and match their declared SHA-256"): its
// directory 0700 and the owner's, the file regular, owner-only, the
// owner's, one link, at most maxValueSize, and its bytes' digest wantHex.
func (r *Run) readFile(dfd int, rel, path, wantHex string) ([]byte, *unix.Stat_t, error) {
	if err := r.checkDir(dfd, branchbox.MaterializationsDir, 0o700); err != nil {
		return nil, nil, err
	}
	data, st, err := readOwnerOnly(dfd, rel, path, r.Owner, maxValueSize, branchbox.RuleOwnerOnly)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != wantHex {
		return nil, nil, branchbox.Refuse(branchbox.RuleDigest, path, "has SHA-256 %s; the assignment signed %s", got, wantHex)
	}
	return data, st, nil
}

// readOwnerOnly opens rel below dfd without symlinks, checks the open
// descriptor (regular, owner's, no group or other bits, one link, at most
// limit bytes) and reads it whole.
func readOwnerOnly(dfd int, rel, path string, owner uint32, limit int64, rule branchbox.Rule) ([]byte, *unix.Stat_t, error) {
	fd, err := OpenBeneath(dfd, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, nil, placeError(rule, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := fstat(fd, path)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, nil, branchbox.Refuse(rule, path, "is not a regular file")
	case st.Uid != owner:
		return nil, nil, branchbox.Refuse(rule, path, "belongs to uid %d; it must belong to the run directory's owner, uid %d", st.Uid, owner)
	case st.Mode&0o077 != 0:
		return nil, nil, branchbox.Refuse(rule, path, "has mode %04o; it must be owner-only (no group or other bits)", st.Mode&0o7777)
	case st.Nlink != 1:
		return nil, nil, branchbox.Refuse(rule, path, "has %d hard links; it must have exactly one", st.Nlink)
	case st.Size > limit:
		return nil, nil, branchbox.Refuse(rule, path, "is %d bytes; the limit is %d", st.Size, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, nil, branchbox.Refuse(rule, path, "grew past %d bytes while being read", limit)
	}
	return data, st, nil
}
