package apiserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/config"
)

// The login OAuth App comes from the environment; a half-set App, one
// without oauth.public_url or with an unreadable ca_file refuses the start
// naming what is wrong, and nothing set leaves GitHub sign-in off.
func TestGitHubAppFromTheEnvironment(t *testing.T) {
	cfg := config.Default()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	both := map[string]string{envGitHubClientID: "Ov23li0000", envGitHubClientSecret: "s3cret"}

	if app, err := gitHubApp(cfg, env(nil)); err != nil || app.ClientID != "" {
		t.Fatalf("nothing set: %+v, %v; want off", app, err)
	}
	for name, m := range map[string]map[string]string{
		"id only":     {envGitHubClientID: "Ov23li0000"},
		"secret only": {envGitHubClientSecret: "s3cret"},
	} {
		if _, err := gitHubApp(cfg, env(m)); err == nil || !strings.Contains(err.Error(), "LOGIN_GITHUB_CLIENT_ID and LOGIN_GITHUB_CLIENT_SECRET") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := gitHubApp(cfg, env(both)); err == nil || !strings.Contains(err.Error(), "oauth.public_url") {
		t.Errorf("no oauth.public_url: %v", err)
	}
	cfg.OAuth.PublicURL = "https://cocoonbox.example.com"
	app, err := gitHubApp(cfg, env(both))
	if err != nil || app.ClientID != "Ov23li0000" || string(app.Secret) != "s3cret" || app.WebURL != "https://github.com" || app.APIURL != "https://api.github.com" || app.Roots != nil {
		t.Fatalf("both set: %+v, %v", app, err)
	}
	if s := app.Secret.String(); strings.Contains(s, "s3cret") {
		t.Errorf("the secret prints as %q", s)
	}
	dir := t.TempDir()
	cfg.Signup.GitHub.CAFile = filepath.Join(dir, "missing.pem")
	if _, err := gitHubApp(cfg, env(both)); err == nil || !strings.HasPrefix(err.Error(), "signup.github.ca_file:") {
		t.Errorf("a missing ca_file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("not a certificate"), 0o644)
	cfg.Signup.GitHub.CAFile = filepath.Join(dir, "junk.pem")
	if _, err := gitHubApp(cfg, env(both)); err == nil || !strings.Contains(err.Error(), "signup.github.ca_file: ") || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a ca_file without a certificate: %v", err)
	}
}
