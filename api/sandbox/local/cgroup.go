package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Each box runs in a cgroup of its own, made below the supervisor's own
// cgroup in each hierarchy systemd tracks processes in (the v1
// name=systemd one and the v2 one, whichever are mounted). systemd-nspawn
// with --keep-unit takes the cgroup it starts in and makes "payload" (the
// box's systemd and everything it runs) and "supervisor" (nspawn) below
// it. Boxes sharing one cgroup would remove each other's unit cgroups
// (tests/box found that), and a process put into payload is the box's: it
// freezes with the box and the box's systemd reaps it.

// cgroups is one box's cgroup directories, one per hierarchy; unified is
// the v2 one (empty when the host has none), which freezes.
type cgroups struct {
	dirs    []string
	unified string
}

// makeCgroups makes the box's directories (a leftover of a crashed run is
// emptied and reused).
func makeCgroups(name string) (cgroups, error) {
	mounts, own, err := hierarchies()
	if err != nil {
		return cgroups{}, err
	}
	var cg cgroups
	for key, mnt := range mounts {
		cur, ok := own[key]
		if !ok {
			continue
		}
		dir := filepath.Join(mnt, cur, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cg.remove()
			return cgroups{}, fmt.Errorf("make the box's cgroup: %w", err)
		}
		cg.dirs = append(cg.dirs, dir)
		if key == "" {
			cg.unified = dir
		}
	}
	if len(cg.dirs) == 0 {
		return cgroups{}, errors.New("no name=systemd or cgroup2 hierarchy in /proc/self/mountinfo matches /proc/self/cgroup")
	}
	if cg.unified == "" {
		cg.remove()
		return cgroups{}, errors.New("no cgroup2 hierarchy: hibernation needs cgroup.freeze")
	}
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
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, nil, err
	}
	own = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && (parts[1] == "" && parts[0] == "0" || parts[1] == "name=systemd") {
			own[parts[1]] = parts[2]
		}
	}
	return mounts, own, sc.Err()
}

// payloads are the box's payload cgroups, where exec puts what it starts.
func (cg cgroups) payloads() []string {
	out := make([]string, len(cg.dirs))
	for i, d := range cg.dirs {
		out[i] = filepath.Join(d, "payload")
	}
	return out
}

// setFrozen writes payload's cgroup.freeze and waits until cgroup.events
// says the whole subtree is (un)frozen.
func (cg cgroups) setFrozen(ctx context.Context, frozen bool) error {
	dir := filepath.Join(cg.unified, "payload")
	v := "0"
	if frozen {
		v = "1"
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte(v), 0o644); err != nil {
		return fmt.Errorf("cgroup.freeze: %w", err)
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

// kill ends every process left in the box's cgroups (cgroup.kill in v2).
func (cg cgroups) kill() {
	if cg.unified != "" {
		_ = os.WriteFile(filepath.Join(cg.unified, "cgroup.kill"), []byte("1"), 0o644)
	}
}

// empty says whether no process is left in the v2 tree.
func (cg cgroups) empty() bool {
	data, err := os.ReadFile(filepath.Join(cg.unified, "cgroup.events"))
	return err != nil || strings.Contains(string(data), "populated 0")
}

// remove removes the box's cgroup trees, deepest first; a cgroup the
// kernel still calls busy is retried for a second, then left.
func (cg cgroups) remove() {
	for _, top := range cg.dirs {
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
