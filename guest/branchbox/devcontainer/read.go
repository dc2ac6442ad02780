package devcontainer

import (
	"errors"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// maxFile bounds each devcontainer.json and Compose file read (1 MiB): the
// repository is the consumer's, so nothing it holds is read unbounded.
const maxFile = 1 << 20

// readBeneath reads rel (clean, relative) below the repository directory
// dfd: no symlink anywhere, no escape (openat2 RESOLVE_BENEATH), a regular
// file of at most maxFile bytes, checked on the descriptor. A missing file
// is (nil, nil); every other failure is a refusal under rule naming where.
func readBeneath(dfd int, rel, where string, rule branchbox.Rule) ([]byte, error) {
	fd, err := rundir.OpenBeneath(dfd, rel, unix.O_RDONLY)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil
	case errors.Is(err, unix.ELOOP):
		return nil, branchbox.Refuse(rule, where, "is or passes through a symlink; symlinks are refused")
	case errors.Is(err, unix.EXDEV):
		return nil, branchbox.Refuse(rule, where, "leaves the repository; files are read below it only")
	case err != nil:
		return nil, branchbox.Refuse(rule, where, "cannot be opened: %v", err)
	}
	f := os.NewFile(uintptr(fd), where)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, branchbox.Refuse(rule, where, "cannot be inspected: %v", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, branchbox.Refuse(rule, where, "is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, branchbox.Refuse(rule, where, "cannot be read: %v", err)
	}
	if len(data) > maxFile {
		return nil, branchbox.Refuse(rule, where, "is larger than %d bytes", maxFile)
	}
	return data, nil
}

// repoRel resolves name, as written in a file in directory dir (both
// relative to the repository), to a clean repository-relative path, or
// says why it cannot be one: absolute and escaping names are refused
// before any open, RESOLVE_BENEATH refuses the rest.
func repoRel(dir, name string) (string, bool) {
	if name == "" || path.IsAbs(name) {
		return "", false
	}
	rel := path.Join(dir, name)
	if rel == ".." || len(rel) > 2 && rel[:3] == "../" || rel == "." {
		return "", false
	}
	return rel, true
}
