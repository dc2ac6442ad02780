package apiserver

import (
	"context"
	"log/slog"
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
		hosts, done, err := supervisors(context.Background(), c.Sandbox, "", slog.New(slog.DiscardHandler))
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
