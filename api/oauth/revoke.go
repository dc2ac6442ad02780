package oauth

import (
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"
)

// Token revocation (RFC 7009 §2) for agents: POST /cocoonbox.oauth/revoke
// with token (an access token cba_ or a refresh token cbr_), and
// token_type_hint and client_id optional, form-encoded (client_id also as
// the Basic user name). Either token revokes its whole grant on every api
// at once (§2.1 allows it for an access token, and the contract ends a
// grant the same way from every door): its tokens stop and its open MCP
// exchanges end. The answer is 200 also for a token the api does not know
// (§2.2). A token of another client than client_id is refused. api/signin
// serves the path and hands this the cba_ and cbr_ tokens.
//
// Contract: OAuth for agents, The user (a revoke at /cocoonbox.oauth/revoke).
func (a *Agents) revoke(w http.ResponseWriter, r *http.Request) {
	f, clientID, e := form(w, r)
	if e == nil && f.Get("token") == "" {
		e = terr(errInvalidRequest, "token is missing")
	}
	if e != nil {
		writeTokenError(w, e)
		return
	}
	tok := f.Get("token")
	if wellFormed(tok, AccessPrefix) || wellFormed(tok, RefreshPrefix) {
		d := a.grants.digest(tok)
		var gid, userID, gclient string
		err := a.grants.pool.QueryRow(r.Context(), `SELECT g.id, g.user_id::text, g.client_id FROM oauth_tokens t
		    JOIN oauth_grants g ON g.id = t.grant_id WHERE t.digest = $1`, d[:]).Scan(&gid, &userID, &gclient)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			a.serverError(w, r, err)
			return
		case clientID != "" && clientID != gclient:
			writeTokenError(w, terr(errInvalidGrant, "the token was issued to another client"))
			return
		default:
			if err := a.grants.Revoke(r.Context(), userID, gid); err != nil {
				a.serverError(w, r, err)
				return
			}
			a.log.InfoContext(r.Context(), "agent grant revoked by its client", "user", userID, "grant", gid, "client", gclient)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
