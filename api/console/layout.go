package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// The console's one layout (docs/console.md): every page of /cb/ is a
// Page rendered through pages/layout.html, with the one stylesheet and
// script of assets/ beside its own script, all served as files of this
// origin so the Content-Security-Policy (api/apiserver) forbids inline
// script and style.

//go:embed assets
var assetFiles embed.FS

// Asset is a file the console serves at /cb/assets/Name: a page's script.
type Asset struct {
	Name string // "keys.js": a file name, no slash
	Body []byte
}

// Page is a page of the console, rendered through its layout.
type Page struct {
	Title string // the <title>, "Keys"
	// Main is the content of the page's <main>: trusted HTML of the
	// binary (an embedded file), never a user's text.
	Main template.HTML
	// Script is the page's own script (zero for none), loaded after the
	// console's shared one (assets/console.js).
	Script Asset
	// Narrow keeps a form's lines short (its fields at most 30rem) in the
	// page's one width.
	Narrow bool
	// SessionByScript is a page drawn before the api knows its session
	// (the consent pages): the header's name and Sign out are there
	// hidden, and the page's script shows them once it knows the user,
	// as GitHub's consent page names the account with its way out.
	SessionByScript bool
	// SignedOut serves the page without a session too (the signup queue's);
	// otherwise a request without one goes to the sign-in and back.
	SignedOut bool
	// AdminsOnly answers a signed-in non-admin 403 "Admins only".
	AdminsOnly bool
	// Nav is the path of the navigation entry the page stands under
	// ("" for its own path).
	Nav string
	// NoScript loads no script at all, the console's neither (a consent
	// request's error page: nothing to do there).
	NoScript bool
}

// navOrder is the navigation's entries in order; an entry shows when a
// section of its path was added (AddSection), Home always, Admin to admins only. A section that is not built is left out
// rather than linked to a page that says so.
var navOrder = []struct{ Title, Path string }{
	{"Home", "/cb/"}, {"Boxes", "/cb/boxes"}, {"Schedules", "/cb/schedules"}, {"Usage", "/cb/usage"}, {"Keys", "/cb/keys"}, {"Connect", "/cb/connect"}, {"Agents", "/cb/agents"}, {"Devices", "/cb/devices"},
	{"Connected accounts", "/cb/identities"}, {"Account", "/cb/account"}, {"Admin", "/cb/admin"},
}

type navEntry struct {
	Title, Path string
	Current     bool
}

// layoutData is what pages/layout.html gets.
type layoutData struct {
	Page Page
	User *users.User
	Nav  []navEntry
	Main template.HTML
	Data string // JSON for the page's script
}

// nav is u's navigation on a page under current.
func (c *Console) nav(u *users.User, current string) []navEntry {
	if u == nil {
		return nil
	}
	var out []navEntry
	for _, e := range navOrder {
		if e.Path != "/cb/" && !c.hasSection(e.Path, u.Admin) {
			continue
		}
		out = append(out, navEntry{Title: e.Title, Path: e.Path, Current: e.Path == current})
	}
	return out
}

func (c *Console) hasSection(p string, admin bool) bool {
	for _, s := range c.sections {
		if s.Path == p && (admin || !s.AdminsOnly) {
			return true
		}
	}
	return false
}

// Render writes p for u (nil: signed out) with status; data, when not
// nil, goes to the page's script as JSON (document.body.dataset.page).
// Every page's headers beyond these (the CSP, nosniff, Referrer-Policy)
// are api/apiserver's, for every answer.
func (c *Console) Render(w http.ResponseWriter, r *http.Request, status int, p Page, u *users.User, data any) {
	js, err := json.Marshal(data)
	if err != nil {
		c.log.ErrorContext(r.Context(), "render "+p.Title, "err", err)
		js = []byte("null")
	}
	current := p.Nav
	if current == "" {
		current = r.URL.Path
	}
	if err := writeLayout(w, status, layoutData{Page: p, User: u, Nav: c.nav(u, current), Main: p.Main, Data: string(js)}); err != nil {
		c.log.ErrorContext(r.Context(), "render "+p.Title, "err", err)
	}
}

// writeLayout answers the page of d with status, never stored (a shared
// machine's cache keeps no signed-in page) nor framed; when the layout
// fails, 500.
func writeLayout(w http.ResponseWriter, status int, d layoutData) error {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, "layout", d); err != nil {
		http.Error(w, "the page failed to render; try again", http.StatusInternalServerError)
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY") // for a browser that reads no CSP
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// Serve serves p at its path: to a signed-in user (an admin when
// AdminsOnly), or to anyone when SignedOut; without a session the
// browser goes to the sign-in, which comes back.
func (c *Console) Serve(p Page) http.Handler {
	c.addAsset(p.Script)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := c.Session(r)
		switch {
		case !ok && p.SignedOut:
			c.Render(w, r, http.StatusOK, p, nil, nil)
		case !ok:
			http.Redirect(w, r, "/cb/?return_to="+r.URL.Path, http.StatusSeeOther)
		case p.AdminsOnly && !u.Admin:
			c.Render(w, r, http.StatusForbidden, Page{Title: "Admins only", Narrow: true, Nav: "/cb/",
				Main: `<h1>Admins only</h1><p class="muted">This page is for the service's admins.</p>`}, &u, nil)
		default:
			c.Render(w, r, http.StatusOK, p, &u, nil)
		}
	})
}

// asset is a file of /cb/assets/ with its type and ETag.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

func newAsset(name string, body []byte) asset {
	sum := sha256.Sum256(body)
	types := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
	return asset{body: body, contentType: types[path.Ext(name)], etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// baseAssets are the files of assets/: the layout's and the console's
// own pages'.
var baseAssets = func() map[string]asset {
	out := map[string]asset{}
	entries, err := fs.ReadDir(assetFiles, "assets")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		body, err := assetFiles.ReadFile("assets/" + e.Name())
		if err != nil {
			panic(err)
		}
		out[e.Name()] = newAsset(e.Name(), body)
	}
	return out
}()

// loadAssets starts c.assets with the console's own files.
func (c *Console) loadAssets() {
	c.assets = map[string]asset{}
	for name, a := range baseAssets {
		c.assets[name] = a
	}
}

// Assets serves the console's own files (the layout's stylesheet and
// script, the consent page's script, the favicon) at GET
// /cb/assets/{name}, for a server that serves the consent page without a
// Console (api/signin's and api/oauth's own tests); Console.Mount serves
// them and the sections' scripts.
func Assets() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveAsset(w, r, baseAssets) })
}

// addAsset serves a's file; it panics on a name that is not a plain file
// name of a known type, or one taken by another file: pages of the binary.
func (c *Console) addAsset(a Asset) {
	if a.Name == "" {
		return
	}
	if strings.ContainsAny(a.Name, "/\\") || newAsset(a.Name, nil).contentType == "" {
		panic(fmt.Sprintf("console: asset %q: give a file name ending .js, .css or .svg", a.Name))
	}
	if old, ok := c.assets[a.Name]; ok && !bytes.Equal(old.body, a.Body) {
		panic(fmt.Sprintf("console: asset %q is served already", a.Name))
	}
	c.assets[a.Name] = newAsset(a.Name, a.Body)
}

// serveAsset is GET /cb/assets/{name}: revalidated each time (no-cache
// with an ETag), so a new binary's file is never mixed with an old page.
func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request) { serveAsset(w, r, c.assets) }

func serveAsset(w http.ResponseWriter, r *http.Request, assets map[string]asset) {
	a, ok := assets[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", a.etag)
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Write(a.body)
}
