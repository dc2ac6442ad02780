// Package connect is Connect's broker (Contract: Connect (design §16);
// docs/connect.md): the user's grants on external MCP servers, sealed in
// the users database, and the mode B door /cocoonbox.mcp/connect that
// serves the connected tools as one MCP server to the user's own agents.
//
// Built today: custom MCP servers with a header key or through OAuth
// (MCP discovery and the console flow, flow.go), per-tool policies, the
// Connectors gRPC service, the console calls, check and disconnect, the
// door, and the audit of its calls and of disconnects (audit.go). No
// message, page or log carries a key, and no door reads a grant back:
// the key leaves the api only in the header of a call to the server it
// was given for, through the api's one outbound dialer (egress.Dialer:
// public addresses only, never the host's own).
package connect

import (
	"embed"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/database"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the package's migrations (connect_grants, connect_policies,
// connect_flows, connect_audit);
// they refer to users (users.Schema first).
var Schema = database.NewSchema("connect_schema_migrations", migrations, "migrations")

// Sealing of a grant's secrets (Contract: Connect, Storage).
const grantLabel = "cocoonbox connect grant"

func grantAAD(id, user, connector string) string {
	return "connect_grants|" + id + "|" + user + "|" + connector
}

// Errors of the broker, beside *InputError.
var (
	// ErrNotFound: the user has no connector of that id.
	ErrNotFound = errors.New("no such connector")
	// ErrExists: the user has connected that id already.
	ErrExists = errors.New("that connector is connected already")
	// ErrUpstream: the server could not be reached, refused the key, or
	// answered something that is not MCP.
	ErrUpstream = errors.New("the connector's server")
)

// InputError is bad input: the field and the rule it broke.
type InputError struct{ Field, Rule string }

func (e *InputError) Error() string { return e.Field + ": " + e.Rule }

// Catalog is the connectors the contract names. Only custom is built;
// the others are listed unavailable until their turn (docs/connect.md).
var Catalog = []CatalogEntry{
	{ID: "github", Title: "GitHub"},
	{ID: "google-calendar", Title: "Google Calendar"},
	{ID: "link", Title: "Link"},
	{ID: "custom", Title: "Any MCP server", Available: true},
}

// CatalogEntry is a connector the api offers.
type CatalogEntry struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Available bool   `json:"available"`
}

func inCatalog(id string) bool {
	for _, c := range Catalog {
		if c.ID == id {
			return true
		}
	}
	return false
}

var nameRule = regexp.MustCompile(`^[a-z][a-z0-9-]{0,23}$`)

// headerRule is an HTTP field name (RFC 9110 token).
var headerRule = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")

// Custom is a custom MCP server as the user gives it.
type Custom struct {
	// Name is the connector id: ^[a-z][a-z0-9-]{0,23}$, not a catalog id.
	Name string
	// URL is its streamable HTTP endpoint: https with a host.
	URL string
	// Header carries Key (Authorization when empty); with no Key, none.
	Header string
	// Key is the header's whole value (e.g. "Bearer sk-…").
	Key string
}

// check normalizes c, a server connected with a key, or says which
// field breaks which rule.
func (c *Custom) check() error {
	if err := c.checkServer(); err != nil {
		return err
	}
	if c.Key == "" {
		if c.Header != "" {
			return &InputError{"header", "a header needs a key (without a key the server is signed in to through MCP discovery, in the console)"}
		}
		return &InputError{"key", "give the server's key; without one the console signs in to it through MCP discovery (POST /cb/api/connect/custom/begin)"}
	}
	if c.Header == "" {
		c.Header = "Authorization"
	}
	if !headerRule.MatchString(c.Header) {
		return &InputError{"header", fmt.Sprintf("%q is not an HTTP header name", c.Header)}
	}
	if len(c.Key) > 4096 || strings.ContainsAny(c.Key, "\r\n\x00") {
		return &InputError{"key", "at most 4096 bytes, without CR, LF or NUL"}
	}
	return nil
}

// checkServer checks c's name and URL.
func (c *Custom) checkServer() error {
	if !nameRule.MatchString(c.Name) {
		return &InputError{"name", fmt.Sprintf("%q is not ^[a-z][a-z0-9-]{0,23}$", c.Name)}
	}
	if inCatalog(c.Name) {
		return &InputError{"name", fmt.Sprintf("%q is a catalog id; a custom server needs another name", c.Name)}
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return &InputError{"url", fmt.Sprintf("%q is not an https URL with a host, without user info or fragment", c.URL)}
	}
	return nil
}

// Policy is what a door does with a call of a tool.
type Policy string

// The policies (Contract: Connect, Console calls). PolicyDefault is no
// row: the catalog's default, allow for a custom server's tools.
const (
	PolicyDefault Policy = "default"
	PolicyAllow   Policy = "allow"
	PolicyAsk     Policy = "ask"
	PolicyOff     Policy = "off"
)

// effective is p with default resolved.
func (p Policy) effective() Policy {
	if p == PolicyDefault || p == "" {
		return PolicyAllow
	}
	return p
}

// ParsePolicy reads allow, ask, off or default.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyDefault, PolicyAllow, PolicyAsk, PolicyOff:
		return p, nil
	}
	return "", &InputError{"policy", fmt.Sprintf("%q is not allow, ask, off or default", s)}
}
