package console_test

import (
	"github.com/cocoonbox/cocoonbox/api/console"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Every section's page (Devices, Keys, Agents) is neither framed nor
// stored: the Devices and Keys pages went out without no-store and the
// CSP frame-ancestors (only Agents set them, by hand).
func TestASectionsPageIsNeverFramedNorStored(t *testing.T) {
	signedIn := console.SessionUser(func(*http.Request) (string, bool) { return "u1", true })
	rec := httptest.NewRecorder()
	signedIn.Page("/cb/devices", []byte("<p>devices</p>"), nil).ServeHTTP(rec, httptest.NewRequest("GET", "/cb/devices", nil))
	h := rec.Result().Header
	if rec.Code != 200 || h.Get("X-Frame-Options") != "DENY" || h.Get("Content-Security-Policy") != "frame-ancestors 'none'" || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("the page answered %d with %v", rec.Code, h)
	}
	signedOut := console.SessionUser(func(*http.Request) (string, bool) { return "", false })
	rec = httptest.NewRecorder()
	signedOut.Page("/cb/keys", nil, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/cb/keys", nil))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/cb/?return_to=/cb/keys" {
		t.Fatalf("signed out: %d %v", rec.Code, rec.Header())
	}
}
