package feature

import (
	"encoding/json"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// write stores the receipt durably at rc.Path (owner-only).
func (rc *Receipt) write() error {
	data, err := json.MarshalIndent(rc, "", "  ")
	if err != nil {
		return err
	}
	return rundir.WriteFile(filepath.Dir(rc.Path), filepath.Base(rc.Path), append(data, '\n'))
}
