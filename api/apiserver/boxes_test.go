package apiserver

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire/testcert"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire/wiretest"
)

// Issue 24, Deliver 6: an https:// sandbox.hosts entry is dialled over
// TLS, its certificate checked against sandbox.ca_file, with the token;
// a daemon whose certificate another CA signed is not trusted.
func TestAnHTTPSSandboxHostIsCalledOverTLSCheckedAgainstTheCAFile(t *testing.T) {
	d := wiretest.Start(t)
	other, err := testcert.Write(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	for ca, trusted := range map[string]bool{d.CA: true, other.CA: false} {
		host := d
		host.CA = ca
		c, err := config.Parse([]byte(host.SandboxYAML()))
		if err != nil {
			t.Fatal(err)
		}
		hosts, done, err := supervisors(context.Background(), c.Sandbox, "", nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		images, err := hosts["b"].Images(context.Background())
		done()
		if trusted && (err != nil || len(images) != 1 || images[0].Ref != wiretest.Image) {
			t.Errorf("ca_file %s: %v %v, want the one image", filepath.Base(ca), images, err)
		}
		if !trusted && (err == nil || !strings.Contains(err.Error(), "certificate")) {
			t.Errorf("ca_file %s (another CA): %v %v, want a certificate error", filepath.Base(ca), images, err)
		}
	}
}

// Issue 45, Deliver 5: the local supervisor's image folder is the
// configuration's, whatever the api's working directory: a relative
// sandbox.local.images is the config file's directory's, and the api's
// refusal names the folder and where it came from.
func TestTheLocalImagesFolderIsTheConfigsFromAnyWorkingDirectory(t *testing.T) {
	etc := t.TempDir()
	path := filepath.Join(etc, "api.yaml")
	if err := os.WriteFile(path, []byte("sandbox:\n  local:\n    images: no-images-here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{etc, t.TempDir()} {
		t.Chdir(cwd)
		if cwd != etc {
			// A folder of that name in the working directory is not the one.
			if err := os.Mkdir("no-images-here", 0o755); err != nil {
				t.Fatal(err)
			}
		}
		c, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = supervisors(context.Background(), c.Sandbox, "", nil, slog.New(slog.DiscardHandler))
		want := "sandbox.local.images (sandbox.local.images of " + path + "): stat " + filepath.Join(etc, "no-images-here") + ": no such file"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("from %s: %v, want %q", cwd, err, want)
		}
	}
}
