package nspawn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Each box runs in a cgroup of its own, made below its starter's cgroup in
// each hierarchy systemd tracks processes in (the v1 name=systemd one and
// the v2 one, whichever are mounted). With --keep-unit systemd-nspawn takes
// the cgroup it starts in and makes "payload" (the box's systemd and all
// it runs) and "supervisor" (nspawn) below it. Two boxes started from one
// process would share a payload cgroup, and one box's systemd would remove
// or move another's unit cgroups: units failed at random with status
// 219/CGROUP ("Failed to attach to cgroup …: No such file or directory")
// and "Failed to kill control group: Input/output error" (found by
// tests/box on a cgroup v1 host whose processes all sit in the root
// cgroup).

// Cgroups is one box's cgroup directories: Dirs holds one absolute path
// per hierarchy, sorted; Unified is the cgroup v2 one (also in Dirs), or
// "" on a host without cgroup2, where the box cannot freeze. The zero
// value is a box without cgroups, which every method accepts.
type Cgroups struct {
	Dirs    []string
	Unified string
}

// MakeCgroups makes the directory name (one path element, e.g.
// "cbsbx-<machine id>") below this process's own cgroup in each hierarchy
// systemd tracks processes in; a leftover directory of a crashed run is
// reused. It fails when /proc/self/mountinfo and /proc/self/cgroup name
// no such hierarchy, or a directory cannot be made (nothing is left then).
func MakeCgroups(name string) (Cgroups, error) {
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return Cgroups{}, fmt.Errorf("cgroup name %q: must be one path element", name)
	}
	mounts, own, err := hierarchies()
	if err != nil {
		return Cgroups{}, err
	}
	var cg Cgroups
	for key, mnt := range mounts {
		cur, ok := own[key]
		if !ok {
			continue
		}
		dir := filepath.Join(mnt, cur, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cg.Remove()
			return Cgroups{}, fmt.Errorf("make the box's cgroup: %w", err)
		}
		cg.Dirs = append(cg.Dirs, dir)
		if key == "" {
			cg.Unified = dir
		}
	}
	if len(cg.Dirs) == 0 {
		return Cgroups{}, errors.New("no name=systemd or cgroup2 hierarchy in /proc/self/mountinfo matches /proc/self/cgroup")
	}
	sort.Strings(cg.Dirs)
	return cg, nil
}

// hierarchies maps "name=systemd" and "" (cgroup2) to their mount points
// and to this process's cgroup in them.
func hierarchies() (mounts, own map[string]string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	mounts = map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		pf, sf := strings.Fields(pre), strings.Fields(post)
		if !ok || len(pf) < 5 || len(sf) < 3 {
			continue
		}
		switch {
		case sf[0] == "cgroup2":
			mounts[""] = pf[4]
		case sf[0] == "cgroup" && strings.Contains(","+sf[2]+",", ",name=systemd,"):
			mounts["name=systemd"] = pf[4]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, nil, err
	}
	own = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && (parts[0] == "0" && parts[1] == "" || parts[1] == "name=systemd") {
			own[parts[1]] = parts[2]
		}
	}
	return mounts, own, nil
}

// SetFrozen writes payload's cgroup.freeze (so nspawn itself, in
// "supervisor", keeps running and can still stop the box) and returns once
// cgroup.events says the whole subtree is frozen, or thawed; the kernel
// freezes asynchronously. It fails without cgroup2, on a write or read
// error, or when ctx ends first.
func (cg Cgroups) SetFrozen(ctx context.Context, frozen bool) error {
	if cg.Unified == "" {
		return errors.New("no cgroup2 hierarchy: a box freezes only through cgroup.freeze")
	}
	dir := filepath.Join(cg.Unified, "payload")
	v, err := writeFreeze(dir, frozen)
	if err != nil {
		return err
	}
	want := "frozen " + v
	for {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			return fmt.Errorf("cgroup.events: %w", err)
		}
		if strings.Contains(string(data), want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %q in %s/cgroup.events: %w", want, dir, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// SetTreeFrozen writes cgroup.freeze of the box's whole v2 tree, nspawn
// and the join shell included, not only its payload, and returns without
// waiting for the kernel to finish: for a boot still setting up, which has
// no payload yet (a payload made later under a frozen parent is frozen
// too), and which nothing waits on meanwhile. Such a box cannot be stopped
// through nspawn while frozen; Kill still reaches it. It fails without
// cgroup2 or on the write's error.
func (cg Cgroups) SetTreeFrozen(frozen bool) error {
	if cg.Unified == "" {
		return errors.New("no cgroup2 hierarchy: a box freezes only through cgroup.freeze")
	}
	_, err := writeFreeze(cg.Unified, frozen)
	return err
}

// writeFreeze writes dir's cgroup.freeze and answers the value written.
func writeFreeze(dir string, frozen bool) (string, error) {
	v := "0"
	if frozen {
		v = "1"
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte(v), 0o644); err != nil {
		return v, fmt.Errorf("cgroup.freeze: %w", err)
	}
	return v, nil
}

// Kill ends every process left in the box's v2 tree at once (cgroup.kill,
// which also reaches frozen ones); without cgroup2 it does nothing.
func (cg Cgroups) Kill() {
	if cg.Unified != "" {
		_ = os.WriteFile(filepath.Join(cg.Unified, "cgroup.kill"), []byte("1"), 0o644)
	}
}

// Empty says whether no process is left in the v2 tree; without cgroup2,
// or when the tree is gone, it is true.
func (cg Cgroups) Empty() bool {
	if cg.Unified == "" {
		return true
	}
	data, err := os.ReadFile(filepath.Join(cg.Unified, "cgroup.events"))
	return err != nil || strings.Contains(string(data), "populated 0")
}

// Remove removes the box's cgroup trees once their processes are gone,
// deepest first. A cgroup the kernel still calls busy (its last process
// exiting) is tried again for a second, then left: a later MakeCgroups of
// the same name reuses it.
func (cg Cgroups) Remove() {
	for _, top := range cg.Dirs {
		var tree []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				tree = append(tree, p)
			}
			return nil
		})
		for i := len(tree) - 1; i >= 0; i-- {
			for try := 0; try < 50; try++ {
				if err := os.Remove(tree[i]); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}
