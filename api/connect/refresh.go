package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"

	"github.com/cocoonbox/cocoonbox/api/seal"
)

// RefreshBefore is how much of an access token must be left for it to be
// used as it is (Contract: Connect, Refresh).
const RefreshBefore = 5 * time.Minute

// ErrNeedsReconnect: the grant was refused for good (invalid_grant or
// GitHub's bad_refresh_token at a refresh, or a 401 after a refresh); it
// is marked needs_reconnect and the user must connect again. It is an
// ErrUpstream.
var ErrNeedsReconnect = fmt.Errorf("%w refused the grant: reconnect it", ErrUpstream)

// errUnauthorized: the server answered 401 to the grant's credential.
var errUnauthorized = errors.New("401 Unauthorized")

// use runs do with c's credential (Contract: Connect, Refresh): an OAuth
// grant's access token refreshed first when less than RefreshBefore of it
// is left, and refreshed once more when do sees a 401; a second 401 sets
// needs_reconnect (ErrNeedsReconnect).
func (b *Broker) use(ctx context.Context, user string, c Connector, do func(Custom) error) error {
	cu, s, err := b.custom(ctx, user, c)
	if err != nil {
		return err
	}
	if s.OAuth == nil {
		return do(cu)
	}
	if !s.OAuth.Expiry.IsZero() && s.OAuth.Expiry.Before(b.now().Add(RefreshBefore)) {
		if cu, err = b.refresh(ctx, user, c, s.OAuth.AccessToken); err != nil {
			return err
		}
	}
	err = do(cu)
	if !errors.Is(err, errUnauthorized) {
		return err
	}
	stale := strings.TrimPrefix(cu.Key, "Bearer ")
	if cu, err = b.refresh(ctx, user, c, stale); err != nil {
		return err
	}
	if err = do(cu); errors.Is(err, errUnauthorized) {
		b.needsReconnect(ctx, c)
		return fmt.Errorf("%s: %w (a 401 after a refresh)", c.ID, ErrNeedsReconnect)
	}
	return err
}

func (b *Broker) needsReconnect(ctx context.Context, c Connector) {
	_, _ = b.pool.Exec(context.WithoutCancel(ctx), "UPDATE connect_grants SET needs_reconnect = true WHERE id = $1", c.grantID)
}

// refresh answers c's credential after a refresh of the access token
// stale. It is single-flight per grant: in this api (one refresh at a
// time per grant, whose answer every caller waiting shares), and across
// replicas by the grant's row lock, under which the stored token is read
// again: one that is no longer stale and has RefreshBefore left is used
// as it is. The rotated refresh token is committed before the new access
// token is used.
func (b *Broker) refresh(ctx context.Context, user string, c Connector, stale string) (Custom, error) {
	// The refresh outlives a caller that goes away: the others share it.
	v, err, _ := b.flights.Do(c.grantID, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CallTimeout)
		defer cancel()
		return b.refreshLocked(rctx, user, c, stale)
	})
	if err != nil {
		return Custom{}, err
	}
	return v.(Custom), nil
}

func (b *Broker) refreshLocked(ctx context.Context, user string, c Connector, stale string) (Custom, error) {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return Custom{}, err
	}
	defer tx.Rollback(ctx)
	var sealed []byte
	err = tx.QueryRow(ctx, "SELECT secret_sealed FROM connect_grants WHERE id = $1 AND user_id = $2 FOR UPDATE", c.grantID, user).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return Custom{}, fmt.Errorf("%s: %w", c.ID, ErrNotFound)
	}
	if err != nil {
		return Custom{}, err
	}
	s, err := b.unseal(ctx, user, c, sealed)
	if err != nil {
		return Custom{}, err
	}
	o := s.OAuth
	if o == nil {
		return Custom{}, fmt.Errorf("%s: not an OAuth grant", c.ID)
	}
	if o.AccessToken != stale && (o.Expiry.IsZero() || !o.Expiry.Before(b.now().Add(RefreshBefore))) {
		return bearer(c, o), tx.Commit(ctx) // another refresh came first
	}
	refused := func(why string) (Custom, error) {
		if _, err := tx.Exec(ctx, "UPDATE connect_grants SET needs_reconnect = true WHERE id = $1", c.grantID); err != nil {
			return Custom{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			return Custom{}, err
		}
		return Custom{}, fmt.Errorf("%s: %w (%s)", c.ID, ErrNeedsReconnect, why)
	}
	if o.RefreshToken == "" {
		return refused("the token expired and the server gave no refresh token")
	}
	tok, err := b.up.refreshToken(ctx, o, b.now())
	var te *tokenError
	if errors.As(err, &te) && (te.Code == "invalid_grant" || te.Code == "bad_refresh_token") {
		return refused("the refresh answered " + te.Code)
	}
	if err != nil {
		return Custom{}, fmt.Errorf("%w %s: refresh: %v", ErrUpstream, o.TokenURL, err)
	}
	o.AccessToken, o.Expiry = tok.AccessToken, tok.Expiry
	if tok.RefreshToken != "" {
		o.RefreshToken = tok.RefreshToken
	}
	sk, err := b.vault.StateKey(ctx, user)
	if err != nil {
		return Custom{}, err
	}
	plain, _ := json.Marshal(s)
	if _, err := tx.Exec(ctx, "UPDATE connect_grants SET secret_sealed = $2, needs_reconnect = false WHERE id = $1",
		c.grantID, seal.Seal(sk, grantLabel, grantAAD(c.grantID, user, c.ID), plain)); err != nil {
		return Custom{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Custom{}, err
	}
	return bearer(c, o), nil
}

func bearer(c Connector, o *oauthSecret) Custom {
	return Custom{Name: c.ID, URL: c.URL, Header: "Authorization", Key: "Bearer " + o.AccessToken}
}

// tokenError is a token endpoint's refusal (RFC 6749 §5.2), or GitHub's
// 200 with error.
type tokenError struct {
	Status int
	Code   string
}

func (e *tokenError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Code) }

// refreshToken sends the refresh token grant (RFC 6749 §6) with resource
// (RFC 8707 §2.2, which MCP authorization requires on every token
// request). It is a form POST of its own: golang.org/x/oauth2 refreshes
// inside a TokenSource that takes no extra parameter.
func (u *upstream) refreshToken(ctx context.Context, o *oauthSecret, now time.Time) (*oauth2.Token, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {o.RefreshToken}}
	if o.Resource != "" {
		form.Set("resource", o.Resource)
	}
	basic := oauth2.AuthStyle(o.AuthStyle) == oauth2.AuthStyleInHeader
	if !basic {
		form.Set("client_id", o.ClientID)
		if o.ClientSecret != "" {
			form.Set("client_secret", o.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(url.QueryEscape(o.ClientID), url.QueryEscape(o.ClientSecret))
	}
	resp, err := u.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ans struct {
		AccessToken  string `json:"access_token"`
		ExpiresIn    int64  `json:"expires_in"`
		RefreshToken string `json:"refresh_token"`
		Error        string `json:"error"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &ans); err != nil && resp.StatusCode == http.StatusOK {
		return nil, fmt.Errorf("the token endpoint's answer is not JSON: %v", err)
	}
	if resp.StatusCode != http.StatusOK || ans.Error != "" || ans.AccessToken == "" {
		return nil, &tokenError{Status: resp.StatusCode, Code: clip(ans.Error)}
	}
	tok := &oauth2.Token{AccessToken: ans.AccessToken, RefreshToken: ans.RefreshToken}
	if ans.ExpiresIn > 0 {
		tok.Expiry = now.Add(time.Duration(ans.ExpiresIn) * time.Second)
	}
	return tok, nil
}
