package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// keyHost is the demo key's host (`keys add --host`): a name the world
// has, which the egress proxy sends to the demo's own upstream instead
// (api.yaml sandbox.local.egress.resolve), so nothing leaves the machine.
const keyHost = "api.example.com"

// upstream is the key's host as the demo plays it: an HTTPS server on
// loopback whose certificate for keyHost a CA made at the start signs
// (the CA is api.yaml's sandbox.local.egress.upstream_ca_file, so the
// proxy verifies it as it verifies a real host against the system roots).
// It keeps the Authorization header of every request and echoes it in
// its answer, as a careless or hostile host would: the proxy swaps the
// value back for the placeholder on the way to the box (issue 37), which
// the report shows.
type upstream struct {
	srv    *httptest.Server
	caFile string
	mu     sync.Mutex
	seen   []string
}

// startUpstream makes the CA and the leaf in memory, writes the CA's
// certificate to dir/upstream-ca.pem and starts the server.
func startUpstream(dir string) (*upstream, error) {
	u := &upstream{caFile: filepath.Join(dir, "upstream-ca.pem")}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cocoonbox demo upstream CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: keyHost}, DNSNames: []string{keyHost},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(u.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return nil, err
	}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Header.Get("Authorization"))
		u.mu.Unlock()
		fmt.Fprintf(w, "the demo's %s got %s with Authorization: %s\n", keyHost, r.URL.Path, r.Header.Get("Authorization"))
	}))
	u.srv.Listener, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}}
	u.srv.StartTLS()
	return u, nil
}

// yaml is the api.yaml lines under sandbox.local.egress that send
// keyHost here and trust the upstream's CA.
func (u *upstream) yaml() string {
	return fmt.Sprintf("      resolve: {%s: 127.0.0.1}\n      upstream_ca_file: %s\n", keyHost, u.caFile)
}

// url is the address a box asks for: keyHost on the upstream's port.
func (u *upstream) url(path string) string {
	return fmt.Sprintf("https://%s:%d%s", keyHost, u.srv.Listener.Addr().(*net.TCPAddr).Port, path)
}

// requests is how many requests reached the upstream, and the last one's
// Authorization.
func (u *upstream) requests() (int, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		return 0, ""
	}
	return len(u.seen), u.seen[len(u.seen)-1]
}

func (u *upstream) close() { u.srv.Close() }
