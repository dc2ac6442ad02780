package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/command"
	"github.com/cocoonbox/cocoonbox/internal/version"
)

func TestTCPWithoutATokenIsBadUsage(t *testing.T) {
	if err := run([]string{"--listen", "127.0.0.1:0"}, io.Discard); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--token-file") {
		t.Fatalf("TCP without a token: %v", err)
	}
	var ue command.UsageError
	if err := run([]string{"stray"}, io.Discard); !errors.As(err, &ue) {
		t.Fatalf("a stray argument: %v", err)
	}
	for _, n := range []string{"-1", "9"} {
		if err := run([]string{"--spares", n}, io.Discard); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--spares "+n+" is not 0 to 8") {
			t.Fatalf("--spares %s: %v", n, err)
		}
	}
	short := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(short, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readToken(short); err == nil || !strings.Contains(err.Error(), "32") {
		t.Fatalf("a short token: %v", err)
	}
}

// Issue 45: with no --listen and no --state-dir, the daemon does not start
// on its defaults (writing /var/lib/cocoonbox-sandboxd, a CA key
// included): a bare run is a mistake more often than a deployment, which
// names them (units/host/cocoonbox-sandboxd.service).
func TestNoListenOrStateDirRefusesToStart(t *testing.T) {
	for _, args := range [][]string{nil, {"--spares", "0"}} {
		if err := run(args, io.Discard); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--listen or --state-dir") {
			t.Errorf("cocoonbox-sandboxd %v: %v, want a usage error asking for --listen or --state-dir", args, err)
		}
	}
}

func TestRequireTokenRefusesAMissingOrWrongToken(t *testing.T) {
	token := strings.Repeat("t", 40)
	h := requireToken(token, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for header, want := range map[string]int{"": http.StatusOK, "Bearer wrong": http.StatusOK, "Bearer " + token: http.StatusTeapot} {
		r := httptest.NewRequest("POST", "/cocoonbox.sandbox.v1.Sandbox/Images", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		refused := w.Header().Get("Grpc-Status") == "16"
		if w.Code != want || refused != (want == http.StatusOK) {
			t.Errorf("Authorization %q: %d, grpc-status %q", header, w.Code, w.Header().Get("Grpc-Status"))
		}
	}
}

// --help prints the usage on stdout (the team's rule for every command).
func TestHelpPrintsUsageOnStdout(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"--help"}, &out)
	if err != nil || !strings.Contains(out.String(), "Usage:\n  cocoonbox-sandboxd [flags]") {
		t.Fatalf("--help: %v, stdout %q", err, out.String())
	}
}

// Issue 45: `--version` exited 2 (an unknown flag); both forms print the
// one convention, NAME RELEASE (REVISION) (internal/version).
func TestVersionPrintsNameReleaseRevision(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		var out bytes.Buffer
		err := run([]string{arg}, &out)
		if want := version.String("cocoonbox-sandboxd") + "\n"; err != nil || out.String() != want {
			t.Errorf("cocoonbox-sandboxd %s: %v, stdout %q, want %q", arg, err, out.String(), want)
		}
	}
}
