// Package screenpage is the console's screen page, /cb/boxes/{box}/screen:
// noVNC (npm's @novnc/novnc, vendored with its licence by vendor-novnc,
// served from the api's own origin, no CDN) on the screen's WebSocket
// form (package session, ScreenSocketPath), closing its screen while the
// tab is hidden. Its page has no inline script or style, so it runs under
// a strict Content-Security-Policy. docs/screen.md.
//
// Contract: Idle user boxes (a screen closed while its tab is hidden).
package screenpage

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/shares"
)

//go:embed page.html
var page []byte

//go:embed share.html
var sharePage []byte

//go:embed static
var static embed.FS

// PagePath is the page's route; StaticPath the prefix of its files
// (screen.js, screen.css, novnc/).
const (
	PagePath   = "GET /cb/boxes/{box}/screen"
	StaticPath = "/cb/screen/"
)

// csp allows what the page loads, from its own origin only: its module
// script and noVNC's, its stylesheet, the WebSocket to this host, and the
// canvas's images (noVNC draws JPEG rectangles and its cursor through
// data: and blob: URLs). It replaces the console's policy on this page
// (console.ContentSecurityPolicy, whose default-src 'self' refuses those
// images: the canvas stayed blank under both), and is stricter otherwise.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
	"base-uri 'none'; object-src 'none'; form-action 'none'; frame-ancestors 'none'"

// Mount puts the page (to a signed-in user of the console; the sign-in
// first otherwise) and its files on mux.
func Mount(mux interface{ Handle(string, http.Handler) }, user console.SessionUser) {
	mux.Handle(PagePath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := user(r); !ok {
			http.Redirect(w, r, "/cb/?return_to="+r.URL.Path, http.StatusSeeOther)
			return
		}
		// Never framed nor stored, as every signed-in page of the console.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Cache-Control", "no-store")
		w.Write(page)
	}))
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	serve := http.StripPrefix(StaticPath, http.FileServerFS(files))
	mux.Handle("GET "+StaticPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		serve.ServeHTTP(w, r)
	}))
}

// MountShare puts the share page (shares.PagePath) on mux: the screen of
// the share whose secret is the link's fragment, to anyone who holds the
// link, no sign-in (issue 43, Deliver 4; docs/screen.md, "Shares"). The
// page is the same for every link: the server never sees the fragment,
// so the page itself tells nothing; the share's socket (shares.Socket)
// says, by its close code, whether the secret opens a screen. It runs
// under the screen page's strict policy, and closes its screen while its
// tab is hidden (Contract: Idle user boxes, "The share page does the same
// while its tab is hidden, a tab hidden from the start included").
// Its files are Mount's (StaticPath).
func MountShare(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET "+shares.PagePath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Cache-Control", "no-store")
		w.Write(sharePage)
	}))
}
