package oauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Client is an OAuth client as the authorization endpoint sees it: a
// registered one (RFC 7591) or a Client ID Metadata Document's.
type Client struct {
	// ID is the client_id: 32 hex digits for a registered client, the
	// document's https URL otherwise.
	ID string
	// Name is client_name; it may be empty (the page shows the id).
	Name string
	// RedirectURIs are the redirect URIs the authorization request must
	// name one of exactly (each passed checkRedirectURI).
	RedirectURIs []string
	// VerifiedHost is the host the metadata document was fetched from
	// over https; empty for a registered client (shown as unverified).
	VerifiedHost string
	// GrantTypes are the grant types the client may use, as it registered
	// them or its document names them (RFC 7591 §2): authorization_code,
	// and refresh_token unless it left it out of a list it gave;
	// DefaultGrantTypes when it gave none.
	GrantTypes []string
}

// DefaultGrantTypes are the grant types of a client that names none. RFC
// 7591 §2's default is authorization_code alone, and §3.2.1 lets the
// server substitute its own: MCP clients that omit the field refresh
// (docs/oauth.md, Clients).
var DefaultGrantTypes = []string{"authorization_code", "refresh_token"}

// Refreshes says whether the client takes refresh tokens: its grant
// types name refresh_token. The exchange answers one only then.
func (c Client) Refreshes() bool { return slices.Contains(c.GrantTypes, "refresh_token") }

// ErrInvalidMetadata is a client's metadata the api refuses: RFC 7591
// §3.2.2's invalid_client_metadata. ErrInvalidRedirectURI is its
// invalid_redirect_uri.
var (
	ErrInvalidMetadata    = errors.New("invalid_client_metadata")
	ErrInvalidRedirectURI = errors.New("invalid_redirect_uri")
)

// metadata is the client metadata of RFC 7591 §2 the api reads; any
// other field is ignored (§2: extensions), never copied.
type metadata struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	Scope                   string   `json:"scope"`
	// A secret in the document is a confidential client's (the draft's
	// §4.1: a document MUST NOT carry one).
	ClientSecret *string `json:"client_secret"`
}

// maxName bounds client_name, as the consent page shows it.
const maxName = 200

// parseMetadata reads b, one JSON object of client metadata, and checks
// it for a public client: token_endpoint_auth_method absent or none,
// no client_secret, grant_types within authorization_code and
// refresh_token, response_types within code, 1 to 10 redirect URIs each
// passing checkRedirectURI, a client_name of at most 200 characters. Its
// errors wrap ErrInvalidMetadata or ErrInvalidRedirectURI and name the
// field and the rule.
func parseMetadata(b []byte) (metadata, error) {
	var m metadata
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return metadata{}, fmt.Errorf("%w: not a JSON object of client metadata: %v", ErrInvalidMetadata, err)
	}
	if dec.More() {
		return metadata{}, fmt.Errorf("%w: more than one JSON value", ErrInvalidMetadata)
	}
	if m.TokenEndpointAuthMethod != "" && m.TokenEndpointAuthMethod != "none" {
		return metadata{}, fmt.Errorf("%w: token_endpoint_auth_method %q: only none (public clients, PKCE)", ErrInvalidMetadata, m.TokenEndpointAuthMethod)
	}
	if m.ClientSecret != nil {
		return metadata{}, fmt.Errorf("%w: client_secret: only public clients, without a secret", ErrInvalidMetadata)
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return metadata{}, fmt.Errorf("%w: grant_types: %q is not authorization_code or refresh_token", ErrInvalidMetadata, g)
		}
	}
	for _, r := range m.ResponseTypes {
		if r != "code" {
			return metadata{}, fmt.Errorf("%w: response_types: %q is not code", ErrInvalidMetadata, r)
		}
	}
	if len(m.GrantTypes) > 0 && !slices.Contains(m.GrantTypes, "authorization_code") {
		return metadata{}, fmt.Errorf("%w: grant_types %q lacks authorization_code", ErrInvalidMetadata, m.GrantTypes)
	}
	if len(m.GrantTypes) == 0 {
		m.GrantTypes = DefaultGrantTypes
	}
	m.GrantTypes = slices.Compact(slices.Sorted(slices.Values(m.GrantTypes)))
	if !utf8.ValidString(m.ClientName) || utf8.RuneCountInString(m.ClientName) > maxName {
		return metadata{}, fmt.Errorf("%w: client_name: at most %d characters of UTF-8", ErrInvalidMetadata, maxName)
	}
	// The consent page shows the name: a control character (a NUL, which
	// PostgreSQL's text refuses, was a 500) or a bidirectional control
	// (U+202E turns the text around it) is refused, not shown.
	if i := strings.IndexFunc(m.ClientName, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(m.ClientName[i:])
		return metadata{}, fmt.Errorf("%w: client_name: %U at byte %d: no control or bidirectional control characters", ErrInvalidMetadata, r, i)
	}
	if len(m.RedirectURIs) == 0 || len(m.RedirectURIs) > 10 {
		return metadata{}, fmt.Errorf("%w: redirect_uris: %d given, 1 to 10 needed", ErrInvalidRedirectURI, len(m.RedirectURIs))
	}
	for _, u := range m.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return metadata{}, fmt.Errorf("%w: redirect_uris: %v", ErrInvalidRedirectURI, err)
		}
	}
	return m, nil
}
