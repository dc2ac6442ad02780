package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// ExcludesPath is the offload's excludes file under a box's root
// (Contract: Offload, Directories and State excludes): one absolute path a
// line, the copies' git-ignored directories.
const ExcludesPath = "home/user/.local/share/cocoonbox/offload/excludes"

// BoxSkip answers the Skip of a box's save whose root is root: every path
// the offload's excludes file lists under /workspace/ (Contract: Offload,
// State excludes: "The state layer leaves out every listed path under
// /workspace/ and ignores any other line"). The secrets tmpfs
// (/run/cocoonbox-offload) is outside the saved trees and never on the
// disk. The file is read through an os.Root without following a link out
// of the root; a missing file skips nothing.
func BoxSkip(root string) (func(rel string) bool, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := r.ReadFile(ExcludesPath)
	if errors.Is(err, fs.ErrNotExist) {
		return func(string) bool { return false }, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read /%s: %w", ExcludesPath, err)
	}
	return ExcludesSkip(string(data)), nil
}

// ExcludesSkip answers the Skip of an excludes file's text: a path
// relative to the root ("workspace/app/node_modules") is left out when a
// line names it ("/workspace/app/node_modules", a trailing slash or not).
// A line not under /workspace/, or not clean, is ignored.
func ExcludesSkip(text string) func(rel string) bool {
	skip := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSuffix(strings.TrimSpace(l), "/")
		if !strings.HasPrefix(l, "/workspace/") || path.Clean(l) != l {
			continue
		}
		skip[strings.TrimPrefix(l, "/")] = true
	}
	return func(rel string) bool { return skip[rel] }
}
