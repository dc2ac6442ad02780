// Package workspace checks out a run's branch into its workspace and, for
// version 3, delegates it to the workspace consumer (Contract: BranchBox
// managed runtime manifest, "Version 3 workspace delegation"), after
// checking the repository's shared Git metadata.
package workspace

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// GitDir returns the repository's Git directory: path/.git when that is a
// directory, path itself when it is a bare repository. A .git file (a
// linked worktree or a submodule) is refused: a snapshot owns its metadata.
func GitDir(path string) (string, error) {
	fd, err := rundir.OpenPath(path, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return "", refuse(path, "cannot be opened without following a symlink: %v", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	switch err := unix.Fstatat(fd, ".git", &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return path + "/.git", nil
	case err == nil:
		return "", refuse(path+"/.git", "is not a directory (a linked worktree, a submodule or a symlink); a repository snapshot owns its metadata")
	case !errors.Is(err, unix.ENOENT):
		return "", fmt.Errorf("stat %s/.git: %w", path, err)
	}
	if unix.Fstatat(fd, "HEAD", &st, unix.AT_SYMLINK_NOFOLLOW) == nil && unix.Fstatat(fd, "objects", &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return path, nil
	}
	return "", refuse(path, "is not a Git repository (no .git directory, not bare)")
}

// checkGitMetadata refuses shared Git metadata a previous consumer could
// have changed (Contract: "Before any managed checkout, BranchBox rejects
// shared Git metadata that is not runtime-owned or has group/other-writable
// paths, including a tree delegated by a previous run. It also rejects an
// ancestor that another UID could replace, apart from sticky
// directories"): the repository path and its ancestors as
// rundir.CheckAncestors says, then every entry of the Git directory owned
// by owner, not group- or other-writable, and no symlink or special file.
// It runs before any git command, so no config or hook of an unchecked
// repository is ever read.
func checkGitMetadata(repo string, owner uint32) (gitDir string, err error) {
	if err := rundir.CheckAncestors(branchbox.RuleGitMetadata, repo, owner); err != nil {
		return "", err
	}
	gitDir, err = GitDir(repo)
	if err != nil {
		return "", err
	}
	fd, err := rundir.OpenPath(gitDir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return "", refuse(gitDir, "cannot be opened without following a symlink: %v", err)
	}
	return gitDir, walk(fd, gitDir, owner)
}

// walk checks the directory fd (closing it) and everything below it.
func walk(fd int, path string, owner uint32) error {
	d := os.NewFile(uintptr(fd), path)
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat %s: %w", path, err)
	}
	if err := checkEntry(path, &st, owner); err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	for _, name := range names {
		p := path + "/" + name
		// Each entry is checked on its own descriptor (O_PATH, no symlink).
		efd, err := rundir.OpenBeneath(fd, name, unix.O_PATH)
		if err != nil {
			return refuse(p, "cannot be opened without following a symlink (a symlink in shared Git metadata?): %v", err)
		}
		err = unix.Fstat(efd, &st)
		unix.Close(efd)
		if err != nil {
			return fmt.Errorf("fstat %s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := checkEntry(p, &st, owner); err != nil {
				return err
			}
			continue
		}
		cfd, err := rundir.OpenBeneath(fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return refuse(p, "cannot be opened without following a symlink: %v", err)
		}
		if err := walk(cfd, p, owner); err != nil {
			return err
		}
	}
	return nil
}

func checkEntry(path string, st *unix.Stat_t, owner uint32) error {
	switch t := st.Mode & unix.S_IFMT; {
	case t != unix.S_IFDIR && t != unix.S_IFREG:
		return refuse(path, "is a symlink or special file; shared Git metadata holds only directories and regular files")
	case st.Uid != owner:
		return refuse(path, "belongs to uid %d, not the runtime owner uid %d", st.Uid, owner)
	case st.Mode&0o022 != 0:
		return refuse(path, "is group- or other-writable (mode %04o), as a delegated tree is; a managed run needs a fresh repository snapshot", st.Mode&0o7777)
	}
	return nil
}

func refuse(path, format string, a ...any) error {
	return branchbox.Refuse(branchbox.RuleGitMetadata, path, format, a...)
}
