package main

import (
	"os/exec"
	"strings"
	"testing"
)

func TestVersionPrintsStamp(t *testing.T) {
	bin := t.TempDir() + "/cocoonbox-api"
	build := exec.Command("go", "build", "-ldflags", "-X main.Version=test-stamp", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "test-stamp" {
		t.Fatalf("version = %q, want test-stamp", got)
	}
	if err := exec.Command(bin, "nope").Run(); err == nil {
		t.Fatal("unknown command exited 0")
	}
}
