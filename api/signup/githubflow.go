package signup

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// FlowLifetime is how long a GitHub sign-in may take from begin to the
// callback (the contract's 10 min).
const FlowLifetime = 10 * time.Minute

// flow is one GitHub sign-in under way (github_login_flows).
type flow struct {
	Purpose  string // purposeSignIn or purposeConnect
	UserID   string // connect: the signed-in user
	ReturnTo string // a /cb/ path (checkReturnTo)
	Invite   string // "" or a cbi_ code
	Verifier string // PKCE (RFC 7636), 43 characters
}

const (
	purposeSignIn  = "signin"
	purposeConnect = "connect"
)

func random32() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func sum(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// challenge is the PKCE S256 challenge of verifier (RFC 7636 §4.2).
func challenge(verifier string) string {
	h := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// storeFlow keeps f for FlowLifetime under a new state and nonce (only
// their SHA-256 stored) and answers them; flows that expired an hour ago
// go on the way.
func (g *GitHub) storeFlow(ctx context.Context, f *flow) (state, nonce string, err error) {
	state, nonce, f.Verifier = random32(), random32(), random32()
	var user *string
	if f.UserID != "" {
		user = &f.UserID
	}
	_, err = g.pool.Exec(ctx, `
		WITH gone AS (DELETE FROM github_login_flows WHERE expires_at < now() - interval '1 hour')
		INSERT INTO github_login_flows (state_sha256, nonce_sha256, verifier, purpose, user_id, return_to, invite, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8))`,
		sum(state), sum(nonce), f.Verifier, f.Purpose, user, f.ReturnTo, f.Invite, g.lifetime.Seconds())
	if err != nil {
		return "", "", fmt.Errorf("store the GitHub sign-in: %w", err)
	}
	return state, nonce, nil
}

// errFlowBrowser: no flow has this state and this browser's nonce (a
// forged or replayed answer, or the sign-in began in another browser);
// errFlowSpent: the flow was used or expired.
var (
	errFlowBrowser = errors.New("no GitHub sign-in of this browser has this state")
	errFlowSpent   = errors.New("the GitHub sign-in was used already or took longer than 10 minutes")
)

// takeFlow uses the flow of state, only when nonce (the cb_login cookie)
// is its own: an answer without both leaves the flow to the real one.
func (g *GitHub) takeFlow(ctx context.Context, state, nonce string) (flow, error) {
	var f flow
	var user *string
	// The used row keeps no secret: the invite code and the verifier are
	// answered from the row as it was (the self-join's snapshot) and blanked.
	err := g.pool.QueryRow(ctx, `
		UPDATE github_login_flows n SET used_at = now(), invite = '', verifier = ''
		FROM github_login_flows o
		WHERE n.state_sha256 = $1 AND n.nonce_sha256 = $2 AND n.used_at IS NULL AND n.expires_at > now()
		  AND o.state_sha256 = n.state_sha256
		RETURNING o.purpose, o.user_id, o.return_to, o.invite, o.verifier`, sum(state), sum(nonce)).
		Scan(&f.Purpose, &user, &f.ReturnTo, &f.Invite, &f.Verifier)
	if err == nil {
		if user != nil {
			f.UserID = *user
		}
		return f, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return flow{}, fmt.Errorf("take the GitHub sign-in: %w", err)
	}
	var mine bool
	err = g.pool.QueryRow(ctx, "SELECT nonce_sha256 = $2 FROM github_login_flows WHERE state_sha256 = $1", sum(state), sum(nonce)).Scan(&mine)
	switch {
	case errors.Is(err, pgx.ErrNoRows), err == nil && !mine:
		return flow{}, errFlowBrowser
	case err != nil:
		return flow{}, fmt.Errorf("take the GitHub sign-in: %w", err)
	}
	return flow{}, errFlowSpent
}
