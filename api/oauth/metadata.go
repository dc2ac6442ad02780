package oauth

import (
	"encoding/json"
	"net/http"
	"path"
	"regexp"
	"strings"
)

// Metadata serves the discovery documents of issuer (oauth.public_url, an
// origin without a trailing "/"): the authorization server's metadata
// (RFC 8414) and the protected resource's (RFC 9728). Both are static;
// build one with NewMetadata and mount it with Mount.
type Metadata struct {
	issuer string
}

// NewMetadata is the discovery of issuer.
func NewMetadata(issuer string) *Metadata { return &Metadata{issuer: issuer} }

// Mount puts the well-known URIs on mux. Any other well-known path is the
// mux's 404, as is a path under PRMetadataPath that names no resource
// (an empty segment, a trailing "/", "." or "..").
func (m *Metadata) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET "+ASMetadataPath, http.HandlerFunc(m.authorizationServer))
	mux.Handle("GET "+PRMetadataPath, http.HandlerFunc(m.protectedResource))
	mux.Handle("GET "+PRMetadataPath+"/", http.HandlerFunc(m.protectedResource))
}

// CleanWellKnown wraps the api's whole handler (server.Server.Wrap): a
// path under /.well-known/ that is not in canonical form (an empty
// segment, a "." or ".." segment, a trailing "/") answers 404 here,
// before net/http's ServeMux would redirect it to its cleaned path, which
// may be a document's (…/cocoonbox.mcp//control to …/cocoonbox.mcp/control):
// docs/oauth.md promises 404 for every well-known path that is not
// exactly one of ours, and RFC 9728 §3.3 has the client compare the
// resource against the URL it asked for.
func CleanWellKnown(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		if strings.HasPrefix(p, "/.well-known/") && path.Clean(p) != p {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ResourceMetadataURL is the metadata URL of the resource at path (the
// control MCP's, say), which a 401 names in WWW-Authenticate's
// resource_metadata (RFC 9728 §5.1).
func (m *Metadata) ResourceMetadataURL(path string) string {
	return m.issuer + "/.well-known/oauth-protected-resource" + path
}

// authServerMeta is RFC 8414 §2's metadata, the fields the contract lists
// and the ones §2 requires (response_types_supported), plus the grant
// types the token endpoint takes.
type authServerMeta struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethods     []string `json:"revocation_endpoint_auth_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
	AuthorizationResponseIssSupported bool     `json:"authorization_response_iss_parameter_supported"`
}

// authorizationServer answers RFC 8414 §3.2: 200, application/json. Every
// endpoint is absolute under the issuer, which is the issuer exactly
// (§3.3: the client compares it as a string).
func (m *Metadata) authorizationServer(w http.ResponseWriter, r *http.Request) {
	writeMeta(w, authServerMeta{
		Issuer:                            m.issuer,
		AuthorizationEndpoint:             m.issuer + AuthorizationPath,
		TokenEndpoint:                     m.issuer + TokenPath,
		RegistrationEndpoint:              m.issuer + RegistrationPath,
		RevocationEndpoint:                m.issuer + RevocationPath,
		ScopesSupported:                   []string{Scope},
		ResponseTypesSupported:            []string{"code"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		TokenEndpointAuthMethodsSupported: []string{"none"},
		RevocationEndpointAuthMethods:     []string{"none"},
		ClientIDMetadataDocumentSupported: true,
		AuthorizationResponseIssSupported: true,
	})
}

// protectedResourceMeta is RFC 9728 §2's metadata.
type protectedResourceMeta struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
}

// segment is one path segment under the resource: what the MCP paths
// use; never empty, "." or "..".
var segment = regexp.MustCompile(`^[A-Za-z0-9_~-][A-Za-z0-9._~-]*$`)

// protectedResource answers RFC 9728 §3.2 for ResourcePath and every
// path under it. §3.3 has the client check that resource equals the URL
// the well-known string was inserted into, so the document at
// .../cocoonbox.mcp/control names <issuer>/cocoonbox.mcp/control (the go
// SDK compares them as strings); the token it leads to is for the whole
// resource, which covers the paths under it (docs/oauth.md).
func (m *Metadata) protectedResource(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, PRMetadataPath)
	if rest != "" {
		for _, s := range strings.Split(strings.TrimPrefix(rest, "/"), "/") {
			if !segment.MatchString(s) {
				http.NotFound(w, r)
				return
			}
		}
	}
	writeMeta(w, protectedResourceMeta{
		Resource:               m.issuer + ResourcePath + rest,
		AuthorizationServers:   []string{m.issuer},
		ScopesSupported:        []string{Scope},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "cocoonbox",
	})
}

// writeMeta answers a metadata document: public, the same for everyone,
// so a client may keep it a while.
func writeMeta(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	json.NewEncoder(w).Encode(v)
}
