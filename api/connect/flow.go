package connect

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/cocoonbox/cocoonbox/api/seal"
)

// FlowTTL is how long a console flow waits for its callback (Contract:
// Connect, Console flow step 2).
const FlowTTL = 10 * time.Minute

// CallbackPath is where the vendor sends the browser back (Contract:
// Connect, Console flow step 3), under connect.public_url.
const CallbackPath = "/cocoonbox.connect/callback"

// NonceCookie holds a flow's nonce in the browser that began it, sent to
// the callback alone (Path=/cocoonbox.connect/).
const NonceCookie = "cb_connect"

func flowAAD(id, user, connector string) string {
	return "connect_flows|" + id + "|" + user + "|" + connector
}

// oauthSecret is a grant from an authorization server: what calls and a
// refresh need.
type oauthSecret struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	TokenURL     string    `json:"token_url"`
	ClientID     string    `json:"client_id"`
	ClientSecret string    `json:"client_secret,omitempty"`
	AuthStyle    int       `json:"auth_style"`
	Resource     string    `json:"resource"`
	Scope        string    `json:"scope,omitempty"`
}

// flowSecret is what a flow seals: the PKCE verifier, the registered
// client and what the callback checks.
type flowSecret struct {
	Verifier     string `json:"verifier"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthStyle    int    `json:"auth_style"`
	AuthURL      string `json:"auth_url"`
	TokenURL     string `json:"token_url"`
	Resource     string `json:"resource"`
	Scope        string `json:"scope,omitempty"`
	// Issuer is what iss must name; IssRequired is the server's
	// authorization_response_iss_parameter_supported.
	Issuer      string `json:"issuer"`
	IssRequired bool   `json:"iss_required"`
}

func (f flowSecret) config(redirectURI string) *oauth2.Config {
	c := &oauth2.Config{ClientID: f.ClientID, ClientSecret: f.ClientSecret, RedirectURL: redirectURI,
		Endpoint: oauth2.Endpoint{AuthURL: f.AuthURL, TokenURL: f.TokenURL, AuthStyle: oauth2.AuthStyle(f.AuthStyle)}}
	if f.Scope != "" {
		c.Scopes = []string{f.Scope}
	}
	return c
}

// Begun is a flow begun: the URL to send the browser to, and the nonce to
// set in NonceCookie.
type Begun struct {
	URL, Nonce string
}

// BeginOAuth begins the console flow for a custom server without a key
// (Contract: Connect, Console flow step 2): MCP discovery, dynamic client
// registration (RFC 7591) with redirectURI, a flow (random state, PKCE
// S256 verifier, FlowTTL, one use) holding user, session (the SHA-256 of
// the console session secret) and the SHA-256 of a random nonce. Bad
// input is an *InputError, a taken name ErrExists, a server whose
// discovery fails ErrUpstream; nothing is stored on an error.
func (b *Broker) BeginOAuth(ctx context.Context, user string, session [32]byte, c Custom, redirectURI string) (Begun, error) {
	if err := c.checkServer(); err != nil {
		return Begun{}, err
	}
	if c.Header != "" {
		return Begun{}, &InputError{"header", "a header needs a key"}
	}
	if _, err := b.Get(ctx, user, c.Name); err == nil {
		return Begun{}, fmt.Errorf("%s: %w (disconnect it first)", c.Name, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return Begun{}, err
	}
	d, err := b.up.discover(ctx, c.URL)
	if err != nil {
		return Begun{}, err
	}
	if d.as.RegistrationEndpoint == "" {
		return Begun{}, fmt.Errorf("%w %s: its authorization server %s offers no dynamic client registration (RFC 7591); give the server's key instead", ErrUpstream, c.URL, d.issuer)
	}
	rctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	reg, err := oauthex.RegisterClient(rctx, d.as.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{redirectURI}, TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"}, ClientName: "cocoonbox Connect", Scope: d.scope}, b.up.client())
	if err != nil {
		return Begun{}, fmt.Errorf("%w %s: client registration at %s: %v", ErrUpstream, c.URL, d.as.RegistrationEndpoint, err)
	}
	style := oauth2.AuthStyleInParams
	if reg.ClientSecret != "" && reg.TokenEndpointAuthMethod != "client_secret_post" {
		style = oauth2.AuthStyleInHeader
	}
	fs := flowSecret{Verifier: oauth2.GenerateVerifier(), ClientID: reg.ClientID, ClientSecret: reg.ClientSecret, AuthStyle: int(style),
		AuthURL: d.as.AuthorizationEndpoint, TokenURL: d.as.TokenEndpoint, Resource: d.resource, Scope: d.scope,
		Issuer: d.issuer, IssRequired: d.as.AuthorizationResponseIssParameterSupported}
	state, nonce := random32(), random32()
	stateSum, nonceSum := sha256.Sum256([]byte(state)), sha256.Sum256([]byte(nonce))
	id := hex.EncodeToString(stateSum[:])
	sk, err := b.vault.StateKey(ctx, user)
	if err != nil {
		return Begun{}, err
	}
	plain, _ := json.Marshal(fs)
	sealed := seal.Seal(sk, grantLabel, flowAAD(id, user, c.Name), plain)
	// Expired flows, of every user, go at each begin (a spent one is
	// deleted at its callback).
	if _, err := b.pool.Exec(ctx, "DELETE FROM connect_flows WHERE expires_at <= now()"); err != nil {
		return Begun{}, err
	}
	if _, err := b.pool.Exec(ctx, `INSERT INTO connect_flows (id, user_id, connector, url, session_sha256, nonce_sha256, secret_sealed, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now() + $8::interval)`, id, user, c.Name, c.URL, session[:], nonceSum[:], sealed,
		fmt.Sprintf("%d seconds", int(FlowTTL.Seconds()))); err != nil {
		return Begun{}, err
	}
	u := fs.config(redirectURI).AuthCodeURL(state, oauth2.S256ChallengeOption(fs.Verifier), oauth2.SetAuthURLParam("resource", fs.Resource))
	return Begun{URL: u, Nonce: nonce}, nil
}

func random32() string {
	var raw [32]byte
	rand.Read(raw[:])
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// FlowError is a refused callback: the sentence the page shows after
// ?error=.
type FlowError struct{ Msg string }

func (e *FlowError) Error() string { return e.Msg }

// SessionLive says whether the console session whose secret hashes to sum
// is live for user (console.Console.SessionLive).
type SessionLive func(ctx context.Context, sum [32]byte, user string) bool

// CompleteOAuth completes a flow at its callback (Contract: Connect,
// Console flow step 3) with the callback's query q and the NonceCookie's
// value: only when the nonce's SHA-256 is the flow's (else the flow is
// left for its own browser), the state unused and unexpired, and the
// session that began it live for its user (live). iss must name the
// flow's authorization server when sent, and must be sent when its
// metadata says it is; otherwise the flow is spent and refused before
// any token request. Then the code goes to the token endpoint with the
// verifier and resource, the server's tools are listed with the token
// and the grant is stored. It answers the connector's id; a refusal is a
// *FlowError, ErrExists or ErrUpstream.
func (b *Broker) CompleteOAuth(ctx context.Context, q url.Values, nonce, redirectURI string, live SessionLive) (string, error) {
	state := q.Get("state")
	if state == "" {
		return "", &FlowError{"the sign-in's answer carries no state; connect again"}
	}
	stateSum := sha256.Sum256([]byte(state))
	id := hex.EncodeToString(stateSum[:])
	var user, name, serverURL string
	var sessionSum, nonceSum, sealed []byte
	var expired bool
	err := b.pool.QueryRow(ctx, `SELECT user_id, connector, url, session_sha256, nonce_sha256, secret_sealed, expires_at <= now()
		FROM connect_flows WHERE id = $1`, id).Scan(&user, &name, &serverURL, &sessionSum, &nonceSum, &sealed, &expired)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", &FlowError{"this sign-in is unknown or was used already; connect again"}
	}
	if err != nil {
		return "", err
	}
	if expired {
		_, _ = b.pool.Exec(ctx, "DELETE FROM connect_flows WHERE id = $1", id)
		return "", &FlowError{fmt.Sprintf("this sign-in expired (%s); connect again", FlowTTL)}
	}
	got := sha256.Sum256([]byte(nonce))
	if nonce == "" || subtle.ConstantTimeCompare(got[:], nonceSum) != 1 {
		return "", &FlowError{"this sign-in began in another browser; finish it there, or connect again here"}
	}
	tag, err := b.pool.Exec(ctx, "DELETE FROM connect_flows WHERE id = $1", id)
	if err != nil {
		return "", err
	}
	if tag.RowsAffected() != 1 {
		return "", &FlowError{"this sign-in is unknown or was used already; connect again"}
	}
	if !live(ctx, [32]byte(sessionSum), user) {
		return "", &FlowError{"the console session that began this sign-in has ended; sign in and connect again"}
	}
	sk, err := b.vault.StateKey(ctx, user)
	if err != nil {
		return "", err
	}
	plain, err := seal.Open(sk, grantLabel, flowAAD(id, user, name), sealed)
	if err != nil {
		return "", fmt.Errorf("connect flow %s: %w", name, err)
	}
	var fs flowSecret
	if err := json.Unmarshal(plain, &fs); err != nil {
		return "", fmt.Errorf("connect flow %s: %w", name, err)
	}
	if iss, sent := q["iss"]; sent {
		if len(iss) != 1 || !sameIssuer(iss[0], fs.Issuer) {
			return "", &FlowError{fmt.Sprintf("the answer names the authorization server %q, not %s's (%s): refused", q.Get("iss"), name, fs.Issuer)}
		}
	} else if fs.IssRequired {
		return "", &FlowError{fmt.Sprintf("the answer does not name its authorization server (iss), which %s says it always does: refused", fs.Issuer)}
	}
	if e := q.Get("error"); e != "" {
		return "", &FlowError{fmt.Sprintf("%s's authorization server answered %s", name, clip(e))}
	}
	code := q.Get("code")
	if code == "" {
		return "", &FlowError{"the sign-in's answer carries no code; connect again"}
	}
	xctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, b.up.client()), CallTimeout)
	defer cancel()
	tok, err := fs.config(redirectURI).Exchange(xctx, code, oauth2.VerifierOption(fs.Verifier), oauth2.SetAuthURLParam("resource", fs.Resource))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return "", &FlowError{fmt.Sprintf("%s's token endpoint refused the code: %s", name, clip(re.ErrorCode))}
		}
		return "", fmt.Errorf("%w %s: the token request: %v", ErrUpstream, fs.TokenURL, err)
	}
	if tok.AccessToken == "" {
		return "", &FlowError{fmt.Sprintf("%s's token endpoint answered no access token", name)}
	}
	c := Custom{Name: name, URL: serverURL, Header: "Authorization", Key: tok.Type() + " " + tok.AccessToken}
	tools, _, err := b.up.listTools(ctx, c)
	if err != nil {
		return "", err
	}
	grant := &oauthSecret{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, TokenURL: fs.TokenURL,
		ClientID: fs.ClientID, ClientSecret: fs.ClientSecret, AuthStyle: fs.AuthStyle, Resource: fs.Resource, Scope: fs.Scope}
	c.Header = "Authorization"
	if err := b.store(ctx, user, c, "oauth", secrets{OAuth: grant}, tools); err != nil {
		return "", err
	}
	return name, nil
}

// clip keeps a vendor's word short and printable for a page.
func clip(s string) string {
	r := []rune(s)
	if len(r) > 80 {
		r = r[:80]
	}
	for i, c := range r {
		if c < 0x20 || c == 0x7f {
			r[i] = ' '
		}
	}
	return string(r)
}
