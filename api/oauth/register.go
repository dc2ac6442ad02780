package oauth

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/cocoonbox/cocoonbox/api/server"
)

// maxRegistration bounds a registration request's body.
const maxRegistration = 16 << 10

// Registration is the dynamic client registration endpoint (RFC 7591)
// at RegistrationPath: public clients only. Mount it with Mount.
type Registration struct {
	clients *Clients
	log     *slog.Logger
}

// NewRegistration registers into clients.
func NewRegistration(clients *Clients, log *slog.Logger) *Registration {
	return &Registration{clients: clients, log: log}
}

// Mount puts the endpoint on mux.
func (r *Registration) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("POST "+RegistrationPath, http.HandlerFunc(r.register))
}

// registrationResponse is RFC 7591 §3.2.1's answer: the metadata as
// stored (grant_types as asked, DefaultGrantTypes when not), with no
// client_secret (a public client).
type registrationResponse struct {
	ClientID                string   `json:"client_id"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope"`
}

// register answers RFC 7591 §3.1: the client metadata as a JSON object,
// 201 with the client's information (§3.2.1), or 400 with
// invalid_redirect_uri or invalid_client_metadata (§3.2.2).
func (r *Registration) register(w http.ResponseWriter, req *http.Request) {
	if mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type")); mt != "application/json" {
		registrationError(w, ErrInvalidMetadata, "send the client metadata as Content-Type: application/json")
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxRegistration))
	if err != nil {
		registrationError(w, ErrInvalidMetadata, "the body is over 16 KiB or did not arrive")
		return
	}
	m, err := parseMetadata(b)
	if err == nil && m.ClientID != "" {
		err = fmt.Errorf("%w: client_id: the server assigns it", ErrInvalidMetadata)
	}
	if err != nil {
		code := ErrInvalidMetadata
		if errors.Is(err, ErrInvalidRedirectURI) {
			code = ErrInvalidRedirectURI
		}
		registrationError(w, code, err.Error())
		return
	}
	c, err := r.clients.register(req.Context(), m)
	if err != nil {
		r.log.Error("oauth: register", "err", err, "request_id", server.RequestID(req.Context()))
		server.WriteJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
		return
	}
	server.WriteJSON(w, http.StatusCreated, registrationResponse{
		ClientID: c.ID, ClientIDIssuedAt: time.Now().Unix(), ClientName: c.Name, RedirectURIs: c.RedirectURIs,
		GrantTypes: c.GrantTypes, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: "none", Scope: Scope,
	})
}

// registrationError is RFC 7591 §3.2.2's error answer.
func registrationError(w http.ResponseWriter, code error, description string) {
	server.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": code.Error(), "error_description": description})
}
