package console

import (
	_ "embed"
	"html/template"
	"net/http"
	"strings"
)

//go:embed consent.html
var consentHTML string

// ConsentPage is a consent page of GET /cb/oauth/authorize (api/signin's
// for its first-party clients, api/oauth's for agents): the main they
// share, consent.html, with the slots one of them defines (its title,
// flavor and texts, its consent section; consent.html lists them), in
// the console's layout, with assets/consent.js as its script.
type ConsentPage struct{ tmpl *template.Template }

// NewConsentPage parses page, a consent page's slots, with consent.html.
// It panics when either does not parse, as template.Must does, for pages
// embedded in the binary.
func NewConsentPage(page string) *ConsentPage {
	t := template.Must(template.New("consent-page").Parse(consentHTML))
	template.Must(t.New("page").Parse(page))
	return &ConsentPage{tmpl: t}
}

// SetConsentHeaders sets what every answer of the authorization endpoint
// carries, a redirect too: every page's (SetPageHeaders, which the api
// sets anyway), and the consent is not framed by an old browser that
// reads X-Frame-Options only (clickjacking on Allow), nor stored.
func SetConsentHeaders(h http.Header) {
	SetPageHeaders(h)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

// Write answers with the page and status; data has .Error (the request's
// error, or "") and .Query (its raw query) beside the page's own fields.
func (p *ConsentPage) Write(w http.ResponseWriter, status int, data any) error {
	var title, main, refused strings.Builder
	for _, t := range []struct {
		name string
		out  *strings.Builder
	}{{"title", &title}, {"consent", &main}, {"refused-request", &refused}} {
		if err := p.tmpl.ExecuteTemplate(t.out, t.name, data); err != nil {
			return err
		}
	}
	page := Page{Title: title.String(), Narrow: true, SessionByScript: true, Main: template.HTML(main.String()), Script: Asset{Name: "consent.js"},
		NoScript: refused.Len() > 0}
	return writeLayout(w, status, layoutData{Page: page, Main: page.Main, Data: "null"})
}
