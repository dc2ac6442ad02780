//go:build booted

package local

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// vaultHost is the name the key vault's test upstream answers to (its
// self-signed certificate names it); the package's supervisor resolves it
// to 127.0.0.1 for a box whose key lists it. A reserved name: were the
// interception broken, DNS would answer nothing.
const vaultHost = "vault.test"

var (
	vaultUp   *httptest.Server
	vaultMu   sync.Mutex
	vaultSeen []string // "proto authorization user-agent" of each request
)

// startVaultUpstream starts the HTTPS upstream on loopback and writes its
// certificate where EgressUpstreamCAFile names it.
func startVaultUpstream() (string, error) {
	vaultUp = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vaultMu.Lock()
		vaultSeen = append(vaultSeen, fmt.Sprintf("%s %s %s", r.Proto, r.Header.Get("Authorization"), r.UserAgent()))
		vaultMu.Unlock()
		// An upstream that reflects the key (issue 37): in a Location
		// that keeps it as a query parameter, and in the body.
		auth := r.Header.Get("Authorization")
		w.Header().Set("Location", "https://"+vaultHost+"/next?key="+url.QueryEscape(strings.TrimPrefix(auth, "Bearer ")))
		fmt.Fprint(w, "upstream saw ", auth)
	}))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(26), Subject: pkix.Name{CommonName: vaultHost}, DNSNames: []string{vaultHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", err
	}
	vaultUp.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	vaultUp.EnableHTTP2 = true
	vaultUp.StartTLS()
	if err := os.MkdirAll(testRoot, 0o755); err != nil {
		return "", err
	}
	f := filepath.Join(testRoot, "vault-upstream-ca.pem")
	return f, os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// bootWithVaultKey boots a box with one key for vaultHost, sent as
// "Authorization: Bearer {}", whose placeholder ph ends in cbv_ and 32
// hex digits, as the api's entries do; it answers the box and the
// upstream's /v1/models URL.
func bootWithVaultKey(t *testing.T, ph, real string) (sandbox.Machine, string) {
	t.Helper()
	m := boot(t, v1)
	entries := []sandbox.ClaimEntry{
		{Name: "COCOONBOX_VAULT", Value: "OPENAI_API_KEY=" + ph + ";" + vaultHost + ";Authorization:%20Bearer%20{}", Guest: true},
		{Name: "CBV_" + ph[len(ph)-32:], Value: "Bearer " + real, Hosts: []string{vaultHost}, How: "Authorization:%20Bearer%20{}"},
	}
	if err := sup.SetClaimEnv(context.Background(), m.ID, entries); err != nil {
		t.Fatal(err)
	}
	return m, fmt.Sprintf("https://%s:%d/v1/models", vaultHost, vaultUp.Listener.Addr().(*net.TCPAddr).Port)
}

func vaultRequests() []string {
	vaultMu.Lock()
	defer vaultMu.Unlock()
	return append([]string(nil), vaultSeen...)
}

// vaultRequestsWith are the upstream's requests from the from-th on that
// hold every one of words. The package's tests share the upstream and run
// in parallel (the spoof tests ask it too), so a test picks out its own
// requests, never the last or a count of all.
func vaultRequestsWith(from int, words ...string) []string {
	var out []string
	for _, r := range vaultRequests()[from:] {
		all := true
		for _, w := range words {
			all = all && strings.Contains(r, w)
		}
		if all {
			out = append(out, r)
		}
	}
	return out
}

// Issue 26, Deliver 5: in a booted box curl (HTTPS_PROXY, CURL_CA_BUNDLE),
// Python's urllib (HTTPS_PROXY, SSL_CERT_FILE), Node (NODE_EXTRA_CA_CERTS)
// and git (GIT_SSL_CAINFO) trust the pool CA through the environment the
// supervisor sets, and a request to a host the box's key lists reaches the
// upstream with the value in Authorization, while the box's environment
// and /run/silkd.env hold only the placeholder. curl and python3 are in
// the base tier from cbdesk:v23. Issue 37: the upstream echoes the value
// in its body (and curl's Location, below): the box reads the
// placeholder back, never the value.
func TestABoxsKeyReachesItsHostOnlyThroughTheProxy(t *testing.T) {
	t.Parallel()
	const (
		ph   = "sk-proj-cbv_0123456789abcdef0123456789abcdef"
		real = "sk-proj-the-real-secret-26"
	)
	m, u := bootWithVaultKey(t, ph, real)
	port := vaultUp.Listener.Addr().(*net.TCPAddr).Port
	auth := "Authorization: Bearer " + ph
	clients := map[string]string{
		"curl": fmt.Sprintf("curl -sS --fail-with-body -A curl -H %q %s", auth, u),
		// urllib takes the proxy from HTTPS_PROXY and its roots from
		// SSL_CERT_FILE (OpenSSL's default paths): nothing named here.
		"python3": fmt.Sprintf(`python3 -c 'import sys, urllib.request as u
r = u.Request(sys.argv[1], headers={"Authorization": "Bearer %s", "User-Agent": "python3"})
print(u.urlopen(r).read().decode())' %s`, ph, u),
		// Node's fetch takes no proxy from the environment: a CONNECT
		// by hand, then TLS with Node's roots (NODE_EXTRA_CA_CERTS added).
		"node": fmt.Sprintf(`node -e '
const http = require("http"), https = require("https"), tls = require("tls");
const p = new URL(process.env.HTTPS_PROXY);
http.request({host: p.hostname, port: p.port, method: "CONNECT", path: "%[1]s:%[2]d"}).on("connect", (res, sock) => {
  if (res.statusCode !== 200) { console.error("the proxy answered the CONNECT", res.statusCode, res.statusMessage); process.exit(1); }
  https.get({host: "%[1]s", port: %[2]d, path: "/v1/models", headers: {Authorization: "Bearer %[3]s", "User-Agent": "node"},
    createConnection: () => tls.connect({socket: sock, servername: "%[1]s"})}, r => { r.setEncoding("utf8"); r.on("data", d => process.stdout.write(d)); })
    .on("error", e => { console.error(e); process.exit(1); });
}).on("error", e => { console.error("the CONNECT to the proxy:", e); process.exit(1); }).end();'`, vaultHost, port, ph),
		"git": fmt.Sprintf("git -c http.extraHeader=%q ls-remote %s/repo.git 2>&1 || true", auth, u),
	}
	// Each client's User-Agent, by which its request is told from the
	// other tests' (git's is git/VERSION).
	agents := map[string]string{"curl": " curl", "python3": " python3", "node": " node", "git": " git/"}
	for name, line := range clients {
		before := len(vaultRequests())
		start := time.Now()
		out := request(t, m, name, line, auth, u)
		t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
		mine := vaultRequestsWith(before, "Bearer "+real, agents[name])
		if name == "git" {
			// git gets "upstream saw ..." where it wanted refs, and says
			// so; the request reaching the upstream is the proof.
			if len(mine) == 0 {
				t.Errorf("git: the upstream saw %q; git said %q", vaultRequests()[before:], out)
			}
			continue
		}
		if !strings.Contains(out, "upstream saw Bearer "+ph) || strings.Contains(out, real) || len(mine) == 0 {
			t.Errorf("%s: %q, want the placeholder echoed (the upstream saw %q)", name, out, vaultRequests()[before:])
		}
	}
	if loc := request(t, m, "curl (Location)", fmt.Sprintf("curl -sS -o /dev/null -w '%%{redirect_url}|%%header{location}' -H %q %s", auth, u), auth, u); strings.Contains(loc, real) || !strings.Contains(loc, "key="+ph) {
		t.Errorf("curl's Location: %q, want the placeholder", loc)
	}
	if env := mustSh(t, m.ID, "cat /run/silkd.env; . /etc/profile.d/cocoonbox-egress.sh; env; cat /proc/1/environ"); strings.Contains(env, real) || !strings.Contains(env, ph) {
		t.Errorf("the box's environment or /run/silkd.env: %q", env)
	}
}

// request runs a client's line in the box, after the egress profile,
// and answers its stdout. A failure says the client's stdout and stderr
// and what the box saw (boxSaw): a CI run once failed with only "exited
// 1" after 136 s, and nothing said which client, or why.
func request(t *testing.T, m sandbox.Machine, name, line, auth, u string) string {
	t.Helper()
	out, errOut, code := runAll(t, m.ID, sandbox.ExecRequest{Args: []string{"sh", "-c", ". /etc/profile.d/cocoonbox-egress.sh; " + line}})
	if code != 0 {
		t.Fatalf("%s in the box exited %d: %s\nstdout: %s\nstderr: %s\n%s", name, code, line, out, errOut, boxSaw(t, m, auth, u))
	}
	return out
}

// boxSaw is what a failing request's box saw: its proxy and CA
// variables, resolv.conf, addresses, routes and neighbours, curl -v of
// the same request through the proxy, what the upstream got, and what
// the supervisor logged (the egress proxy says at Info why it refused
// or failed a CONNECT or a request, naming the box's address).
func boxSaw(t *testing.T, m sandbox.Machine, auth, u string) string {
	t.Helper()
	out, errOut, code := runAll(t, m.ID, sandbox.ExecRequest{Args: []string{"sh", "-c", fmt.Sprintf(`. /etc/profile.d/cocoonbox-egress.sh
echo "== the egress environment"; env | grep -E '^(HTTPS?_PROXY|https?_proxy|NO_PROXY|no_proxy|SSL_CERT_FILE|CURL_CA_BUNDLE|NODE_EXTRA_CA_CERTS|GIT_SSL_CAINFO)=' | sort
echo "== /etc/resolv.conf"; cat /etc/resolv.conf
echo "== ip addr"; ip -br addr
echo "== ip route"; ip route
echo "== ip neigh"; ip neigh
echo "== systemctl is-system-running"; systemctl is-system-running
echo "== curl -v"; curl -v -sS --max-time 120 -o /dev/null -H %q %s 2>&1`, auth, u)}})
	var log []string
	for _, l := range strings.Split(supLog.String(), "\n") {
		if m.Address != "" && strings.Contains(l, m.Address) || strings.Contains(l, "egress") {
			log = append(log, l)
		}
	}
	return fmt.Sprintf("what the box %s (%s) saw (exit %d):\n%s%s\nthe upstream's requests: %q\nthe supervisor's egress lines:\n%s",
		m.ID, m.Address, code, out, errOut, vaultRequests(), strings.Join(log, "\n"))
}

// The pool CA is made once (key 0600) and read back the same at the next
// start; a certificate that no longer parses refuses the start naming it
// and is left as it was (a new CA would leave every box trusting the old).
func TestPoolCAIsMadeOnceAndKeptWithItsKey0600(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, first, err := loadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, caKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the key: %v %v", st, err)
	}
	_, again, err := loadCA(dir)
	if err != nil || string(again) != string(first) {
		t.Fatalf("the second start made another CA (%v)", err)
	}
	if err := os.WriteFile(filepath.Join(dir, caCertFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadCA(dir); err == nil || !strings.Contains(err.Error(), caCertFile) {
		t.Fatalf("a broken certificate: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, caCertFile)); string(b) != "junk" {
		t.Fatal("the broken certificate was overwritten")
	}
}

// Issue 37: "the key's value goes to whatever Host the box names". curl
// in a booted box, over HTTP/1.1 and HTTP/2, CONNECTs to the host its key
// lists and names another in Host (:authority): the proxy answers 421
// naming the rule and the upstream sees no request.
func TestABoxNamingAnotherHostOnAKeysConnectionGetsNoKey(t *testing.T) {
	t.Parallel()
	const (
		ph   = "sk-proj-cbv_fedcba9876543210fedcba9876543210"
		real = "sk-proj-the-real-secret-37"
	)
	m, u := bootWithVaultKey(t, ph, real)
	for _, proto := range []string{"--http1.1", "--http2"} {
		before := len(vaultRequests())
		agent := "naming-another-host" + proto
		out := request(t, m, "curl "+proto, fmt.Sprintf("curl -sS %s -A %s -w ' %%{http_code}' -H 'Host: attacker.test' -H 'Authorization: Bearer %s' %s", proto, agent, ph, u), "Authorization: Bearer "+ph, u)
		// Its own requests (the value or the placeholder, or its agent):
		// other tests ask the upstream meanwhile.
		if reqs := append(append(vaultRequestsWith(before, real), vaultRequestsWith(before, ph)...), vaultRequestsWith(before, agent)...); len(reqs) != 0 {
			t.Errorf("%s: the upstream saw %q", proto, reqs)
		}
		if !strings.HasSuffix(out, " 421") || !strings.Contains(out, "misdirected request") {
			t.Errorf("%s with Host attacker.test: %q, want 421 naming the rule", proto, out)
		}
	}
}

// oneConnection is a Python client in the box: two requests with the
// placeholder on one connection through the proxy (http.client, one
// CONNECT), the second only once a line comes on its stdin; it prints
// what it read back after each, and "same socket" if the second went on
// the first's.
const oneConnection = `import http.client, os, ssl, sys
from urllib.parse import urlsplit
p, u = urlsplit(os.environ["HTTPS_PROXY"]), urlsplit(sys.argv[1])
c = http.client.HTTPSConnection(p.hostname, p.port, context=ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]))
c.set_tunnel(u.hostname, u.port)
def ask():
    c.request("GET", u.path, headers={"Authorization": "Bearer " + sys.argv[2], "User-Agent": "one-connection"})
    print(c.getresponse().read().decode(), flush=True)
ask()
first = c.sock
sys.stdin.readline()
ask()
print("same socket" if c.sock is first else "another socket", flush=True)
`

// Issue 37, Deliver 5: a key deleted in the api stops at once on a
// connection the box opened before: the proxy reads the box's keys at
// each request, not once per CONNECT.
func TestAKeyDeletedBetweenTwoRequestsOnOneConnectionIsNotSentAgain(t *testing.T) {
	t.Parallel()
	const (
		ph   = "sk-proj-cbv_37d37d37d37d37d37d37d37d37d37d37"
		real = "sk-proj-deleted-between-requests-37"
	)
	m, u := bootWithVaultKey(t, ph, real)
	before := len(vaultRequests())
	p, err := sup.Exec(context.Background(), m.ID, sandbox.ExecRequest{Args: []string{"sh", "-c",
		". /etc/profile.d/cocoonbox-egress.sh; exec python3 -c \"$1\" \"$2\" \"$3\"", "sh", oneConnection, u, ph}})
	if err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	go func() { _, _ = io.Copy(&errOut, p.Stderr()) }()
	out := bufio.NewReader(p.Stdout())
	first, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("the first request: %v (stderr %s)", err, errOut.String())
	}
	// The key deleted: the api's claim env without its host-only entry.
	if err := sup.SetClaimEnv(context.Background(), m.ID, []sandbox.ClaimEntry{
		{Name: "COCOONBOX_VAULT", Value: "OPENAI_API_KEY=" + ph + ";" + vaultHost + ";Authorization:%20Bearer%20{}", Guest: true}}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(p.Stdin(), "go")
	p.Stdin().Close()
	rest, _ := io.ReadAll(out)
	if st, err := p.Wait(); err != nil || st.Code != 0 {
		t.Fatalf("the client ended %+v %v; it printed %q %q (stderr %s)", st, err, first, rest, errOut.String())
	}
	var seen []string
	for _, r := range vaultRequests()[before:] {
		if strings.HasSuffix(r, " one-connection") {
			seen = append(seen, r)
		}
	}
	if !strings.Contains(string(rest), "same socket") || len(seen) != 2 {
		t.Fatalf("want two requests on one connection; the box printed %q %q, the upstream saw %q", first, rest, seen)
	}
	if !strings.Contains(seen[0], "Bearer "+real) || !strings.Contains(seen[1], "Bearer "+ph) {
		t.Fatalf("the upstream saw %q: want the value, then (the key deleted) the placeholder", seen)
	}
	if strings.Contains(first+string(rest), real) {
		t.Fatalf("the value came back into the box: %q %q", first, rest)
	}
}
