// Package wiretest is a stand-in cocoonbox-sandboxd for the api's tests:
// the wire's server side over TLS with a token, answering Images alone.
package wiretest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	sandboxv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1/sandboxv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire/testcert"
)

// Token is the stand-in's bearer token (40 characters), which TokenFile
// holds.
var Token = strings.Repeat("t", 40)

// Image is the one image the stand-in lists.
const Image = "cbdesk:v7-base"

// Daemon is a running stand-in: its https:// URL, the file holding Token
// and the CA file its certificate checks against.
type Daemon struct {
	URL, TokenFile, CA string
}

// SandboxYAML is api.yaml's sandbox: section naming the stand-in as host
// "b", for config.Parse.
func (d Daemon) SandboxYAML() string {
	return fmt.Sprintf("sandbox:\n  hosts: {b: %q}\n  token_file: %s\n  ca_file: %s\n", d.URL, d.TokenFile, d.CA)
}

// Start serves a stand-in until t ends: Images answers Image to a caller
// with Token and UNAUTHENTICATED to any other; every other call is
// UNIMPLEMENTED.
func Start(t testing.TB) Daemon {
	t.Helper()
	dir := t.TempDir()
	certs, err := testcert.Write(dir, "sandboxd")
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
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Daemon{URL: srv.URL, TokenFile: tokenFile, CA: certs.CA}
}

type oneImage struct {
	sandboxv1connect.UnimplementedSandboxHandler
}

func (oneImage) Images(_ context.Context, r *connect.Request[sandboxv1.ImagesRequest]) (*connect.Response[sandboxv1.ImagesResponse], error) {
	if r.Header().Get("Authorization") != "Bearer "+Token {
		return nil, connect.NewError(connect.CodeUnauthenticated, nil)
	}
	return connect.NewResponse(&sandboxv1.ImagesResponse{Images: []*sandboxv1.Image{{Ref: Image, Version: 7, Tier: "base"}}}), nil
}
