package apitest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// New answers a served api: alice signed in to the console, a browser
// without a session refused, OAuth's discovery on at the URL, Boxes
// without a supervisor; WithoutOAuth switches the discovery off.
func TestNewServesTheApiWithASignedInUser(t *testing.T) {
	t.Parallel()
	a := apitest.New(t)
	if resp, body := a.Session.Send("GET", "/cb/api/me", "", ""); resp.StatusCode != 200 || !strings.Contains(body, `"name":"alice"`) {
		t.Fatalf("GET /cb/api/me signed in: %d %s", resp.StatusCode, body)
	}
	if resp, body := a.Browser().Send("GET", "/cb/api/me", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /cb/api/me without a session: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, body := a.Browser().Send("GET", "/.well-known/oauth-authorization-server", "", ""); resp.StatusCode != 200 || !strings.Contains(body, a.URL) {
		t.Fatalf("OAuth discovery: %d %s", resp.StatusCode, body)
	}
	if _, err := a.Boxes.Service(); !errors.Is(err, apitest.ErrNoSupervisor) {
		t.Fatalf("the box service: %v, want ErrNoSupervisor", err)
	}
	if n := a.PersonalToken(a.User.ID); !strings.HasPrefix(string(n), tokens.Prefix) {
		t.Fatalf("the personal token %q", n)
	}
	var held int
	if err := a.DB.Pool.QueryRow(context.Background(), "SELECT count(*) FROM users").Scan(&held); err != nil || held != 1 {
		t.Fatalf("users in the database: %d, %v", held, err)
	}

	off := apitest.New(t, apitest.WithoutOAuth())
	if resp, _ := off.Browser().Send("GET", "/.well-known/oauth-authorization-server", "", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("OAuth discovery with OAuth off: %d, want 404", resp.StatusCode)
	}
	if off.Grants != nil {
		t.Fatal("grants with OAuth off")
	}
}

// A middleware given to apiserver.New (WithMiddleware) sees a call of each
// surface the api serves: the health check, the console, signup, OAuth's
// discovery, a gRPC service and the control MCP. With every api test on
// apitest.New (TestNoTestBuildsTheAPIsServerByHand), what New adds to the
// chain is in every api test package.
func TestAMiddlewareOfApiserverSeesEveryRoute(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]bool{}
	a := apitest.New(t, apitest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[r.URL.Path] = true
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}))
	paths := []string{"/healthz", "/cb/api/me", "/cb/queue", "/.well-known/oauth-authorization-server"}
	for _, p := range paths {
		a.Session.Send("GET", p, "", "")
	}
	tok := a.PersonalToken(a.User.ID)
	acct := controlv1connect.NewAccountClient(http.DefaultClient, a.URL, connect.WithInterceptors(client.BearerInterceptor(string(tok))))
	if _, err := acct.ListDevices(context.Background(), connect.NewRequest(&controlv1.ListDevicesRequest{})); err != nil {
		t.Fatalf("ListDevices with alice's personal token: %v", err)
	}
	a.Session.Send("POST", client.MCPPath, "application/json", `{}`)
	paths = append(paths, controlv1connect.AccountListDevicesProcedure, client.MCPPath)
	mu.Lock()
	defer mu.Unlock()
	for _, p := range paths {
		if !seen[p] {
			t.Errorf("the middleware did not see %s (it saw %v)", p, seen)
		}
	}
}
