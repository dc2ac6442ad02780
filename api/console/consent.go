package console

import (
	_ "embed"
	"html/template"
	"net/http"
)

//go:embed consent.html
var consentHTML string

// ConsentPage is a consent page of GET /cb/oauth/authorize (api/signin's
// for its first-party clients, api/oauth's for agents): the page they
// share, consent.html, with the slots one of them defines (its title, its
// texts, its consent section and its script; consent.html lists them).
type ConsentPage struct{ tmpl *template.Template }

// NewConsentPage parses page, a consent page's slots, with consent.html.
// It panics when either does not parse, as template.Must does, for pages
// embedded in the binary.
func NewConsentPage(page string) *ConsentPage {
	t := template.Must(template.New("consent").Parse(consentHTML))
	template.Must(t.New("page").Parse(page))
	return &ConsentPage{tmpl: t}
}

// SetConsentHeaders sets what every answer of the authorization endpoint
// carries, a redirect too: the consent must not be framed by another site
// (clickjacking on Allow), nor stored, nor named in a Referer.
func SetConsentHeaders(h http.Header) {
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "frame-ancestors 'none'")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
}

// Write answers with the page and status; data has .Error (the request's
// error, or "") and .Query (its raw query) beside the page's own fields.
func (p *ConsentPage) Write(w http.ResponseWriter, status int, data any) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	return p.tmpl.Execute(w, data)
}
