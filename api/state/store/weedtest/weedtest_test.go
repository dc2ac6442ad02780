package weedtest

import (
	"os"
	"strings"
	"testing"
)

// The version tests/setup-host builds is the one Binary looks for.
func TestSetupHostBuildsThisVersion(t *testing.T) {
	data, err := os.ReadFile("../../../../tests/setup-host")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "SEAWEEDFS="+Version) {
		t.Fatalf("tests/setup-host does not build SeaweedFS %s (SEAWEEDFS=%s)", Version, Version)
	}
}
