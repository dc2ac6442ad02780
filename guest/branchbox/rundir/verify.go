package rundir

import (
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// Verify checks that every directory and socket source is still, by its
// name, the inode Load opened and holds (Contract: Security contract,
// "source ownership or type changes" are rejected; no time of check to
// time of use): the run directory and each source opened again, never
// following a symlink, and compared by device and inode with the held
// descriptor. A source renamed away, replaced, or swapped for a symlink
// since Load is refused by rule source-ownership-or-type. Call it
// immediately before handing the names to the engine; what the engine
// mounts is compared again after (engine.CheckContainer).
func (r *Run) Verify() error {
	dfd, err := OpenPath(r.Dir, openDirFlags)
	if err != nil {
		return placeError(branchbox.RuleRunDirectory, r.Dir, err)
	}
	defer unix.Close(dfd)
	if err := r.checkRunDir(dfd); err != nil {
		return err
	}
	for _, s := range r.Sources {
		held, ok := r.held[s.Path]
		if !ok {
			continue
		}
		fd, err := OpenBeneath(dfd, s.Path[len(r.Dir)+1:], unix.O_PATH)
		if err != nil {
			return branchbox.Refuse(branchbox.RuleSourceType, s.Path, "changed since it was checked (now a symlink, gone or moved: %v)", err)
		}
		now, err := fstat(fd, s.Path)
		unix.Close(fd)
		if err != nil {
			return err
		}
		then, err := fstat(held, s.Path)
		if err != nil {
			return err
		}
		if now.Dev != then.Dev || now.Ino != then.Ino || now.Mode != then.Mode || now.Uid != then.Uid {
			return branchbox.Refuse(branchbox.RuleSourceType, s.Path, "was replaced since it was checked (device %d inode %d, now %d %d)", then.Dev, then.Ino, now.Dev, now.Ino)
		}
	}
	return nil
}

// SameSources refuses a source whose device and inode differ from the
// ones recorded (the ledger's, at materialize): a directory or socket
// replaced since, even by one of the same owner and mode, is another
// object than the one the run was materialized with (the runc
// CVE-2021-30465 class).
func (r *Run) SameSources(recorded []Source) error {
	byPath := map[string]Source{}
	for _, s := range recorded {
		byPath[s.Path] = s
	}
	for _, s := range r.Sources {
		if s.Kind == KindFile {
			continue // read whole, digest-checked at each use
		}
		was, ok := byPath[s.Path]
		if !ok {
			return branchbox.Refuse(branchbox.RuleSourceType, s.Path, "is not a source the run was materialized with")
		}
		if was.Dev != s.Dev || was.Ino != s.Ino {
			return branchbox.Refuse(branchbox.RuleSourceType, s.Path, "was replaced since the run was materialized (device %d inode %d, now %d %d)", was.Dev, was.Ino, s.Dev, s.Ino)
		}
	}
	return nil
}

// Held returns the device and inode of the source at path as Load opened
// it, and whether Load holds it (directories and sockets).
func (r *Run) Held(path string) (dev, ino uint64, ok bool) {
	for _, s := range r.Sources {
		if s.Path == path {
			_, ok = r.held[path]
			return s.Dev, s.Ino, ok
		}
	}
	return 0, 0, false
}
