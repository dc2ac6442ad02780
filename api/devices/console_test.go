package devices

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// console serves the console calls for the user whose id is in X-User (the
// session cookie is package console's; its own tests and the browser test
// cover it).
func (f *fixture) console() (http.Handler, *int) {
	cleared := 0
	mux := http.NewServeMux()
	session := func(r *http.Request) (string, bool) { u := r.Header.Get("X-User"); return u, u != "" }
	NewConsole(f.store, session, func(http.ResponseWriter) { cleared++ }, slog.New(slog.DiscardHandler)).Mount(mux)
	return mux, &cleared
}

func call(h http.Handler, method, path, user string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Contract: GET /cb/api/devices: id, client, label, created_at, used_at;
// DELETE /cb/api/devices/{id} revokes one at once, 404 for a device of
// another user or one already gone.
func TestConsoleListsAndRevokesDevices(t *testing.T) {
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	id, _ := f.device(alice, "laptop")
	bobs, _ := f.device(bob, "bob's")
	h, _ := f.console()

	rec := call(h, "GET", "/cb/api/devices", alice)
	var list []map[string]any
	json.Unmarshal(rec.Body.Bytes(), &list)
	if rec.Code != 200 || len(list) != 1 || list[0]["id"] != id || list[0]["label"] != "laptop" || list[0]["client"] != "cocoonbox-cli" {
		t.Fatalf("GET: %d %s", rec.Code, rec.Body)
	}
	for _, key := range []string{"id", "client", "label", "created_at", "used_at"} {
		if _, ok := list[0][key]; !ok {
			t.Fatalf("GET: no %s in %v", key, list[0])
		}
	}
	if rec := call(h, "DELETE", "/cb/api/devices/"+bobs, alice); rec.Code != 404 {
		t.Fatalf("DELETE of bob's device by alice: %d", rec.Code)
	}
	if rec := call(h, "DELETE", "/cb/api/devices/"+id, alice); rec.Code != 204 {
		t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
	}
	if rec := call(h, "DELETE", "/cb/api/devices/"+id, alice); rec.Code != 404 {
		t.Fatalf("DELETE of a device gone: %d", rec.Code)
	}
	if rec := call(h, "GET", "/cb/api/devices", alice); rec.Body.String() != "[]\n" {
		t.Fatalf("GET after the revoke: %s", rec.Body)
	}
}

func TestConsoleCallsNeedASession(t *testing.T) {
	f := newFixture(t)
	h, cleared := f.console()
	for _, c := range [][2]string{{"GET", "/cb/api/devices"}, {"DELETE", "/cb/api/devices/dev_0000000000000000"}, {"POST", "/cb/api/me/sign-out-everywhere"}} {
		if rec := call(h, c[0], c[1], ""); rec.Code != 401 {
			t.Errorf("%s %s without a session: %d", c[0], c[1], rec.Code)
		}
	}
	if *cleared != 0 {
		t.Fatal("a call without a session cleared a cookie")
	}
}

// Contract: POST /cb/api/me/sign-out-everywhere: 204, the session cookie
// cleared, the personal token and every device token gone; other users untouched.
func TestConsoleSignOutEverywhere(t *testing.T) {
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	f.device(alice, "laptop")
	f.device(alice, "desk")
	f.device(bob, "bob's")
	h, cleared := f.console()
	// A form another page of this host could send is refused, and changes nothing.
	form := httptest.NewRequest("POST", "/cb/api/me/sign-out-everywhere", strings.NewReader("x=1"))
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	form.Header.Set("X-User", alice)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, form)
	if list, _ := f.store.List(f.ctx, alice); rec.Code != http.StatusUnsupportedMediaType || len(list) != 2 {
		t.Fatalf("a form post: %d, alice has %d devices; want 415 and both kept", rec.Code, len(list))
	}
	if rec := call(h, "POST", "/cb/api/me/sign-out-everywhere", alice); rec.Code != 204 || *cleared != 1 {
		t.Fatalf("sign out everywhere: %d, cookie cleared %d times", rec.Code, *cleared)
	}
	if list, _ := f.store.List(f.ctx, alice); len(list) != 0 {
		t.Fatalf("alice still has %d devices", len(list))
	}
	if list, _ := f.store.List(f.ctx, bob); len(list) != 1 {
		t.Fatal("bob's device is gone")
	}
}
