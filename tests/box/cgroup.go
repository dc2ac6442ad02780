package box

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Each box runs in a cgroup of its own. With --keep-unit and without
// --register, systemd-nspawn takes the cgroup it was started in and makes
// "payload" (the box's systemd) and "supervisor" below it. Started side by
// side from one test process, every box would get the same payload cgroup,
// and one box's systemd would remove or move the cgroups of another's units:
// units failed at random with status 219/CGROUP ("Failed to attach to
// cgroup …: No such file or directory") and "Failed to kill control group:
// Input/output error". Found on a cgroup v1 host whose processes all sit in
// the root cgroup.

// boxCgroups makes, in each hierarchy that tracks processes for systemd
// (the v1 name=systemd one and the v2 one, whichever are mounted), a
// directory for the box below the cgroup this process is in, and returns
// them. It is an error when neither hierarchy is found or a directory
// cannot be made.
func boxCgroups(name string) ([]string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for key, mnt := range mounts {
		cur, ok := own[key]
		if !ok {
			continue
		}
		dir := filepath.Join(mnt, cur, "cocoonbox-"+name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			removeCgroups(dirs)
			return nil, fmt.Errorf("make the box's cgroup: %w", err)
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no name=systemd or cgroup2 hierarchy in /proc/self/mountinfo matches /proc/self/cgroup")
	}
	sort.Strings(dirs)
	return dirs, nil
}

// cgroupMounts maps "name=systemd" and "" (cgroup2) to where they are
// mounted.
func cgroupMounts() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, sf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(sf) < 3 {
			continue
		}
		switch {
		case sf[0] == "cgroup2":
			m[""] = pf[4]
		case sf[0] == "cgroup" && strings.Contains(","+sf[2]+",", ",name=systemd,"):
			m["name=systemd"] = pf[4]
		}
	}
	return m, sc.Err()
}

// ownCgroups maps "name=systemd" and "" (cgroup2) to this process's cgroup
// in them.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			m[""] = parts[2]
		case parts[1] == "name=systemd":
			m["name=systemd"] = parts[2]
		}
	}
	return m, nil
}

// removeCgroups removes what is left of the boxes' cgroup trees once their
// processes are gone, deepest first; a cgroup the kernel still calls busy
// is retried for a second, then left.
func removeCgroups(dirs []string) {
	for _, top := range dirs {
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
