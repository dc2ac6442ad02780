package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// verifyUnit runs systemd-analyze verify on the host unit's text with
// ExecStart pointing at the binary built for the tests (the installed path
// does not exist here).
func verifyUnit(t *testing.T, text string) (string, error) {
	t.Helper()
	text = strings.ReplaceAll(text, "/usr/local/bin/cocoonbox-api", bin)
	path := filepath.Join(t.TempDir(), "cocoonbox-api.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", "--man=no", path).CombinedOutput()
	return string(out), err
}

// Operations: the host unit passes systemd-analyze verify, and its
// systemd-analyze security exposure is reported (held to 3.5).
func TestHostUnitVerifiesAndIsHardened(t *testing.T) {
	text, err := os.ReadFile("../../../units/host/cocoonbox-api.service")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := verifyUnit(t, string(text)); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// Control: a broken directive is seen.
	if out, _ := verifyUnit(t, strings.Replace(string(text), "KillMode=mixed", "KillMode=bogus", 1)); !strings.Contains(out, "bogus") {
		t.Fatalf("verify does not see a bad directive:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "cocoonbox-api.service")
	os.WriteFile(path, text, 0o644)
	out, _ := exec.Command("systemd-analyze", "security", "--offline=yes", path).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for cocoonbox-api.service: ([0-9.]+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	level, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("systemd-analyze security: cocoonbox-api.service exposure %.1f", level)
	if level > 3.5 {
		t.Fatalf("exposure %.1f, over 3.5:\n%s", level, out)
	}
}
