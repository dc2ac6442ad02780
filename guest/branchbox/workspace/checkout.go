package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// Result is what Checkout made, for the run's ledger.
type Result struct {
	Path   string `json:"path"`
	GitDir string `json:"git_dir"`
	Branch string `json:"branch"`
	// Delegated is true when the workspace and the shared Git metadata
	// were delegated to the version 3 consumer's group ConsumerGID.
	Delegated   bool   `json:"delegated"`
	ConsumerGID uint32 `json:"consumer_gid,omitempty"`
}

// Checkout checks the shared Git metadata (checkGitMetadata), then checks
// out a new branch at the signed base commit into the workspace, a new
// directory whose parent no other UID could replace.
//
// Version 3 (Contract: "Version 3 workspace delegation"): --reuse and an
// existing branch are refused (a later launch must use a fresh snapshot);
// the workspace directory is made owner:consumer-group 2770 with the
// default ACL u::rwx g::rwx o::--- before git writes a file into it, so
// everything below it is owner and consumer-group only whatever the
// creator's umask, even below a directory later made 0755, and the
// setgid bit gives it the consumer's group; the parent and other existing
// directories keep their modes. Then the shared Git metadata is delegated
// too (core.sharedRepository=group, the consumer's group, group-writable),
// so the consumer can commit; that is why teardown needs --force and why a
// later run refuses this snapshot.
//
// Versions 1 and 2 check out without delegation; reuse takes an existing
// branch as it is.
func Checkout(r *rundir.Run, reuse bool) (res *Result, err error) {
	a := r.Assignment
	managed := a.Version == "3"
	if managed && reuse {
		return nil, branchbox.Refuse(branchbox.RuleReuse, "--reuse", "managed (version 3) launches refuse --reuse: a prior consumer could have changed Git remotes or executable config; use a fresh repository snapshot")
	}
	gitDir, err := checkGitMetadata(a.Repository.Path, r.Owner)
	if err != nil {
		return nil, err
	}
	ws := a.Workspace.Path
	if err := rundir.CheckAncestors(branchbox.RuleWorkspacePlace, filepath.Dir(ws), r.Owner); err != nil {
		return nil, err
	}
	g := gitRunner{repo: a.Repository.Path, uid: r.Owner}
	if _, err := g.run("rev-parse", "--verify", "--quiet", a.Repository.Base+"^{commit}"); err != nil {
		return nil, branchbox.Refuse(branchbox.RuleSyntax, "repository.base", "%s is not a commit of %s", a.Repository.Base, a.Repository.Path)
	}
	_, err = g.run("rev-parse", "--verify", "--quiet", "refs/heads/"+a.Branch)
	exists := err == nil
	if exists && (managed || !reuse) {
		return nil, branchbox.Refuse(branchbox.RuleReuse, "branch", "branch %s already exists in %s; stale-branch reuse is refused (a run starts a new branch from a fresh snapshot)", a.Branch, a.Repository.Path)
	}
	res = &Result{Path: ws, GitDir: gitDir, Branch: a.Branch}
	if err := unix.Mkdir(ws, 0o700); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, branchbox.Refuse(branchbox.RuleWorkspacePlace, ws, "already exists; a run checks out into a new directory")
		}
		return nil, fmt.Errorf("create %s: %w", ws, err)
	}
	defer func() {
		// No ledger records a failed checkout: undo it here.
		if err != nil {
			os.RemoveAll(ws)
			g.run("worktree", "prune")
		}
	}()
	gid := r.Owner
	if managed {
		gid = *a.Workspace.ConsumerGID
	}
	if err := prepareDir(ws, r.Owner, gid, managed); err != nil {
		return nil, err
	}
	args := []string{"worktree", "add", "--quiet"}
	if exists {
		args = append(args, ws, a.Branch)
	} else {
		args = append(args, "-b", a.Branch, ws, a.Repository.Base)
	}
	if out, err := g.run(args...); err != nil {
		return nil, fmt.Errorf("git worktree add %s: %w: %s", ws, err, out)
	}
	if managed {
		if out, err := g.run("config", "core.sharedRepository", "group"); err != nil {
			return nil, fmt.Errorf("git config core.sharedRepository: %w: %s", err, out)
		}
		if err := delegateTree(gitDir, gid); err != nil {
			return nil, err
		}
		res.Delegated, res.ConsumerGID = true, gid
	}
	return res, nil
}

// prepareDir sets the new workspace directory's owner and, when
// delegating, its group, setgid mode and default ACL, on its descriptor.
func prepareDir(ws string, uid, gid uint32, delegate bool) error {
	fd, err := rundir.OpenPath(ws, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("open %s: %w", ws, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, int(uid), int(gid)); err != nil {
		return fmt.Errorf("chown %s: %w", ws, err)
	}
	if !delegate {
		return unix.Fchmod(fd, 0o755)
	}
	if err := unix.Fchmod(fd, 0o2770); err != nil {
		return fmt.Errorf("chmod %s: %w", ws, err)
	}
	return setDefaultACL(fd, ws)
}

// delegateTree gives the group gid read and write on every entry of the
// Git directory (setgid on directories, so new entries keep the group).
func delegateTree(path string, gid uint32) error {
	fd, err := rundir.OpenPath(path, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	return delegateDir(fd, path, gid)
}

func delegateDir(fd int, path string, gid uint32) error {
	d := os.NewFile(uintptr(fd), path)
	defer d.Close()
	if err := delegateEntry(fd, "", path, gid, true); err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	for _, name := range names {
		p := path + "/" + name
		cfd, err := rundir.OpenBeneath(fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err == nil {
			if err := delegateDir(cfd, p, gid); err != nil {
				return err
			}
			continue
		}
		if !errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("open %s: %w", p, err)
		}
		if err := delegateEntry(fd, name, p, gid, false); err != nil {
			return err
		}
	}
	return nil
}

func delegateEntry(dfd int, name, path string, gid uint32, dir bool) error {
	fd := dfd
	if !dir {
		var err error
		if fd, err = rundir.OpenBeneath(dfd, name, unix.O_RDONLY|unix.O_NONBLOCK); err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		defer unix.Close(fd)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat %s: %w", path, err)
	}
	if err := unix.Fchown(fd, -1, int(gid)); err != nil {
		return fmt.Errorf("chgrp %s: %w", path, err)
	}
	mode := st.Mode&0o7777 | 0o060
	if dir {
		mode |= 0o2070
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return nil
}

// Git runs git in the repository repo as the runtime owner uid (its gid
// taken equal), with no ambient configuration (no system or global config,
// no hooks, no fsmonitor) and a fixed environment; it returns the combined
// output, trimmed.
func Git(repo string, uid uint32, args ...string) ([]byte, error) {
	return gitRunner{repo, uid}.run(args...)
}

type gitRunner struct {
	repo string
	uid  uint32
}

func (g gitRunner) run(args ...string) ([]byte, error) {
	cmd := exec.Command("/usr/bin/git", append([]string{"-C", g.repo, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0"}
	if uint32(os.Geteuid()) != g.uid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: g.uid, Gid: g.uid, Groups: []uint32{}}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return bytes.TrimSpace(out.Bytes()), err
}
