package apiserver

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/signup"
)

// The GitHub OAuth App that signs people in (not Connect's GitHub App):
// from the environment, the unit's EnvironmentFile /etc/cocoonbox/login.env.
const (
	envGitHubClientID     = "LOGIN_GITHUB_CLIENT_ID"
	envGitHubClientSecret = "LOGIN_GITHUB_CLIENT_SECRET"
)

// gitHubApp reads the OAuth App from the environment and api.yaml's
// signup.github: a zero App (GitHub sign-in off) when neither variable is
// set; an error naming what is missing when only one is, or when
// oauth.public_url (the callback's origin) is empty, or when
// signup.github.ca_file holds no certificate.
func gitHubApp(cfg config.Config, getenv func(string) string) (signup.GitHubApp, error) {
	id, secret := strings.TrimSpace(getenv(envGitHubClientID)), strings.TrimSpace(getenv(envGitHubClientSecret))
	switch {
	case id == "" && secret == "":
		return signup.GitHubApp{}, nil
	case id == "" || secret == "":
		return signup.GitHubApp{}, fmt.Errorf("GitHub sign-in: set both %s and %s (the login OAuth App's, /etc/cocoonbox/login.env), or neither", envGitHubClientID, envGitHubClientSecret)
	case cfg.OAuth.PublicURL == "":
		return signup.GitHubApp{}, fmt.Errorf("GitHub sign-in: %s is set but oauth.public_url is empty: the App's callback is <oauth.public_url>%s", envGitHubClientID, signup.CallbackPath)
	}
	app := signup.GitHubApp{ClientID: id, Secret: signup.Secret(secret), WebURL: cfg.Signup.GitHub.WebURL, APIURL: cfg.Signup.GitHub.APIURL}
	if f := cfg.Signup.GitHub.CAFile; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return signup.GitHubApp{}, fmt.Errorf("signup.github.ca_file: %w", err)
		}
		app.Roots = x509.NewCertPool()
		if !app.Roots.AppendCertsFromPEM(pem) {
			return signup.GitHubApp{}, fmt.Errorf("signup.github.ca_file: %s holds no PEM certificate", f)
		}
	}
	return app, nil
}

// mountGitHub mounts the GitHub sign-in (package signup): the providers
// call, begin and the callback, which hands a new identity to sg's Arrive,
// and the user's identities; the console's sign-in page offers it when the
// OAuth App is configured (read with getenv).
//
// Contract: Sign-in with GitHub and signup.
func mountGitHub(srv *server.Server, cfg config.Config, getenv func(string) string, pool *pgxpool.Pool, con *console.Console, sg *signup.Signup, log *slog.Logger) error {
	app, err := gitHubApp(cfg, getenv)
	if err != nil {
		return err
	}
	g, err := signup.NewGitHub(signup.GitHubDeps{Pool: pool, App: app, PublicURL: cfg.OAuth.PublicURL,
		Secure: cfg.Secure(), Session: con.Session, StartSession: con.StartSession,
		Arrive: sg.Arrive, SetQueueCookie: sg.SetQueueCookie,
		TrustedProxies: cfg.TrustedPrefixes(), Log: log})
	if err != nil {
		return errors.New("GitHub sign-in: " + err.Error())
	}
	g.Mount(srv)
	if g.Configured() {
		con.OfferGitHub()
		log.Info("GitHub sign-in on", "client_id", app.ClientID, "web_url", app.WebURL, "api_url", app.APIURL, "callback", cfg.OAuth.PublicURL+signup.CallbackPath)
	}
	con.AddSection(console.Section{Title: "Connected accounts", Path: "/cb/identities", Blurb: "The GitHub account you sign in with.", Page: &signup.IdentitiesPage})
	return nil
}
