// Package config reads api.yaml, the api's configuration file, strictly: an
// unknown key, a duplicated key or a bad value fails naming the key, so a
// typo never silently falls back to a default.
//
// api.yaml beside this file documents every key with its default (a test
// holds it equal to Default); install it as /etc/cocoonbox/api.yaml to start
// from. Flags override the file: --listen and --state-dir (see cmd/cocoonbox-api).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/egress"
	"go.yaml.in/yaml/v3"

	"github.com/cocoonbox/cocoonbox/internal/hostname"
)

// Config is the api's whole configuration. The yaml tags are the keys of api.yaml.
type Config struct {
	Listen    string   `yaml:"listen"`
	PublicURL string   `yaml:"public_url"`
	StateDir  string   `yaml:"state_dir"`
	Log       Log      `yaml:"log"`
	Database  Database `yaml:"database"`
	// TrustedProxies are the peers (CIDR prefixes) whose X-Forwarded-For
	// names the client, for the limits kept per client address
	// (ratelimit.ClientKey): the reverse proxy in front of the api.
	TrustedProxies []string `yaml:"trusted_proxies"`
	Console        Console  `yaml:"console"`
	HTTP           HTTP     `yaml:"http"`
	Sandbox        Sandbox  `yaml:"sandbox"`
	Boxes          Boxes    `yaml:"boxes"`
	Secrets        Secrets  `yaml:"secrets"`
	OAuth          OAuth    `yaml:"oauth"`
	Signup         Signup   `yaml:"signup"`
	State          State    `yaml:"state"`
	Connect        Connect  `yaml:"connect"`
	GW             GW       `yaml:"gw"`
}

// Connect configures Connect, the broker of the user's connected accounts
// and MCP servers (api/connect; docs/connect.md). Contract: Connect
// (design §16), Configuration.
type Connect struct {
	// PublicURL is the origin of the mode B door
	// <PublicURL>/cocoonbox.mcp/connect: an https origin, or http on a
	// loopback host (tests). Empty turns Connect off.
	PublicURL string `yaml:"public_url"`
	// BoxListen is the box door's ip:port on the host bridge (default
	// 10.203.0.1:18091, the boxes' CONNECT_URL), which the api listens on
	// once the local supervisor has the bridge up; boxes get a door key
	// only while it is set (and Connect is on). Empty turns the box door
	// off.
	BoxListen string `yaml:"box_listen"`
}

// BoxDoor says whether the box door is on: Connect on and box_listen set.
func (c Connect) BoxDoor() bool { return c.PublicURL != "" && c.BoxListen != "" }

// tokenOrigin checks an origin bearer tokens are sent to: an origin
// alone, https or http on a loopback host; the error names key.
func tokenOrigin(key, s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%s: %q is not an origin alone (e.g. https://api.example.com)", key, s)
	}
	if u.Scheme != "https" && (u.Scheme != "http" || !oauth.LoopbackHost(u.Hostname())) {
		return fmt.Errorf("%s: %q is neither https nor http on a loopback host (tokens would cross the network readable)", key, s)
	}
	return nil
}

func (c *Connect) validate() error {
	if c.BoxListen != "" {
		if ap, err := netip.ParseAddrPort(c.BoxListen); err != nil || !ap.Addr().Is4() {
			return fmt.Errorf("connect.box_listen: %q is not an IPv4 address and port (the host bridge's, 10.203.0.1:18091)", c.BoxListen)
		}
	}
	if c.PublicURL == "" {
		return nil
	}
	if err := tokenOrigin("connect.public_url", c.PublicURL); err != nil {
		return err
	}
	c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
	return nil
}

// State configures the state store (api/state/store; docs/state.md), where
// the objects of box saves and the flow library live, keyed <uid>/...
// Contract: State objects (agent ↔ api), Flow library.
type State struct {
	// Store is embedded (a directory state/ under state_dir, for one
	// machine) or s3 (an S3-compatible object store that every api and
	// host reaches).
	Store string `yaml:"store"`
	// PresignExpiry is how long a presigned URL of one object works (1s
	// to 1h; default 5m).
	PresignExpiry time.Duration `yaml:"presign_expiry"`
	S3            StateS3       `yaml:"s3"`
	// Retention is how many snapshots of each box name are kept, and
	// how long (state.Retention).
	Retention StateRetention `yaml:"retention"`
	// GCEvery is how often every user's retention and unreferenced
	// chunks are seen to (default 1h; a box save also starts a pass of
	// its user).
	GCEvery time.Duration `yaml:"gc_every"`
}

// StateRetention is state.retention (docs/state.md, "Retention and the
// GC").
type StateRetention struct {
	// Keep is how many of a box name's newest snapshots are kept (1 to
	// 1000; default 10).
	Keep int `yaml:"keep"`
	// MaxAge drops older snapshots but a box name's newest (0: none by
	// age; default 720h, 30 days).
	MaxAge time.Duration `yaml:"max_age"`
}

// StateS3 is the S3-compatible store of state.store s3 (store.S3Config).
type StateS3 struct {
	// Endpoint is http(s)://HOST[:PORT], no path.
	Endpoint string `yaml:"endpoint"`
	// Bucket must exist; Region signs the requests (empty: us-east-1).
	Bucket string `yaml:"bucket"`
	Region string `yaml:"region"`
	// URLStyle is path (HOST/BUCKET/KEY: MinIO, Ceph, SeaweedFS) or
	// virtual (BUCKET.HOST/KEY: AWS, R2).
	URLStyle string `yaml:"url_style"`
	// CredentialsFile, an absolute path, is an AWS shared credentials file
	// (aws_access_key_id, aws_secret_access_key under [Profile]).
	CredentialsFile string `yaml:"credentials_file"`
	Profile         string `yaml:"profile"`
	// CAFile, an absolute path, is a PEM file of the only roots the
	// endpoint's certificate may chain to; empty is the system's.
	CAFile string `yaml:"ca_file"`
}

// Signup configures sign-in with GitHub and signup (api/signup;
// docs/signup.md). Contract: Sign-in with GitHub and signup. The OAuth
// App's id and secret are not here: they come from the environment
// (LOGIN_GITHUB_CLIENT_ID, LOGIN_GITHUB_CLIENT_SECRET; the unit's
// EnvironmentFile /etc/cocoonbox/login.env).
type Signup struct {
	GitHub SignupGitHub `yaml:"github"`
}

// SignupGitHub is where GitHub is: github.com by default, a GitHub
// Enterprise Server (web_url https://HOST, api_url https://HOST/api/v3),
// or a test's stand-in.
type SignupGitHub struct {
	// WebURL serves the consent page (/login/oauth/authorize) and the
	// code's redemption (/login/oauth/access_token): an https origin.
	WebURL string `yaml:"web_url"`
	// APIURL is the REST API (/user, /user/emails): an https URL, with a
	// path for a GitHub Enterprise Server.
	APIURL string `yaml:"api_url"`
	// CAFile, an absolute path, is a PEM file of the only roots GitHub's
	// certificates may chain to (a test server's CA); empty is the system's.
	CAFile string `yaml:"ca_file"`
}

// OAuth configures the api as an OAuth authorization server for agents
// (api/oauth; docs/oauth.md). Contract: OAuth for agents.
type OAuth struct {
	// PublicURL is the issuer and the origin of the protected resource
	// <PublicURL>/cocoonbox.mcp: an https origin, or http on a loopback
	// host (tests, the api alone on a laptop). Empty turns OAuth off.
	PublicURL string `yaml:"public_url"`
	// IdleHibernate is how long a running agent box (one a grant created)
	// goes without a client call before it hibernates (default 30m; 0s
	// off); UserIdleHibernate the same for a user's own box (default 0s,
	// off), which stays up while an offload session works and is saved
	// first. IdleCheckEvery is how often the api looks (default 1m).
	// Contract: OAuth for agents, Idle hibernate, Idle user boxes.
	IdleHibernate     time.Duration `yaml:"idle_hibernate"`
	UserIdleHibernate time.Duration `yaml:"user_idle_hibernate"`
	IdleCheckEvery    time.Duration `yaml:"idle_check_every"`
}

// GW is gw, the model gateway (api/usage; docs/usage.md): its admin API
// for the users' keys, caps and meter, and the upstream of the local
// supervisor's gw door (the boxes' GW_BASE_URL).
type GW struct {
	// URL is gw's origin (http or https; its OpenAI API is URL/v1).
	// Empty: no gw: no box gets a key, and Usage answers zeros.
	URL string `yaml:"url"`
	// MasterKeyFile holds gw's admin key (one line); required with url.
	MasterKeyFile string `yaml:"master_key_file"`
	// DefaultDailyCapMicros is the daily cap of a user whose own
	// (users.daily_cap_micros) is unset, in micro-dollars (default $5).
	DefaultDailyCapMicros int64 `yaml:"default_daily_cap_micros"`
}

// validate checks gw: url an http(s) origin, master_key_file absolute
// when url is set, the default cap 0..MaxDailyCapMicros.
func (g *GW) validate() error {
	if g.DefaultDailyCapMicros < 0 || g.DefaultDailyCapMicros > MaxDailyCapMicros {
		return fmt.Errorf("gw.default_daily_cap_micros: %d is not 0..%d", g.DefaultDailyCapMicros, int64(MaxDailyCapMicros))
	}
	if g.URL == "" {
		return nil
	}
	u, err := url.Parse(g.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("gw.url: %q is not an http(s) origin alone (e.g. http://127.0.0.1:4000)", g.URL)
	}
	g.URL = strings.TrimSuffix(g.URL, "/")
	if !filepath.IsAbs(g.MasterKeyFile) {
		return fmt.Errorf("gw.master_key_file: %q is not an absolute path (gw.url needs gw's admin key)", g.MasterKeyFile)
	}
	return nil
}

// MaxDailyCapMicros bounds the default daily cap: $1000, as signup.MaxDailyCapMicros.
const MaxDailyCapMicros = 1_000_000_000

// Secrets configures the key vault's sealing (api/vault; docs/key-vault.md).
type Secrets struct {
	// MasterKeyFile is the api's master key: 32 random bytes, mode 0600.
	// Empty is master.key under the state directory, made at the first
	// start. Every replica must be given the same file; a missing or short
	// one refuses the start.
	MasterKeyFile string `yaml:"master_key_file"`
}

// MasterKeyFile is the master key's path and whether the api may make it
// (only the default one under the state directory).
func (c Config) MasterKeyFile() (string, bool) {
	if c.Secrets.MasterKeyFile != "" {
		return c.Secrets.MasterKeyFile, false
	}
	return filepath.Join(c.StateDir, "master.key"), true
}

// Boxes configures the api's box service (api/boxes; docs/box-lifecycle.md).
type Boxes struct {
	// RecoverEvery is how often each api adopts the operations a dead api
	// left and removes a deleted user's machines, saves and state store
	// objects (1s to 1h; it
	// also looks once at start). Shorter finds a dead replica's work sooner
	// at the cost of one query per host each pass.
	RecoverEvery time.Duration `yaml:"recover_every"`
	// MaxOperations bounds the operations this api runs at once (1 to 256;
	// default 4): each holds a database connection of its own (a pool
	// beside database.max_conns) for its box's lock, and the rest wait
	// their turn in a queue, so calls, sign-in and /healthz never wait
	// behind them.
	MaxOperations int `yaml:"max_operations"`
	// MaxQueued bounds the operations waiting for a turn (1 to 100000;
	// default 256): a call that would begin one more is refused
	// RESOURCE_EXHAUSTED. Recovery's adopted operations queue past it.
	MaxQueued int `yaml:"max_queued"`
}

// Sandbox says where the boxes run (Contract: Boxes (api) ↔ sandboxd):
// cocoonbox-sandboxd daemons by host name, or, when Hosts is empty, the
// local supervisor inside the api (host "local").
type Sandbox struct {
	// Hosts maps a host name (1 to 63 of [a-z0-9-], a letter first) to its
	// cocoonbox-sandboxd: unix:/PATH, https://HOST:PORT, or
	// http://HOST:PORT on a loopback address only (see SandboxdURL).
	Hosts map[string]string `yaml:"hosts"`
	// TokenFile's first line is the bearer token a TCP sandboxd needs.
	TokenFile string `yaml:"token_file"`
	// CAFile is a PEM file of the certificates an https:// sandboxd's
	// certificate must chain to: the fleet's CA, or a daemon's own
	// self-signed certificate (which pins it). Needed when a host is
	// https://; the name in the host's URL must be in the certificate.
	CAFile string `yaml:"ca_file"`
	// PingAfter: a connection to a sandboxd with no frame for this long is
	// pinged, and closed when no answer comes within as long again (a
	// daemon gone without a word); a silent exec stream keeps it.
	PingAfter time.Duration `yaml:"ping_after"`
	Local     Local         `yaml:"local"`
}

// Local is the in-process supervisor's configuration (package
// sandbox/local).
type Local struct {
	// Images is the directory of image roots cbdesk-vN-TIER (`make image`'s
	// out/images), an absolute path: a relative one in a config file is
	// read from the file's directory (Load), never from the api's working
	// directory, so the api finds the same folder wherever it starts.
	// Default: DefaultImages.
	Images string `yaml:"images"`
	// ImagesFrom says where Images came from, for the start-up log: "the
	// default", or "sandbox.local.images of FILE" (FILE absolute).
	ImagesFrom string `yaml:"-"`
	StateDir   string `yaml:"state_dir"`
	// Bridge and Gateway are the box network: the bridge's name and its
	// address with the boxes' prefix.
	Bridge  string `yaml:"bridge"`
	Gateway string `yaml:"gateway"`
	// Spares is how many booted machines of each tier's newest image the
	// supervisor keeps for creates to take over (local.Config.Spares),
	// 0 to MaxSpares.
	Spares int         `yaml:"spares"`
	Egress LocalEgress `yaml:"egress"`
}

// DefaultImages is sandbox.local.images without a config file's: where
// cocoonbox-sandboxd's --images defaults to, beside the local supervisor's
// default state_dir (the two supervisors are one code).
const DefaultImages = "/var/lib/cocoonbox-sandboxd/images"

// MaxSpares bounds sandbox.local.spares (local.MaxSpares, which this
// package does not import).
const MaxSpares = 8

// LocalEgress are the local supervisor's egress proxy settings for tests
// and the demo (docs/boxes.md, "The local supervisor"; both logged at start as a
// warning).
type LocalEgress struct {
	// Resolve sends a host name (lower-case, as a key's host) to an IP
	// address instead of DNS, for a box whose key lists that host only
	// (any other CONNECT to it resolves as usual); the address is
	// admitted even when it is not public, for that dial alone.
	Resolve map[string]string `yaml:"resolve"`
	// UpstreamCAFile, an absolute path, is the PEM file of the only roots
	// an intercepted host's upstream is verified against (the system
	// roots when empty).
	UpstreamCAFile string `yaml:"upstream_ca_file"`
	// Admit are networks (CIDR) the proxy reaches although they are not
	// public, e.g. an internal apt mirror on 10.x (egress.ParseAdmit's
	// rules; each logged at start as a warning). The host's own
	// addresses stay refused.
	Admit []string `yaml:"admit"`
}

// ResolveAddrs is Resolve with its addresses parsed (Check has judged
// them).
func (e LocalEgress) ResolveAddrs() map[string]netip.Addr {
	out := map[string]netip.Addr{}
	for h, a := range e.Resolve {
		out[h] = netip.MustParseAddr(a)
	}
	return out
}

// AdmitPrefixes is Egress.Admit parsed; call it on a validated Config.
func (l Local) AdmitPrefixes() []netip.Prefix {
	out, _ := egress.ParseAdmit(l.Egress.Admit)
	return out
}

// Console configures the web console (api/console).
type Console struct {
	SignIn SignIn `yaml:"sign_in"`
}

// SignIn bounds the console's password sign-in (POST /cb/api/session):
// PerUser failed sign-ins of one user name and PerAddress sign-ins of one
// client address at once, each refilled evenly over Window; past them the
// api answers 429 with Retry-After.
type SignIn struct {
	PerUser    int           `yaml:"per_user"`
	PerAddress int           `yaml:"per_address"`
	Window     time.Duration `yaml:"window"`
}

// HTTP is the listener's clocks (see server.Timeouts). None ends an open
// call: a Session.Exec stream stays while its command runs, however long
// it prints nothing (Contract: Remote command (Session.Exec, cocoonbox rsh)).
type HTTP struct {
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading the body of a call that is not a stream.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	PingAfter   time.Duration `yaml:"ping_after"`
	PingTimeout time.Duration `yaml:"ping_timeout"`
	// MaxConnsPerAddress is how many connections one client address may
	// hold open (trusted_proxies not counted), 1..100000.
	MaxConnsPerAddress int `yaml:"max_conns_per_address"`
	// ScreenStall is how long a screen's viewer may take none of its
	// bytes before it is cut (session.SetStall; docs/screen.md, Faults).
	ScreenStall time.Duration `yaml:"screen_stall"`
}

// Log says how the api logs (log/slog, on standard error).
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Database names the PostgreSQL server: URL, or the embedded cluster when URL is empty.
type Database struct {
	URL        string `yaml:"url"`
	SystemUser string `yaml:"system_user"`
	MaxConns   int    `yaml:"max_conns"`
}

// Default is the configuration with no file and no flags: the embedded defaults.
func Default() Config {
	return Config{
		Listen:   "127.0.0.1:18200",
		StateDir: "/var/lib/cocoonbox-api",
		Log:      Log{Level: "info", Format: "text"},
		Database: Database{SystemUser: "postgres", MaxConns: 10},
		Connect:  Connect{BoxListen: "10.203.0.1:18091"},
		// Caddy on this host, the deployment the contract describes.
		TrustedProxies: []string{"127.0.0.1/32", "::1/128"},
		Console:        Console{SignIn: SignIn{PerUser: 10, PerAddress: 30, Window: 15 * time.Minute}},
		HTTP: HTTP{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
			PingAfter: 15 * time.Second, PingTimeout: 15 * time.Second, MaxConnsPerAddress: 256,
			ScreenStall: 30 * time.Second},
		Sandbox: Sandbox{PingAfter: 15 * time.Second, Local: Local{Images: DefaultImages, ImagesFrom: "the default", StateDir: "/var/lib/cocoonbox-sandboxd",
			Bridge: "cocoonbox0", Gateway: "10.203.0.1/16", Spares: 1, Egress: LocalEgress{Admit: []string{}}}},
		Boxes:  Boxes{RecoverEvery: 15 * time.Second, MaxOperations: 4, MaxQueued: 256},
		Signup: Signup{GitHub: SignupGitHub{WebURL: "https://github.com", APIURL: "https://api.github.com"}},
		OAuth:  OAuth{IdleHibernate: 30 * time.Minute, IdleCheckEvery: time.Minute},
		State: State{Store: "embedded", PresignExpiry: 5 * time.Minute, S3: StateS3{URLStyle: "path", Profile: "default"},
			Retention: StateRetention{Keep: 10, MaxAge: 30 * 24 * time.Hour}, GCEvery: time.Hour},
		GW: GW{DefaultDailyCapMicros: 5_000_000},
	}
}

// Load reads the file at path over Default and validates the result. Its
// errors name the file and the key ("database.max_conns"), and the line
// of a value that does not parse (a value out of its range is checked after).
// A relative sandbox.local.images is read from the file's directory.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	c, err := parse(data, abs)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes api.yaml's text over Default and validates the result.
// Its paths must be absolute: the text has no file to be relative to.
func Parse(data []byte) (Config, error) { return parse(data, "") }

// parse is Parse of the text of file (absolute; "" for none).
func parse(data []byte, file string) (Config, error) {
	c := Default()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("not YAML: %w", err)
	}
	if len(doc.Content) > 0 {
		if err := decodeStrict(doc.Content[0], reflect.ValueOf(&c).Elem(), ""); err != nil {
			return Config{}, err
		}
		var more yaml.Node
		if err := dec.Decode(&more); err == nil {
			return Config{}, fmt.Errorf("line %d: a second YAML document; api.yaml is one mapping", more.Line)
		}
		if has(doc.Content[0], "sandbox", "local", "images") {
			c.Sandbox.Local.ImagesFrom = "sandbox.local.images"
			if file != "" {
				c.Sandbox.Local.ImagesFrom += " of " + file
				if im := c.Sandbox.Local.Images; im != "" && !filepath.IsAbs(im) {
					c.Sandbox.Local.Images = filepath.Join(filepath.Dir(file), im)
				}
			}
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// has says whether the mapping node holds the key path (decodeStrict
// checked its shape).
func has(node *yaml.Node, path ...string) bool {
	if len(path) == 0 {
		return true
	}
	if node.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == path[0] {
			return has(node.Content[i+1], path[1:]...)
		}
	}
	return false
}

// decodeStrict decodes node into v, refusing keys v has no field for and
// duplicated keys, and names the key path in every error.
func decodeStrict(node *yaml.Node, v reflect.Value, path string) error {
	if v.Kind() == reflect.Map {
		return decodeMap(node, v, path)
	}
	if v.Kind() == reflect.Slice {
		if node.Kind != yaml.SequenceNode {
			return fmt.Errorf("line %d: %s: want a list ([a, b] or one \"- item\" a line)", node.Line, path)
		}
		list := reflect.MakeSlice(v.Type(), len(node.Content), len(node.Content))
		for i, item := range node.Content {
			if err := decodeStrict(item, list.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(list)
		return nil
	}
	if v.Kind() != reflect.Struct {
		if node.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: want a single value", node.Line, path)
		}
		if err := node.Decode(v.Addr().Interface()); err != nil {
			if v.Type() == reflect.TypeFor[time.Duration]() {
				if durationShape.MatchString(node.Value) {
					// Well formed, but past time.Duration's 292 years.
					return fmt.Errorf("line %d: %s: %q is longer than any duration can be (2562047h)", node.Line, path, node.Value)
				}
				return fmt.Errorf("line %d: %s: %q is not a duration with its unit (e.g. 90s, 15m, 2h)", node.Line, path, node.Value)
			}
			return fmt.Errorf("line %d: %s: %q is not a %s", node.Line, path, node.Value, v.Kind())
		}
		return nil
	}
	if node.Kind != yaml.MappingNode {
		if node.Tag == "!!null" {
			return nil
		}
		where := path
		if where == "" {
			where = "the file"
		}
		return fmt.Errorf("line %d: %s: want a mapping of keys", node.Line, where)
	}
	fields := map[string]int{}
	var known []string
	for i := range v.NumField() {
		tag := v.Type().Field(i).Tag.Get("yaml")
		if tag == "-" {
			continue // set by Load, never by the file
		}
		fields[tag] = i
		known = append(known, tag)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, val := node.Content[i], node.Content[i+1]
		key := k.Value
		if path != "" {
			key = path + "." + k.Value
		}
		idx, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("line %d: unknown key %q (known here: %s)", k.Line, key, strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return fmt.Errorf("line %d: key %q given twice", k.Line, key)
		}
		seen[k.Value] = true
		if err := decodeStrict(val, v.Field(idx), key); err != nil {
			return err
		}
	}
	return nil
}

// decodeMap decodes a mapping of names to single values, refusing a name
// given twice. An empty mapping leaves the map nil, as in Default.
func decodeMap(node *yaml.Node, v reflect.Value, path string) error {
	if node.Tag == "!!null" {
		return nil
	}
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s: want a mapping of names to values", node.Line, path)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, val := node.Content[i], node.Content[i+1]
		if seen[k.Value] {
			return fmt.Errorf("line %d: key %q given twice", k.Line, path+"."+k.Value)
		}
		seen[k.Value] = true
		elem := reflect.New(v.Type().Elem()).Elem()
		if err := decodeStrict(val, elem, path+"."+k.Value); err != nil {
			return err
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		v.SetMapIndex(reflect.ValueOf(k.Value), elem)
	}
	return nil
}

// Validate checks every value; its error names the key and the rule it broke.
func (c *Config) Validate() error {
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil || host == "" {
		return fmt.Errorf("listen: %q is not host:port (e.g. 127.0.0.1:18200)", c.Listen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("listen: port %q is not 0..65535", port)
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("public_url: %q is not an http(s) URL of a host alone (e.g. https://api.example.com)", c.PublicURL)
		}
		c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
	}
	if err := c.OAuth.validate(); err != nil {
		return err
	}
	// One issuer (issue 41, Deliver 7): the first-party sign-in and OAuth
	// for agents are one authorization server, so its iss, its metadata's
	// issuer and its cookies' Secure come from one origin.
	if c.PublicURL != "" && c.OAuth.PublicURL != "" && c.PublicURL != c.OAuth.PublicURL {
		return fmt.Errorf("public_url %q and oauth.public_url %q name two origins: the api has one issuer; set one of them, or both to the same origin", c.PublicURL, c.OAuth.PublicURL)
	}
	if err := c.GW.validate(); err != nil {
		return err
	}
	if err := c.Signup.GitHub.validate(); err != nil {
		return err
	}
	if err := c.Connect.validate(); err != nil {
		return err
	}
	if c.StateDir == "" || !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("state_dir: %q is not an absolute path", c.StateDir)
	}
	if f := c.Secrets.MasterKeyFile; f != "" && !filepath.IsAbs(f) {
		return fmt.Errorf("secrets.master_key_file: %q is not an absolute path", f)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: %q is not debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return fmt.Errorf("log.format: %q is not text or json", c.Log.Format)
	}
	if c.Database.URL != "" {
		if _, err := pgx.ParseConfig(c.Database.URL); err != nil {
			// pgx's message can quote the URL with its password: name the rule only.
			return errors.New("database.url: not a PostgreSQL connection URL (postgres://user@host/db?...)")
		}
	}
	if c.Database.SystemUser == "" {
		return errors.New("database.system_user: empty (the embedded cluster needs a non-root system user)")
	}
	if c.Database.MaxConns < 1 || c.Database.MaxConns > 1000 {
		return fmt.Errorf("database.max_conns: %d is not 1..1000", c.Database.MaxConns)
	}
	for i, p := range c.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			return fmt.Errorf("trusted_proxies[%d]: %q is not a CIDR prefix (e.g. 127.0.0.1/32 or 10.0.0.0/8)", i, p)
		}
	}
	si := c.Console.SignIn
	if si.PerUser < 1 || si.PerUser > 1000 {
		return fmt.Errorf("console.sign_in.per_user: %d is not 1..1000", si.PerUser)
	}
	if si.PerAddress < 1 || si.PerAddress > 100000 {
		return fmt.Errorf("console.sign_in.per_address: %d is not 1..100000", si.PerAddress)
	}
	if si.Window < time.Second || si.Window > 24*time.Hour {
		return fmt.Errorf("console.sign_in.window: %s is not 1s..24h", si.Window)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"http.read_header_timeout", c.HTTP.ReadHeaderTimeout}, {"http.read_timeout", c.HTTP.ReadTimeout}, {"http.idle_timeout", c.HTTP.IdleTimeout},
		{"http.ping_after", c.HTTP.PingAfter}, {"http.ping_timeout", c.HTTP.PingTimeout}, {"http.screen_stall", c.HTTP.ScreenStall}} {
		if d.v < MinTimeout || d.v > MaxTimeout {
			return fmt.Errorf("%s: %s is not 100ms..24h", d.key, d.v)
		}
	}
	if n := c.HTTP.MaxConnsPerAddress; n < 1 || n > 100000 {
		return fmt.Errorf("http.max_conns_per_address: %d is not 1..100000", n)
	}
	if r := c.Boxes.RecoverEvery; r < time.Second || r > time.Hour {
		return fmt.Errorf("boxes.recover_every: %s is not 1s..1h", r)
	}
	if n := c.Boxes.MaxOperations; n < 1 || n > 256 {
		return fmt.Errorf("boxes.max_operations: %d is not 1..256", n)
	}
	if n := c.Boxes.MaxQueued; n < 1 || n > 100000 {
		return fmt.Errorf("boxes.max_queued: %d is not 1..100000", n)
	}
	if err := c.State.validate(); err != nil {
		return err
	}
	return c.Sandbox.validate()
}

// validate checks the state section; s3's keys are needed with store s3
// only, and the service itself is checked when the api opens it.
func (s *State) validate() error {
	if s.PresignExpiry < time.Second || s.PresignExpiry > time.Hour {
		return fmt.Errorf("state.presign_expiry: %s is not 1s..1h", s.PresignExpiry)
	}
	if s.Retention.Keep < 1 || s.Retention.Keep > 1000 {
		return fmt.Errorf("state.retention.keep: %d is not 1..1000", s.Retention.Keep)
	}
	if s.Retention.MaxAge < 0 {
		return fmt.Errorf("state.retention.max_age: %s is negative", s.Retention.MaxAge)
	}
	if s.GCEvery < time.Second {
		return fmt.Errorf("state.gc_every: %s is under 1s", s.GCEvery)
	}
	switch s.S3.URLStyle {
	case "path", "virtual":
	default:
		return fmt.Errorf("state.s3.url_style: %q is not path or virtual", s.S3.URLStyle)
	}
	for _, f := range []struct{ key, v string }{{"state.s3.credentials_file", s.S3.CredentialsFile}, {"state.s3.ca_file", s.S3.CAFile}} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			return fmt.Errorf("%s: %q is not an absolute path", f.key, f.v)
		}
	}
	switch s.Store {
	case "embedded":
		return nil
	case "s3":
	default:
		return fmt.Errorf("state.store: %q is not embedded or s3", s.Store)
	}
	u, err := url.Parse(s.S3.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("state.s3.endpoint: %q is not http(s)://HOST[:PORT] alone (state.store is s3)", s.S3.Endpoint)
	}
	if s.S3.Bucket == "" {
		return errors.New("state.s3.bucket: empty (state.store is s3)")
	}
	if s.S3.CredentialsFile == "" {
		return errors.New("state.s3.credentials_file: empty (state.store is s3; an AWS shared credentials file)")
	}
	if s.S3.Profile == "" {
		return errors.New("state.s3.profile: empty (the credentials file's section, e.g. default)")
	}
	return nil
}

var (
	// durationShape is time.ParseDuration's grammar, to tell a value too
	// large for it from one that is not a duration at all.
	durationShape = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)
	hostNameRule  = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)
	bridgeRule    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)
)

func (s *Sandbox) validate() error {
	for name, u := range s.Hosts {
		if !hostNameRule.MatchString(name) {
			return fmt.Errorf("sandbox.hosts: %q is not a host name (1 to 63 of [a-z0-9-], a letter first, not '-' last)", name)
		}
		if _, _, err := SandboxdURL(u); err != nil {
			return fmt.Errorf("sandbox.hosts.%s: %w", name, err)
		}
		if strings.HasPrefix(u, "https://") && s.CAFile == "" {
			return fmt.Errorf("sandbox.hosts.%s is https:// but sandbox.ca_file is empty (the PEM file of the CA that signs the daemons' certificates, or the daemon's own certificate)", name)
		}
	}
	if s.CAFile != "" && !filepath.IsAbs(s.CAFile) {
		return fmt.Errorf("sandbox.ca_file: %q is not an absolute path", s.CAFile)
	}
	if s.TokenFile != "" && !filepath.IsAbs(s.TokenFile) {
		return fmt.Errorf("sandbox.token_file: %q is not an absolute path", s.TokenFile)
	}
	if s.PingAfter < MinTimeout || s.PingAfter > MaxTimeout {
		return fmt.Errorf("sandbox.ping_after: %s is not 100ms..24h", s.PingAfter)
	}
	if s.Local.Images == "" {
		return errors.New("sandbox.local.images: empty (the directory of image roots, e.g. out/images)")
	}
	if !filepath.IsAbs(s.Local.Images) {
		return fmt.Errorf("sandbox.local.images: %q is not an absolute path (a relative one is read from the config file's directory; this text has no file)", s.Local.Images)
	}
	if !filepath.IsAbs(s.Local.StateDir) {
		return fmt.Errorf("sandbox.local.state_dir: %q is not an absolute path", s.Local.StateDir)
	}
	if !bridgeRule.MatchString(s.Local.Bridge) {
		return fmt.Errorf("sandbox.local.bridge: %q is not 1 to 15 of [a-z0-9-] from a letter (an interface name)", s.Local.Bridge)
	}
	if p, err := netip.ParsePrefix(s.Local.Gateway); err != nil || !p.Addr().Is4() || p.Bits() > 24 || p.Bits() < 8 {
		return fmt.Errorf("sandbox.local.gateway: %q is not an IPv4 address with a prefix of 8 to 24 bits (e.g. 10.203.0.1/16)", s.Local.Gateway)
	}
	if s.Local.Spares < 0 || s.Local.Spares > MaxSpares {
		return fmt.Errorf("sandbox.local.spares: %d is not 0 to %d", s.Local.Spares, MaxSpares)
	}
	for h, a := range s.Local.Egress.Resolve {
		if !hostname.Valid(h) || h != strings.ToLower(h) {
			return fmt.Errorf("sandbox.local.egress.resolve: %q is not a lower-case DNS host name (a key's host)", h)
		}
		if _, err := netip.ParseAddr(a); err != nil {
			return fmt.Errorf("sandbox.local.egress.resolve.%s: %q is not an IP address", h, a)
		}
	}
	if f := s.Local.Egress.UpstreamCAFile; f != "" && !filepath.IsAbs(f) {
		return fmt.Errorf("sandbox.local.egress.upstream_ca_file: %q is not an absolute path", f)
	}
	if _, err := egress.ParseAdmit(s.Local.Egress.Admit); err != nil {
		return fmt.Errorf("sandbox.local.egress.admit: %w", err)
	}
	return nil
}

// SandboxdURL reads a sandbox.hosts value: unix:/PATH (socket is the path,
// base http://sandboxd), https://HOST:PORT, or http://HOST:PORT where HOST
// is a loopback address or localhost (socket empty). Cleartext TCP to
// another machine is refused: the bearer token (root over every box of
// that host) and every exec's input and output would cross the network
// readable.
func SandboxdURL(v string) (base, socket string, err error) {
	if path, ok := strings.CutPrefix(v, "unix:"); ok {
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return "", "", fmt.Errorf("%q: a unix socket must be an absolute, clean path (unix:/run/cocoonbox-sandboxd.sock)", v)
		}
		return "http://sandboxd", path, nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", "", fmt.Errorf("%q is neither unix:/PATH, https://HOST:PORT nor http://HOST:PORT", v)
	}
	if u.Scheme == "http" && !sandbox.CleartextHost(u.Hostname()) {
		return "", "", fmt.Errorf("%q: cleartext http:// is for a loopback address only (the token and every exec's input and output would cross the network readable): use https:// with sandbox.ca_file, or unix:/PATH", v)
	}
	return strings.TrimSuffix(v, "/"), "", nil
}

// TrustedPrefixes is TrustedProxies parsed; call it on a validated Config.
func (c *Config) TrustedPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(c.TrustedProxies))
	for _, p := range c.TrustedProxies {
		if pp, err := netip.ParsePrefix(p); err == nil {
			out = append(out, pp.Masked())
		}
	}
	return out
}

// MinTimeout and MaxTimeout bound every timeout of the http section
// (100ms..24h): 0 would mean "none" to net/http for some, "at once" for
// others.
const (
	MinTimeout = 100 * time.Millisecond
	MaxTimeout = 24 * time.Hour
)

// Issuer is the api's one public origin, the issuer of every sign-in
// (the first-party clients' and the agents'): public_url, else
// oauth.public_url, else http://<listen>. Validate refuses the two keys
// naming different origins.
func (c *Config) Issuer() string {
	switch {
	case c.PublicURL != "":
		return c.PublicURL
	case c.OAuth.PublicURL != "":
		return c.OAuth.PublicURL
	}
	return "http://" + c.Listen
}

// Secure says whether the issuer is https: every cookie the api sets is
// then Secure.
func (c *Config) Secure() bool { return strings.HasPrefix(c.Issuer(), "https:") }

// validate checks signup.github: web_url an https origin, api_url an https
// URL without query, fragment or user, ca_file absolute; a trailing "/" is
// dropped from both URLs.
func (g *SignupGitHub) validate() error {
	for _, k := range []struct {
		key    string
		v      *string
		origin bool
	}{{"signup.github.web_url", &g.WebURL, true}, {"signup.github.api_url", &g.APIURL, false}} {
		u, err := url.Parse(*k.v)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Opaque != "" || u.RawQuery != "" || u.ForceQuery ||
			u.Fragment != "" || u.User != nil || (k.origin && u.Path != "" && u.Path != "/") {
			what := "an https URL (e.g. https://api.github.com, https://ghe.example.com/api/v3)"
			if k.origin {
				what = "an https origin alone (e.g. https://github.com)"
			}
			return fmt.Errorf("%s: %q is not %s", k.key, *k.v, what)
		}
		*k.v = strings.TrimSuffix(*k.v, "/")
	}
	if g.CAFile != "" && !filepath.IsAbs(g.CAFile) {
		return fmt.Errorf("signup.github.ca_file: %q is not an absolute path", g.CAFile)
	}
	return nil
}

// validate checks oauth.public_url: an origin alone (no path, query,
// fragment or user), https, or http on localhost or a loopback address;
// a trailing "/" is dropped, as the issuer is compared as a string.
func (o *OAuth) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"idle_hibernate", o.IdleHibernate}, {"user_idle_hibernate", o.UserIdleHibernate}} {
		if d.v != 0 && (d.v < time.Second || d.v > 30*24*time.Hour) {
			return fmt.Errorf("oauth.%s: %s is neither 0s (off) nor 1s..720h", d.name, d.v)
		}
	}
	if r := o.IdleCheckEvery; r < time.Second || r > time.Hour {
		return fmt.Errorf("oauth.idle_check_every: %s is not 1s..1h", r)
	}
	if o.PublicURL == "" {
		return nil
	}
	if err := tokenOrigin("oauth.public_url", o.PublicURL); err != nil {
		return err
	}
	o.PublicURL = strings.TrimSuffix(o.PublicURL, "/")
	return nil
}
