package desktop

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Running reports whether a process named comm (as in /proc/PID/comm, at
// most 15 bytes) runs as uid. procRoot is "/proc" outside of tests.
func Running(procRoot, comm string, uid int) bool {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := filepath.Join(procRoot, e.Name())
		data, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(data)) != comm {
			continue
		}
		fi, err := os.Stat(dir)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
			return true
		}
	}
	return false
}
