package screenpage_test

import (
	"io/fs"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Run(m)) }

// The page runs under a strict CSP: no inline script, no inline style,
// no handler attribute; its script and stylesheet are files of the api's
// origin (the console's layout, issue 41, holds every page to that).
func TestThePageHasNoInlineScriptOrStyle(t *testing.T) {
	page, err := os.ReadFile("page.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>[^<\s]`), // a script with a body
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`\son[a-z]+=`),
		regexp.MustCompile(`(?:src|href)="(?:https?:)?//`), // another origin
	} {
		if loc := bad.FindIndex(page); loc != nil {
			t.Errorf("page.html has %q (%s)", page[loc[0]:loc[1]], bad)
		}
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAll(page, -1) {
		if !strings.Contains(string(tag), ` src="/cb/screen/`) {
			t.Errorf("page.html's %s is not a file of /cb/screen/", tag)
		}
	}
}

// noVNC is vendored with its licence, and pako's with its own.
func TestNoVNCIsVendoredWithItsLicence(t *testing.T) {
	for _, f := range []string{"static/novnc/LICENSE.txt", "static/novnc/docs/LICENSE.MPL-2.0", "static/novnc/vendor/pako/LICENSE", "static/novnc/core/rfb.js"} {
		if _, err := fs.Stat(os.DirFS("."), f); err != nil {
			t.Errorf("%s: %v (run ./vendor-novnc)", f, err)
		}
	}
	lic, _ := os.ReadFile("static/novnc/docs/LICENSE.MPL-2.0")
	if !strings.Contains(string(lic), "Mozilla Public License") {
		t.Error("static/novnc/docs/LICENSE.MPL-2.0 is not the MPL-2.0 the core is under")
	}
}

// The page as the api serves it: a signed-in user gets it with the strict
// CSP, a browser without a session is sent to the sign-in and back, and
// its files are served from the api's origin as JavaScript a module
// script may be, noVNC's too.
func TestThePageAndItsFilesAsServed(t *testing.T) {
	a := apitest.New(t)
	resp, body := a.Session.Send("GET", "/cb/boxes/desk/screen", "", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `src="/cb/screen/screen.js"`) {
		t.Fatalf("the page: %d %s", resp.StatusCode, body)
	}
	csp := strings.Join(resp.Header.Values("Content-Security-Policy"), "; ")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("the page's CSP %q lacks %q", csp, want)
		}
	}
	resp, _ = a.Browser().Send("GET", "/cb/boxes/desk/screen", "", "")
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/cb/?return_to=/cb/boxes/desk/screen" {
		t.Errorf("without a session: %d to %q, want 303 to the sign-in", resp.StatusCode, loc)
	}
	for _, f := range []string{"/cb/screen/screen.js", "/cb/screen/novnc/core/rfb.js", "/cb/screen/novnc/vendor/pako/lib/zlib/inflate.js"} {
		resp, body := a.Browser().Send("GET", f, "", "")
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || len(body) == 0 {
			t.Errorf("%s: %d %q", f, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}
