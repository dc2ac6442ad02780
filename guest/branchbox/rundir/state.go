package rundir

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// StateDir is the run's state directory, removed whole by teardown.
func StateDir(root, runID string) string { return filepath.Join(root, "state", runID) }

// WriteFile writes dir/name durably and owner-only, creating dir (0700)
// and its parent (0700) when missing, without following symlinks: a temp
// file in dir, fsync, rename, fsync of dir. Receipts are written with it too.
func WriteFile(dir, name string, data []byte) error {
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := unix.Mkdir(d, 0o700); err != nil && err != unix.EEXIST {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	dfd, err := OpenPath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	err = durable.WriteAt(dfd, name, durable.File{Data: data, Mode: 0o600, Temp: fmt.Sprintf(".%s.%d.tmp", name, os.Getpid())})
	if err != nil {
		return fmt.Errorf("write %s/%s: %w", dir, name, err)
	}
	return nil
}
