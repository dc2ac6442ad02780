package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
)

// Issue 41, Deliver 7 (one issuer), its Must show: with only one https
// origin configured (oauth.public_url; the top-level public_url unset),
// `cocoonbox login --endpoint https://…` signs in. Before, the sign-in's
// redirect carried iss=http://<listen> and the CLI refused it ("came back
// from issuer"). The CLI runs as its own process trusting the test CA the
// standard way (SSL_CERT_FILE); the consent is the page's own call
// (approve) on alice's console session, whose cookie is Secure.
func TestLoginAtAnHTTPSIssuerWithOneOriginConfigured(t *testing.T) {
	a := apitest.New(t, apitest.WithTLS())
	if a.Config.PublicURL != "" || a.Config.OAuth.PublicURL != a.URL || !strings.HasPrefix(a.URL, "https://") {
		t.Fatalf("public_url %q, oauth.public_url %q, URL %q: want only oauth.public_url, https", a.Config.PublicURL, a.Config.OAuth.PublicURL, a.URL)
	}
	// Every cookie is Secure at an https issuer: the console's session.
	resp, _ := a.Browser().Send("POST", "/cb/api/session", "application/json", `{"user":"alice","password":"`+apitest.Password+`"}`)
	if cs := resp.Cookies(); resp.StatusCode != 200 || len(cs) != 1 || !cs[0].Secure {
		t.Fatalf("sign-in at the https issuer: %d, cookies %v; want one Secure cookie", resp.StatusCode, cs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := append(os.Environ(), asCLI+"=1", "SSL_CERT_FILE="+a.CAFile, "XDG_CONFIG_HOME="+t.TempDir())
	cmd := exec.CommandContext(ctx, os.Args[0], "login", "--no-browser", "--device-name", "https laptop", "--endpoint", a.URL)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var authorize *url.URL
	var seen []string
	for authorize == nil && lines.Scan() {
		seen = append(seen, lines.Text())
		if u, err := url.Parse(strings.TrimSpace(lines.Text())); err == nil && strings.HasPrefix(u.String(), a.URL+"/cb/oauth/authorize?") {
			authorize = u
		}
	}
	if authorize == nil {
		cmd.Wait()
		t.Fatalf("the CLI printed no authorize URL at %s:\n%s\n%s", a.URL, strings.Join(seen, "\n"), stderr.String())
	}
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stdout); rest <- string(b) }()

	body, _ := json.Marshal(map[string]string{"query": authorize.RawQuery})
	resp, text := a.Session.Send("POST", "/cb/api/oauth/approve", "application/json", string(body))
	var approved struct{ Redirect string }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(text), &approved) != nil {
		t.Fatalf("approve: %d %s", resp.StatusCode, text)
	}
	cb, err := url.Parse(approved.Redirect)
	if err != nil || cb.Query().Get("iss") != a.URL {
		t.Fatalf("the redirect %q: want iss %s, the one issuer", approved.Redirect, a.URL)
	}
	// The browser's visit to the CLI's loopback callback.
	if resp, err := http.Get(approved.Redirect); err != nil {
		t.Fatalf("the callback: %v", err)
	} else {
		resp.Body.Close()
	}
	err = cmd.Wait()
	out := <-rest
	if err != nil || !strings.Contains(out, `Signed in to `+a.URL+` as device "https laptop"`) {
		t.Fatalf("cocoonbox login --endpoint %s: %v\n%s\n%s", a.URL, err, out, stderr.String())
	}

	// The device token it kept works at the https endpoint.
	cmd = exec.CommandContext(ctx, os.Args[0], "devices", "--endpoint", a.URL)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "https laptop") {
		t.Fatalf("cocoonbox devices at %s after the login: %v\n%s", a.URL, err, out)
	}
}
