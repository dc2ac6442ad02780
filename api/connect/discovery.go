package connect

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// discovered is what MCP discovery found for a server that asks for OAuth
// (MCP authorization 2025-11-25, from the client side): its protected
// resource metadata (RFC 9728) and its authorization server's metadata
// (RFC 8414).
type discovered struct {
	// resource is the metadata's resource: the token's audience, sent as
	// resource (RFC 8707) on the authorization and token requests.
	resource string
	// scope is what to ask for: the 401's scope, else the resource's
	// scopes_supported ("" for none).
	scope string
	as    *oauthex.AuthServerMeta
	// issuer is what the callback's iss must name (RFC 9207; Contract:
	// Connect, Console flow step 3): the metadata's issuer when on the
	// same origin as the URL the resource metadata named, else that URL.
	issuer string
}

// client is an HTTP client on the outbound dialer that follows no
// redirect: every URL of discovery is the one a document named.
func (u *upstream) client() *http.Client {
	return &http.Client{Transport: u.tr, Timeout: CallTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// initialize is the MCP request discovery sends without a token to get
// the server's 401.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cocoonbox-connect","version":"1"}}}`

// discover finds serverURL's authorization server: the server's 401 and
// its WWW-Authenticate resource_metadata, else the well-known URIs (path
// inserted, then the root); the resource metadata, whose resource must
// be serverURL (RFC 9728 §3.3; the root's, the origin); the first
// authorization server's metadata, whose issuer must be that server
// (RFC 8414 §3.3), with PKCE S256. A server that does not ask for a token
// or whose documents fail these checks is ErrUpstream, saying why.
func (u *upstream) discover(ctx context.Context, serverURL string) (*discovered, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	hc := u.client()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(initialize))
	if err != nil {
		return nil, &InputError{"url", err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrUpstream, serverURL, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return nil, fmt.Errorf("%w %s answered %d without a token, not 401: it does not ask for OAuth; give its key", ErrUpstream, serverURL, resp.StatusCode)
	}
	var metadataURL, scope string
	if cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate")); err == nil {
		for _, c := range cs {
			if c.Scheme == "bearer" {
				metadataURL, scope = c.Params["resource_metadata"], c.Params["scope"]
			}
		}
	}
	su, _ := url.Parse(serverURL)
	origin := su.Scheme + "://" + su.Host
	type candidate struct{ metadata, resource string }
	var tries []candidate
	if metadataURL != "" {
		tries = []candidate{{metadataURL, serverURL}}
	} else {
		if p := strings.TrimSuffix(su.EscapedPath(), "/"); p != "" {
			tries = append(tries, candidate{origin + "/.well-known/oauth-protected-resource" + p, serverURL})
		}
		tries = append(tries, candidate{origin + "/.well-known/oauth-protected-resource", origin})
	}
	var prm *oauthex.ProtectedResourceMetadata
	var errs []string
	for _, c := range tries {
		if prm, err = oauthex.GetProtectedResourceMetadata(ctx, c.metadata, c.resource, hc); err == nil {
			break
		}
		errs = append(errs, err.Error())
	}
	if prm == nil {
		return nil, fmt.Errorf("%w %s: no protected resource metadata (RFC 9728): %s", ErrUpstream, serverURL, strings.Join(errs, "; "))
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("%w %s: its resource metadata names no authorization server", ErrUpstream, serverURL)
	}
	asURL := prm.AuthorizationServers[0]
	as, err := auth.GetAuthServerMetadata(ctx, asURL, hc)
	if err != nil {
		return nil, fmt.Errorf("%w %s: authorization server metadata (RFC 8414) of %s: %v", ErrUpstream, serverURL, asURL, err)
	}
	if as == nil {
		return nil, fmt.Errorf("%w %s: %s serves no authorization server metadata (RFC 8414)", ErrUpstream, serverURL, asURL)
	}
	if !slices.Contains(as.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("%w %s: %s does not offer PKCE S256", ErrUpstream, serverURL, asURL)
	}
	for _, e := range []struct{ name, v string }{{"authorization_endpoint", as.AuthorizationEndpoint}, {"token_endpoint", as.TokenEndpoint}} {
		if eu, err := url.Parse(e.v); err != nil || eu.Scheme != "https" || eu.Host == "" {
			return nil, fmt.Errorf("%w %s: %s's %s %q is not an https URL", ErrUpstream, serverURL, asURL, e.name, e.v)
		}
	}
	if scope == "" {
		scope = strings.Join(prm.ScopesSupported, " ")
	}
	issuer := asURL
	if sameOrigin(as.Issuer, asURL) {
		issuer = as.Issuer
	}
	return &discovered{resource: prm.Resource, scope: scope, as: as, issuer: issuer}, nil
}

func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host)
}

// sameIssuer compares issuers a trailing "/" aside (Contract: Connect,
// Console flow step 3).
func sameIssuer(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }
