package login

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/signin"
)

const endpoint = "http://127.0.0.1:18200"

func start(t *testing.T) (*Flow, *client.AuthorizeRequest) {
	t.Helper()
	f, err := Start(Request{Endpoint: endpoint + "/", Client: client.CLI, DeviceName: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	u, err := url.Parse(f.AuthorizeURL())
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Scheme + "://" + u.Host + u.Path; got != endpoint+"/cb/oauth/authorize" {
		t.Fatalf("authorize URL %s", u)
	}
	// The server's own parser accepts what the client sends.
	r, perr := signin.ParseAuthorizeRequest(u.Query())
	if perr != nil {
		t.Fatalf("the server refuses the CLI's request: %v", perr)
	}
	return f, r
}

// callback is the browser following the api's redirect.
func callback(t *testing.T, f *Flow, q url.Values) int {
	t.Helper()
	resp, err := http.Get(f.RedirectURI() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCallbackWithStateAndIssuerGivesTheCodeAndAVerifierOfTheChallenge(t *testing.T) {
	f, r := start(t)
	if status := callback(t, f, url.Values{"code": {"c0de"}, "state": {r.State}, "iss": {endpoint}}); status != 200 {
		t.Fatalf("callback answered %d", status)
	}
	res, err := f.Wait(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != "c0de" || res.RedirectURI != r.RedirectURI {
		t.Fatalf("result %+v", res)
	}
	if err := signin.VerifyPKCE(r.CodeChallenge, res.CodeVerifier); err != nil {
		t.Fatalf("the verifier does not match the challenge sent: %v", err)
	}
	// The port is freed once Wait returned.
	if _, err := http.Get(f.RedirectURI()); err == nil {
		t.Fatal("the callback port still answers after Wait")
	}
}

// A callback with another state (a stale tab, a local process guessing) is
// refused and the flow goes on waiting for the real one.
func TestCallbackWithAnotherStateIsIgnored(t *testing.T) {
	f, r := start(t)
	if status := callback(t, f, url.Values{"code": {"evil"}, "state": {"guess"}, "iss": {endpoint}}); status != 400 {
		t.Fatalf("a wrong state answered %d, want 400", status)
	}
	callback(t, f, url.Values{"code": {"good"}, "state": {r.State}, "iss": {endpoint}})
	res, err := f.Wait(waitCtx(t))
	if err != nil || res.Code != "good" {
		t.Fatalf("Wait = %+v, %v; want the code of the real callback", res, err)
	}
}

// RFC 9207: a code from another issuer is refused (mix-up attack).
func TestCallbackFromAnotherIssuerFails(t *testing.T) {
	f, r := start(t)
	callback(t, f, url.Values{"code": {"c"}, "state": {r.State}, "iss": {"http://127.0.0.1:9999"}})
	if _, err := f.Wait(waitCtx(t)); err == nil {
		t.Fatal("a code from another issuer was taken")
	}
}

func TestCallbackWithAnErrorIsAnOAuthError(t *testing.T) {
	f, r := start(t)
	callback(t, f, url.Values{"error": {"access_denied"}, "error_description": {"the user said no"}, "state": {r.State}, "iss": {endpoint}})
	_, err := f.Wait(waitCtx(t))
	var oe *OAuthError
	if !errors.As(err, &oe) || oe.Code != "access_denied" {
		t.Fatalf("Wait = %v, want access_denied", err)
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	f, _ := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
}
