package localtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// Saves lists the saves a local supervisor with state directory stateDir
// holds, read from its saves/<id>.json records: the Supervisor interface
// lists no saves, and a test that a save run again leaves none behind
// needs them all. A record deleted while it is read is left out.
func Saves(stateDir string) ([]sandbox.SaveInfo, error) {
	files, err := filepath.Glob(filepath.Join(stateDir, "saves", "*.json"))
	if err != nil {
		return nil, err
	}
	var out []sandbox.SaveInfo
	for _, f := range files {
		data, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var info sandbox.SaveInfo
		if err := json.Unmarshal(data, &info); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, info)
	}
	return out, nil
}
