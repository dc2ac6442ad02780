package apitest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// AddUser makes the user name with Password (an admin when admin is
// true), as cocoonbox-api users add does; it fails the test on an error.
func (a *API) AddUser(name string, admin bool) users.User {
	a.t.Helper()
	u, err := a.Users.Add(context.Background(), name, Password, admin)
	if err != nil {
		a.t.Fatalf("apitest: add user %s: %v", name, err)
	}
	return u
}

// PersonalToken regenerates the personal token of the user userID (the
// console's "new token") and answers it.
func (a *API) PersonalToken(userID string) tokens.Secret {
	a.t.Helper()
	tok, err := a.Tokens.Regenerate(context.Background(), userID)
	if err != nil {
		a.t.Fatalf("apitest: personal token of %s: %v", userID, err)
	}
	return tok
}

// Browser is an HTTP client of the api that keeps its cookies and does
// not follow redirects (a test sees each 303), as a console page's
// fetches would.
type Browser struct {
	*http.Client
	a *API
}

// Browser is a new browser without a session.
func (a *API) Browser() *Browser {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if a.roots != nil { // WithTLS
		c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.roots}}
	}
	return &Browser{a: a, Client: c}
}

// SignIn is a browser signed in to the console as name (POST
// /cb/api/session with Password); it fails the test unless that answers 200.
func (a *API) SignIn(name string) *Browser {
	a.t.Helper()
	b := a.Browser()
	body, _ := json.Marshal(map[string]string{"user": name, "password": Password})
	if resp, text := b.Send("POST", "/cb/api/session", "application/json", string(body)); resp.StatusCode != 200 {
		a.t.Fatalf("apitest: sign %s in: %d %s", name, resp.StatusCode, text)
	}
	return b
}

// Send sends method path (on the api's URL) with body of type ctype ("" for
// none) and answers the response, its body read and closed, and the body;
// it fails the test when the request cannot be sent.
func (b *Browser) Send(method, path, ctype, body string) (*http.Response, string) {
	b.a.t.Helper()
	req, err := http.NewRequest(method, b.a.URL+path, strings.NewReader(body))
	if err != nil {
		b.a.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := b.Client.Do(req)
	if err != nil {
		b.a.t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp, string(text)
}
