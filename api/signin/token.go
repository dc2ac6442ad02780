package signin

import (
	"mime"
	"net/http"
	"net/url"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// The token endpoint (RFC 6749 §3.2, §4.1.3 and §5) for the authorization
// code grant with PKCE (RFC 7636 §4.5): POST /cocoonbox.oauth/token with
// grant_type=authorization_code, code, client_id, redirect_uri and
// code_verifier, form-encoded. The answer is {access_token, token_type:
// "Bearer", scope: "account"}: a device token, with no expires_in (it has
// no expiry) and no refresh token.
//
// Contract: Browser sign-in and device tokens.

// tokenAnswer is the successful response (RFC 6749 §5.1).
type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	Scope       string `json:"scope"`
}

// form reads an OAuth endpoint's form-encoded body (at most 16 KiB), each
// parameter at most once (§3.2: "Request and response parameters MUST NOT
// be included more than once").
func form(w http.ResponseWriter, r *http.Request) (url.Values, *Error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		return nil, &Error{Code: client.ErrInvalidRequest, Description: "send the parameters as application/x-www-form-urlencoded"}
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		return nil, &Error{Code: client.ErrInvalidRequest, Description: "the body is not a form: " + err.Error()}
	}
	for name, v := range r.PostForm {
		if len(v) > 1 {
			return nil, &Error{Code: client.ErrInvalidRequest, Description: name + " is given more than once"}
		}
	}
	return r.PostForm, nil
}

func (h *Handler) token(w http.ResponseWriter, r *http.Request) {
	f, oerr := form(w, r)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	if _, _, basic := r.BasicAuth(); h.agents != nil && (f.Get("grant_type") == "refresh_token" || basic ||
		f.Get("client_id") != "" && agentClient(f["client_id"])) {
		h.agents.ServeHTTP(w, r) // an agent's (OAuth for agents, Tokens)
		return
	}
	if gt := f.Get("grant_type"); gt != "authorization_code" {
		writeOAuthError(w, &Error{Code: client.ErrUnsupportedGrantType, Description: "grant_type " + quote(gt) + " is not supported: it must be authorization_code"})
		return
	}
	// Public clients: the client_id is their whole authentication (§3.2.1).
	fp, ok := client.LookupFirstParty(f.Get("client_id"))
	if !ok {
		writeOAuthError(w, &Error{Code: client.ErrInvalidClient, Description: "client_id " + quote(f.Get("client_id")) + " is not a cocoonbox client"})
		return
	}
	x := Exchange{ClientID: fp.ID, Code: f.Get("code"), RedirectURI: f.Get("redirect_uri"), Verifier: f.Get("code_verifier")}
	// A malformed request changes nothing: the code stays usable.
	switch {
	case x.Code == "":
		oerr = &Error{Code: client.ErrInvalidRequest, Description: "code is missing"}
	case x.RedirectURI == "":
		oerr = &Error{Code: client.ErrInvalidRequest, Description: "redirect_uri is missing"}
	case x.Verifier == "":
		oerr = &Error{Code: client.ErrInvalidRequest, Description: "code_verifier is missing (PKCE is required)"}
	}
	if oerr == nil {
		if err := CheckVerifier(x.Verifier); err != nil {
			oerr = &Error{Code: client.ErrInvalidRequest, Description: err.Error()}
		}
	}
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	secret, oerr, err := h.store.Redeem(r.Context(), x)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	if oerr != nil {
		h.log.InfoContext(r.Context(), "token request refused", "client", fp.ID, "error", oerr.Code, "why", oerr.Description)
		writeOAuthError(w, oerr)
		return
	}
	w.Header().Set("Pragma", "no-cache")
	server.WriteJSON(w, http.StatusOK, tokenAnswer{AccessToken: secret, TokenType: "Bearer", Scope: client.Scope})
}
