package verbs

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lock takes the repo's lock (an flock on <state>/<key>.lock), so two
// verbs of one repo never change its records at once.
func (p *Packer) lock(key string) (func(), error) {
	if err := os.MkdirAll(p.Paths.State, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", p.Paths.State, err)
	}
	path := filepath.Join(p.Paths.State, "."+key+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// Settled waits until no verb of the repo is running (it takes the repo's
// lock and lets it go), so a status read after it sees what a send still
// running from a killed packer did: the session it started, or the copy
// it released (Contract: Offload, "Offload, Mac side": the rerun asks the
// box, then finishes that offload or starts over).
func (p *Packer) Settled(key string) error {
	unlock, err := p.lock(key)
	if err != nil {
		return err
	}
	unlock()
	return nil
}
