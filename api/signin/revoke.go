package signin

import (
	"net/http"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/client"
)

// Token revocation (RFC 7009 §2): POST /cocoonbox.oauth/revoke with token
// (and optionally token_type_hint and client_id), form-encoded. A device
// token is revoked at once on every api, and the calls open on it end. The
// answer is 200 also for a token the api does not know (§2.2), and a
// personal token is left alone: only the console and Account.RevokeToken
// revoke that one.
//
// Contract: Browser sign-in and device tokens.
func (h *Handler) revokeToken(w http.ResponseWriter, r *http.Request) {
	f, oerr := form(w, r)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	if tok := f.Get("token"); h.agents != nil && (strings.HasPrefix(tok, "cba_") || strings.HasPrefix(tok, "cbr_")) {
		h.agents.ServeHTTP(w, r) // an agent's token (OAuth for agents)
		return
	}
	if id := f.Get("client_id"); id != "" {
		if _, ok := client.LookupFirstParty(id); !ok {
			writeOAuthError(w, &Error{Code: client.ErrInvalidClient, Description: "client_id " + quote(id) + " is not a cocoonbox client"})
			return
		}
	}
	token := f.Get("token")
	if token == "" {
		writeOAuthError(w, &Error{Code: client.ErrInvalidRequest, Description: "token is missing"})
		return
	}
	if err := h.revoke(r.Context(), token); err != nil {
		h.serverError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
