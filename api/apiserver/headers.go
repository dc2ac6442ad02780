package apiserver

import (
	"net/http"

	"github.com/cocoonbox/cocoonbox/api/console"
)

// pageHeaders sets the headers every answer of the api carries before its
// handler runs (console.SetPageHeaders: the Content-Security-Policy,
// nosniff, no Referer), so no page of any package goes out without them.
// A page that needs a stricter policy sets its own over it (the GitHub
// sign-in's onward page: default-src 'none').
func pageHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		console.SetPageHeaders(w.Header())
		next.ServeHTTP(w, r)
	})
}
