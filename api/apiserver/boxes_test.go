package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/config"
	sandboxv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1/sandboxv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire/testcert"
)

// oneImage is a sandboxd that answers Images with one image to a caller
// with the bearer token.
type oneImage struct {
	sandboxv1connect.UnimplementedSandboxHandler
}

func (oneImage) Images(_ context.Context, r *connect.Request[sandboxv1.ImagesRequest]) (*connect.Response[sandboxv1.ImagesResponse], error) {
	if r.Header().Get("Authorization") != "Bearer "+strings.Repeat("t", 40) {
		return nil, connect.NewError(connect.CodeUnauthenticated, nil)
	}
	return connect.NewResponse(&sandboxv1.ImagesResponse{Images: []*sandboxv1.Image{{Ref: "cbdesk:v7-base", Version: 7, Tier: "base"}}}), nil
}

// Issue 24, Deliver 6: an https:// sandbox.hosts entry is dialled over
// TLS, its certificate checked against sandbox.ca_file, with the token;
// a daemon whose certificate another CA signed is not trusted.
func TestAnHTTPSSandboxHostIsCalledOverTLSCheckedAgainstTheCAFile(t *testing.T) {
	dir := t.TempDir()
	certs, err := testcert.Write(dir, "sandboxd")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testcert.Write(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certs.Cert, certs.Key)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(sandboxv1connect.NewSandboxHandler(oneImage{}))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(strings.Repeat("t", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for ca, trusted := range map[string]bool{certs.CA: true, other.CA: false} {
		c, err := config.Parse(fmt.Appendf(nil, "sandbox:\n  hosts: {b: %q}\n  token_file: %s\n  ca_file: %s\n", srv.URL, tokenFile, ca))
		if err != nil {
			t.Fatal(err)
		}
		hosts, done, err := supervisors(context.Background(), c.Sandbox, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		images, err := hosts["b"].Images(context.Background())
		done()
		if trusted && (err != nil || len(images) != 1 || images[0].Ref != "cbdesk:v7-base") {
			t.Errorf("ca_file %s: %v %v, want the one image", filepath.Base(ca), images, err)
		}
		if !trusted && (err == nil || !strings.Contains(err.Error(), "certificate")) {
			t.Errorf("ca_file %s (another CA): %v %v, want a certificate error", filepath.Base(ca), images, err)
		}
	}
}
