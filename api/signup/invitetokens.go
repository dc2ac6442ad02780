package signup

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/server"
)

// TokenPrefix starts an invite-scoped token: cbit_ and 64 hex (Contract:
// Sign-in with GitHub and signup, "Invite-scoped tokens").
const TokenPrefix = "cbit_"

// tokenIDRule is an invite-scoped token's id: ivt_ and 16 hex (newID).
var tokenIDRule = regexp.MustCompile(`^ivt_[0-9a-f]{16}$`)

// TokenLen is an invite-scoped token's length.
const TokenLen = len(TokenPrefix) + 64

// InviteToken is an invite-scoped token as listed (never its secret).
type InviteToken struct {
	ID        string     `json:"id"`
	Label     string     `json:"label"`
	Admin     string     `json:"admin"` // the admin's name
	CreatedAt time.Time  `json:"created_at"`
	UsedAt    *time.Time `json:"used_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Invites is how many invites it made; InviteIDs are theirs, newest first.
	Invites   int      `json:"invites"`
	InviteIDs []string `json:"invite_ids"`
	// Alive: not revoked and its admin an enabled admin.
	Alive bool `json:"alive"`
}

// NewInviteToken is a minted token: its secret, given once.
type NewInviteToken struct {
	InviteToken
	Token string `json:"token"`
}

// checkLabel names the rule a token's label breaks: 1 to 100 characters
// of UTF-8 without control characters.
func checkLabel(label string) error {
	n := utf8.RuneCountInString(label)
	if n < 1 || n > 100 || !utf8.ValidString(label) || strings.IndexFunc(label, unicode.IsControl) >= 0 || strings.TrimSpace(label) == "" {
		return fmt.Errorf("%w: label is 1 to 100 characters of text, without control characters", ErrInvalid)
	}
	return nil
}

// MintInviteToken stores an invite-scoped token of the admin adminID and
// answers its secret once.
func (s *Signup) MintInviteToken(ctx context.Context, adminID, label string) (NewInviteToken, error) {
	if err := checkLabel(label); err != nil {
		return NewInviteToken{}, err
	}
	secret, sum := newSecret(TokenPrefix)
	id := newID("ivt_")
	if _, err := s.pool.Exec(ctx, "INSERT INTO invite_tokens (id, sha256, admin_id, label) VALUES ($1, $2, $3, $4)", id, sum[:], adminID, label); err != nil {
		return NewInviteToken{}, fmt.Errorf("store the invite-scoped token: %w", err)
	}
	list, err := s.inviteTokens(ctx, "WHERE t.id = $1", id)
	if err != nil || len(list) != 1 {
		return NewInviteToken{}, fmt.Errorf("read the token back: %w", err)
	}
	s.log.InfoContext(ctx, "signup: invite-scoped token minted", "invite_token", id, "admin", adminID)
	return NewInviteToken{InviteToken: list[0], Token: secret}, nil
}

// InviteTokens lists every invite-scoped token, newest first.
func (s *Signup) InviteTokens(ctx context.Context) ([]InviteToken, error) {
	return s.inviteTokens(ctx, "")
}

func (s *Signup) inviteTokens(ctx context.Context, where string, args ...any) ([]InviteToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT t.id, t.label, u.name, t.created_at, t.used_at, t.revoked_at,
		(SELECT count(*) FROM invites i WHERE i.token_id = t.id),
		coalesce((SELECT array_agg(i.id::text ORDER BY i.created_at DESC) FROM invites i WHERE i.token_id = t.id), '{}'), t.revoked_at IS NULL AND u.admin AND u.disabled_at IS NULL
		FROM invite_tokens t JOIN users u ON u.id = t.admin_id `+where+` ORDER BY t.created_at DESC, t.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list invite-scoped tokens: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (InviteToken, error) {
		var t InviteToken
		err := r.Scan(&t.ID, &t.Label, &t.Admin, &t.CreatedAt, &t.UsedAt, &t.RevokedAt, &t.Invites, &t.InviteIDs, &t.Alive)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list invite-scoped tokens: %w", err)
	}
	if list == nil {
		list = []InviteToken{}
	}
	return list, nil
}

// RevokeInviteToken revokes a token at once; ErrNotFound for an unknown id.
func (s *Signup) RevokeInviteToken(ctx context.Context, id string) error {
	if !tokenIDRule.MatchString(id) {
		// Not a token's id (a NUL or bad UTF-8 in it was a 500).
		return fmt.Errorf("%w: invite-scoped token %q", ErrNotFound, id)
	}
	tag, err := s.pool.Exec(ctx, "UPDATE invite_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("revoke invite-scoped token %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: invite-scoped token %q", ErrNotFound, id)
	}
	s.log.InfoContext(ctx, "signup: invite-scoped token revoked", "invite_token", id)
	return nil
}

// tokenCaller is the live invite-scoped token a request carries.
type tokenCaller struct {
	ID      string // ivt_…
	AdminID string
}

// ErrDeadToken: an invite-scoped token that is malformed, unknown,
// revoked, or whose admin is no longer an enabled admin.
var ErrDeadToken = errors.New("unknown or revoked invite-scoped token")

// checkToken answers the live token of secret and notes its use.
func (s *Signup) checkToken(ctx context.Context, secret string) (tokenCaller, error) {
	if len(secret) != TokenLen || strings.Trim(secret[len(TokenPrefix):], "0123456789abcdef") != "" {
		return tokenCaller{}, ErrDeadToken
	}
	sum := sha256.Sum256([]byte(secret))
	var c tokenCaller
	err := s.pool.QueryRow(ctx, `UPDATE invite_tokens t SET used_at = now() FROM users u
		WHERE t.sha256 = $1 AND t.revoked_at IS NULL AND u.id = t.admin_id AND u.admin AND u.disabled_at IS NULL
		RETURNING t.id, t.admin_id`, sum[:]).Scan(&c.ID, &c.AdminID)
	if errors.Is(err, pgx.ErrNoRows) {
		return tokenCaller{}, ErrDeadToken
	}
	if err != nil {
		return tokenCaller{}, fmt.Errorf("check the invite-scoped token: %w", err)
	}
	return c, nil
}

type tokenKey struct{}

func tokenFrom(r *http.Request) (tokenCaller, bool) {
	c, ok := r.Context().Value(tokenKey{}).(tokenCaller)
	return c, ok
}

// carriesInviteToken reports whether r's Authorization header is a bearer
// of the cbit_ prefix, and answers it.
func carriesInviteToken(r *http.Request) (string, bool) {
	for _, h := range r.Header.Values("Authorization") {
		scheme, tok, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") && strings.HasPrefix(strings.TrimSpace(tok), TokenPrefix) {
			return strings.TrimSpace(tok), true
		}
	}
	return "", false
}

// GuardInviteTokens wraps the api's whole mux (server.Server.Wrap): a
// request carrying an invite-scoped token reaches only POST and GET
// /cb/api/invites, with the token checked and in its context; every other
// route answers 403, before its handler sees anything (Contract: "Every
// other route of the api's HTTP server ... answers 403 to a request
// carrying one, the check wrapping the whole mux"). A dead token on the
// invite routes is 401. Logs name the token's id, never the token.
func (s *Signup) GuardInviteTokens(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := carriesInviteToken(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Path != "/cb/api/invites" || (r.Method != http.MethodPost && r.Method != http.MethodGet) {
			s.log.WarnContext(r.Context(), "an invite-scoped token refused off the invite routes", "method", r.Method, "path", r.URL.Path)
			server.WriteJSON(w, http.StatusForbidden, callError{"invite_token", "an invite-scoped token (cbit_) reaches only POST and GET /cb/api/invites"})
			return
		}
		c, err := s.checkToken(r.Context(), secret)
		if errors.Is(err, ErrDeadToken) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			server.WriteJSON(w, http.StatusUnauthorized, callError{"invalid_token", "unknown or revoked invite-scoped token, or its admin is no longer an enabled admin"})
			return
		}
		if err != nil {
			s.log.ErrorContext(r.Context(), "invite-scoped token check failed", "err", err)
			server.WriteJSON(w, http.StatusInternalServerError, callError{"internal", "the token check failed; try again"})
			return
		}
		s.log.InfoContext(r.Context(), "invite-scoped token call", slog.String("invite_token", c.ID), "method", r.Method)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, c)))
	})
}
