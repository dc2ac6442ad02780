package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 45, Deliver 5: serve finds its image folder from its
// configuration, not from the directory it was started in: a relative
// sandbox.local.images is the config file's directory's, and the start-up
// log names the folder and where it came from. The folder is absent, so
// the local supervisor stops at its first check and touches no bridge.
func TestServeReadsTheImageFolderFromItsConfigNotItsWorkingDirectory(t *testing.T) {
	etc := t.TempDir()
	config := filepath.Join(etc, "api.yaml")
	if err := os.WriteFile(config, []byte("sandbox:\n  local:\n    images: images\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // serve's working directory: not the config's
	s := startServe(t, stateDir(t), "--config", config)
	s.stop(t)
	want := "sandbox.local.images (sandbox.local.images of " + config + "): stat " + filepath.Join(etc, "images") + ": no such file or directory"
	if log := s.stderr.String(); !strings.Contains(log, want) {
		t.Errorf("the start-up log does not name the config's image folder and its source (%q):\n%s", want, log)
	}
}
