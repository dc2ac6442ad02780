package main

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

const (
	hostsFile = "/etc/hosts"
	// hostsMark ends the one line of /etc/hosts that is ours.
	hostsMark = "# cocoonbox-hostname"
)

// hostsLine is our /etc/hosts line for name.
func hostsLine(name string) string { return "127.0.1.1\t" + name + "\t" + hostsMark }

// updateHosts returns the hosts file text with exactly one marked line,
// for name: it replaces the marked lines, or goes after the first
// 127.0.0.1 line (at the top when there is none). Every other line stays.
func updateHosts(text, name string) string {
	var lines []string
	if text != "" {
		lines = strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	}
	out := make([]string, 0, len(lines)+1)
	placed := false
	for _, l := range lines {
		if strings.HasSuffix(strings.TrimSpace(l), hostsMark) {
			if !placed {
				out = append(out, hostsLine(name))
				placed = true
			}
			continue
		}
		out = append(out, l)
	}
	if !placed {
		at := 0
		for i, l := range out {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "127.0.0.1" {
				at = i + 1
				break
			}
		}
		out = append(out[:at], append([]string{hostsLine(name)}, out[at:]...)...)
	}
	return strings.Join(out, "\n") + "\n"
}

// ensureHosts rewrites path atomically (temp file, fsync, rename,
// directory fsync) when its marked line is not yet for name, keeping the
// file's mode. It says whether it wrote.
func ensureHosts(path, name string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	want := updateHosts(string(data), name)
	if want == string(data) {
		return false, nil
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	return true, durable.WriteFile(path, []byte(want), mode)
}
