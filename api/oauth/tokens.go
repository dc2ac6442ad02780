package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/server"
)

// The token endpoint (OAuth 2.1 §3.2, §4.1.3, §4.3; RFC 7636 §4.5; RFC
// 8707 §2.2) for agents: POST /cocoonbox.oauth/token, form-encoded, the
// client_id in the form or as the Basic user name with an empty password
// (public clients: no secret). api/signin serves the path and hands this
// a request whose grant_type is refresh_token or whose client is not
// first-party.
//
//   - authorization_code: code (one use, 60 s), code_verifier (PKCE S256,
//     43 to 128 characters), redirect_uri when given equal to the
//     approved one, resource when given <issuer>/cocoonbox.mcp or under
//     it. A code presented a second time revokes the grant it made.
//   - refresh_token: refresh_token, client_id; resource and scope
//     optional. Each refresh token works once and is replaced (rotation);
//     a used one presented again by its client within RefreshGrace of
//     its use answers the same new pair, and after it revokes the whole
//     grant (its family).
//
// The answer is {access_token (cba_, AccessTTL), token_type Bearer,
// expires_in, refresh_token (cbr_), scope boxes}.
//
// Contract: OAuth for agents, Tokens.

// tokenAnswer is the successful response (OAuth 2.1 §3.2.3).
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"` // none for a client without refresh_token
	Scope        string `json:"scope"`
}

// tokenError is an error of the token and revocation endpoints (§3.2.4).
type tokenError struct{ Code, Description string }

func (e *tokenError) Error() string { return e.Code + ": " + e.Description }

func terr(code, format string, args ...any) *tokenError {
	return &tokenError{Code: code, Description: fmt.Sprintf(format, args...)}
}

// writeTokenError answers e: 401 for invalid_client, 400 otherwise.
func writeTokenError(w http.ResponseWriter, e *tokenError) {
	status := http.StatusBadRequest
	if e.Code == errInvalidClient {
		status = http.StatusUnauthorized
	}
	w.Header().Set("Cache-Control", "no-store")
	server.WriteJSON(w, status, refusal{Error: e.Code, Description: e.Description})
}

// form reads the form-encoded body (at most 16 KiB; api/signin may have
// read it already), each parameter at most once, and the client_id from
// the form or the Basic user name (§2.4.1: a public client sends no
// secret).
func form(w http.ResponseWriter, r *http.Request) (url.Values, string, *tokenError) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return nil, "", terr(errInvalidRequest, "send the parameters as application/x-www-form-urlencoded")
	}
	if r.PostForm == nil {
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			return nil, "", terr(errInvalidRequest, "the body is not a form: %v", err)
		}
	}
	for name, v := range r.PostForm {
		if len(v) > 1 {
			return nil, "", terr(errInvalidRequest, "%s is given more than once", name)
		}
	}
	clientID := r.PostForm.Get("client_id")
	if user, pass, ok := r.BasicAuth(); ok {
		id, err := url.QueryUnescape(user) // RFC 6749 §2.3.1: form-encoded
		if err != nil || id == "" {
			return nil, "", terr(errInvalidClient, "the Basic user name is not a client_id")
		}
		if pass != "" {
			return nil, "", terr(errInvalidClient, "a public client has no secret: send an empty password or the client_id in the form")
		}
		if clientID != "" && clientID != id {
			return nil, "", terr(errInvalidRequest, "client_id differs between the form and the Basic user name")
		}
		clientID = id
	}
	return r.PostForm, clientID, nil
}

// token is POST /cocoonbox.oauth/token for agents.
func (a *Agents) token(w http.ResponseWriter, r *http.Request) {
	f, clientID, e := form(w, r)
	if e == nil && clientID == "" {
		e = terr(errInvalidRequest, "client_id is missing (in the form or as the Basic user name)")
	}
	if e == nil && f.Get("resource") != "" {
		if err := a.checkResource(f.Get("resource")); err != nil {
			e = terr(errInvalidTarget, "%v", err)
		}
	}
	if e == nil && f.Get("scope") != "" && f.Get("scope") != Scope {
		e = terr(errInvalidScope, "scope %s is not allowed: the one scope is %s", quote(f.Get("scope")), Scope)
	}
	if e != nil {
		writeTokenError(w, e)
		return
	}
	var ans tokenAnswer
	var err error
	switch gt := f.Get("grant_type"); gt {
	case "authorization_code":
		ans, e, err = a.exchange(r.Context(), f, clientID)
	case "refresh_token":
		ans, e, err = a.refresh(r.Context(), f, clientID)
	default:
		e = terr(errUnsupportedGrantType, "grant_type %s is not supported: authorization_code or refresh_token", quote(gt))
	}
	if err != nil {
		a.serverError(w, r, err)
		return
	}
	if e != nil {
		a.log.InfoContext(r.Context(), "agent token request refused", "client", clientID, "error", e.Code, "why", e.Description)
		writeTokenError(w, e)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	server.WriteJSON(w, http.StatusOK, ans)
}

// checkVerifier is RFC 7636 §4.1's code_verifier: 43 to 128 characters
// of A-Z a-z 0-9 - . _ ~.
func checkVerifier(v string) error {
	if len(v) < 43 || len(v) > 128 {
		return fmt.Errorf("code_verifier must be 43 to 128 characters (RFC 7636 §4.1), got %d", len(v))
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return fmt.Errorf("code_verifier may hold only A-Z a-z 0-9 - . _ ~ (RFC 7636 §4.1), found %q at byte %d", c, i)
		}
	}
	return nil
}

// s256 is RFC 7636 §4.2's S256 challenge of a verifier.
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// exchange redeems an authorization code (§4.1.3). A malformed request
// changes nothing; a well-formed one spends the code whatever its
// outcome, and a code spent before revokes the grant it made.
func (a *Agents) exchange(ctx context.Context, f url.Values, clientID string) (tokenAnswer, *tokenError, error) {
	code, verifier := f.Get("code"), f.Get("code_verifier")
	switch {
	case code == "":
		return tokenAnswer{}, terr(errInvalidRequest, "code is missing"), nil
	case verifier == "":
		return tokenAnswer{}, terr(errInvalidRequest, "code_verifier is missing (PKCE is required)"), nil
	}
	if err := checkVerifier(verifier); err != nil {
		return tokenAnswer{}, terr(errInvalidRequest, "%v", err), nil
	}
	if !wellFormed(code, CodePrefix) {
		return tokenAnswer{}, terr(errInvalidGrant, "the code is unknown, used or expired"), nil
	}
	s := a.grants
	d := s.digest(code)
	now := s.Now()
	var ans tokenAnswer
	var refused *tokenError
	var userID string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var c struct {
			userID, clientID, clientName, host, redirect, challenge string
			maxBoxes, maxRunning, days                              int
			expires                                                 time.Time
			used                                                    *time.Time
			grantID                                                 *string
			refresh                                                 bool
		}
		err := tx.QueryRow(ctx, `SELECT user_id::text, client_id, client_name, verified_host, redirect_uri, code_challenge,
		    max_boxes, max_running, days, expires_at, used_at, grant_id, refresh FROM oauth_codes WHERE digest = $1 FOR UPDATE`, d[:]).
			Scan(&c.userID, &c.clientID, &c.clientName, &c.host, &c.redirect, &c.challenge, &c.maxBoxes, &c.maxRunning, &c.days,
				&c.expires, &c.used, &c.grantID, &c.refresh)
		if errors.Is(err, pgx.ErrNoRows) {
			refused = terr(errInvalidGrant, "the code is unknown, used or expired")
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the code: %w", err)
		}
		userID = c.userID
		if c.used != nil {
			// OAuth 2.1 §4.1.3: a code used twice may have been stolen;
			// what it gave the first time is revoked.
			refused = terr(errInvalidGrant, "the code was used before: the grant it made is revoked")
			if c.grantID == nil {
				return nil
			}
			if _, err := tx.Exec(ctx, `UPDATE oauth_grants SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, *c.grantID, now); err != nil {
				return fmt.Errorf("revoke the grant of a reused code: %w", err)
			}
			return notify(ctx, tx, c.userID)
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_codes SET used_at = $2 WHERE digest = $1`, d[:], now); err != nil {
			return fmt.Errorf("spend the code: %w", err)
		}
		switch {
		case !now.Before(c.expires):
			refused = terr(errInvalidGrant, "the code expired (a code lives %s)", CodeTTL)
		case c.clientID != clientID:
			refused = terr(errInvalidGrant, "the code was issued to another client")
		case f.Get("redirect_uri") != "" && f.Get("redirect_uri") != c.redirect:
			refused = terr(errInvalidGrant, "redirect_uri differs from the authorization request's")
		case subtle.ConstantTimeCompare([]byte(s256(verifier)), []byte(c.challenge)) != 1:
			refused = terr(errInvalidGrant, "code_verifier does not match the code_challenge")
		}
		if refused != nil {
			return nil
		}
		gid := newGrantID()
		expires := now.AddDate(0, 0, c.days)
		if _, err := tx.Exec(ctx, `INSERT INTO oauth_grants (id, user_id, client_id, client_name, verified_host, redirect_uri,
		    max_boxes, max_running, created_at, expires_at, last_used_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $9)`,
			gid, c.userID, c.clientID, c.clientName, c.host, c.redirect, c.maxBoxes, c.maxRunning, now, expires); err != nil {
			return fmt.Errorf("store the grant: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_codes SET grant_id = $2 WHERE digest = $1`, d[:], gid); err != nil {
			return fmt.Errorf("spend the code: %w", err)
		}
		if ans, err = s.issue(ctx, tx, gid, now, expires, c.refresh); err != nil {
			return err
		}
		return notify(ctx, tx, c.userID)
	})
	if err != nil {
		return tokenAnswer{}, nil, fmt.Errorf("exchange a code: %w", err)
	}
	if userID != "" {
		if err := s.Reload(ctx, userID); err != nil {
			return tokenAnswer{}, nil, err
		}
	}
	return ans, refused, nil
}

// refresh rotates a refresh token (§4.3, §4.3.1): the presented one is
// spent and a new pair answered; one spent before answers that same pair
// within RefreshGrace of its use, and revokes its grant after it.
func (a *Agents) refresh(ctx context.Context, f url.Values, clientID string) (tokenAnswer, *tokenError, error) {
	rt := f.Get("refresh_token")
	if rt == "" {
		return tokenAnswer{}, terr(errInvalidRequest, "refresh_token is missing"), nil
	}
	if !wellFormed(rt, RefreshPrefix) {
		return tokenAnswer{}, terr(errInvalidGrant, "the refresh token is unknown, used or revoked"), nil
	}
	s := a.grants
	d := s.digest(rt)
	now := s.Now()
	var ans tokenAnswer
	var refused *tokenError
	var userID string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var gid, gclient string
		var used, revoked, disabled *time.Time
		var gexpires time.Time
		var sealed []byte
		err := tx.QueryRow(ctx, `SELECT g.id, g.user_id::text, g.client_id, g.expires_at, g.revoked_at, u.disabled_at, t.used_at, t.successor
		    FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN users u ON u.id = g.user_id
		   WHERE t.digest = $1 AND t.kind = 'refresh' FOR UPDATE OF t, g`, d[:]).
			Scan(&gid, &userID, &gclient, &gexpires, &revoked, &disabled, &used, &sealed)
		if errors.Is(err, pgx.ErrNoRows) {
			refused = terr(errInvalidGrant, "the refresh token is unknown, used or revoked")
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the refresh token: %w", err)
		}
		switch {
		case gclient != clientID:
			refused = terr(errInvalidGrant, "the refresh token was issued to another client")
		case revoked != nil || disabled != nil || !now.Before(gexpires):
			refused = terr(errInvalidGrant, "the grant has ended: the agent must sign in again")
		case used != nil && sealed != nil && now.Sub(*used) < RefreshGrace:
			// The grace window: the same client again within RefreshGrace
			// (a concurrent refresh, a retry after a lost answer) gets the
			// pair the first use answered.
			next, err := s.open(rt, sealed)
			if err != nil {
				return fmt.Errorf("open the refreshed pair: %w", err)
			}
			expiresIn := int(next.AccessExpires.Sub(now).Seconds())
			ans = tokenAnswer{AccessToken: next.AccessToken, TokenType: "Bearer", ExpiresIn: max(expiresIn, 0), RefreshToken: next.RefreshToken, Scope: Scope}
			userID = "" // nothing changed: no reload
			return nil
		case used != nil:
			// Rotation's replay detection (OAuth 2.1 §4.3.1): one of two
			// holders is not the client; the whole family ends.
			refused = terr(errInvalidGrant, "the refresh token was used before: the grant is revoked")
			if _, err := tx.Exec(ctx, `UPDATE oauth_grants SET revoked_at = $2 WHERE id = $1`, gid, now); err != nil {
				return fmt.Errorf("revoke the grant of a replayed refresh token: %w", err)
			}
			return notify(ctx, tx, userID)
		}
		if refused != nil {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_grants SET last_used_at = $2 WHERE id = $1`, gid, now); err != nil {
			return fmt.Errorf("note the grant's use: %w", err)
		}
		// The access tokens this one replaces expire on their own.
		if ans, err = s.issue(ctx, tx, gid, now, gexpires, true); err != nil {
			return err
		}
		sealed, err = s.seal(rt, successor{AccessToken: ans.AccessToken, RefreshToken: ans.RefreshToken,
			AccessExpires: now.Add(time.Duration(ans.ExpiresIn) * time.Second)})
		if err != nil {
			return fmt.Errorf("seal the refreshed pair: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_tokens SET used_at = $2, successor = $3 WHERE digest = $1`, d[:], now, sealed); err != nil {
			return fmt.Errorf("spend the refresh token: %w", err)
		}
		return notify(ctx, tx, userID)
	})
	if err != nil {
		return tokenAnswer{}, nil, fmt.Errorf("refresh: %w", err)
	}
	if userID != "" {
		if err := s.Reload(ctx, userID); err != nil {
			return tokenAnswer{}, nil, err
		}
	}
	return ans, refused, nil
}

// issue stores a new access token of grant gid, which ends at
// grantExpires, and with refresh a refresh token too, in tx.
func (s *Grants) issue(ctx context.Context, tx pgx.Tx, gid string, now, grantExpires time.Time, refresh bool) (tokenAnswer, error) {
	at := newSecret(AccessPrefix)
	atExpires := now.Add(AccessTTL)
	if grantExpires.Before(atExpires) {
		atExpires = grantExpires
	}
	ad := s.digest(at)
	if _, err := tx.Exec(ctx, `INSERT INTO oauth_tokens (digest, grant_id, kind, created_at, expires_at) VALUES ($1, $2, 'access', $3, $4)`,
		ad[:], gid, now, atExpires); err != nil {
		return tokenAnswer{}, fmt.Errorf("store the access token: %w", err)
	}
	ans := tokenAnswer{AccessToken: at, TokenType: "Bearer", ExpiresIn: int(atExpires.Sub(now).Seconds()), Scope: Scope}
	if !refresh {
		return ans, nil
	}
	ans.RefreshToken = newSecret(RefreshPrefix)
	rd := s.digest(ans.RefreshToken)
	if _, err := tx.Exec(ctx, `INSERT INTO oauth_tokens (digest, grant_id, kind, created_at, expires_at) VALUES ($1, $2, 'refresh', $3, $4)`,
		rd[:], gid, now, grantExpires); err != nil {
		return tokenAnswer{}, fmt.Errorf("store the refresh token: %w", err)
	}
	return ans, nil
}

// newGrantID is cbg_ and 24 hex digits.
func newGrantID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "cbg_" + hex.EncodeToString(b)
}
