package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEmptyFileIsTheDefaults(t *testing.T) {
	for _, text := range []string{"", "# nothing\n", "{}\n"} {
		c, err := Parse([]byte(text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if !reflect.DeepEqual(c, Default()) {
			t.Fatalf("%q: %+v, want the defaults %+v", text, c, Default())
		}
	}
}

func TestFileOverridesDefaultsKeyByKey(t *testing.T) {
	c, err := Parse([]byte("listen: 0.0.0.0:9000\ndatabase:\n  url: postgres://u@db.example/cocoonbox\n  max_conns: 40\nlog: {format: json}\nhttp: {ping_after: 500ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Listen = "0.0.0.0:9000"
	want.Database.URL = "postgres://u@db.example/cocoonbox"
	want.Database.MaxConns = 40
	want.Log.Format = "json"
	want.HTTP.PingAfter = 500 * time.Millisecond
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
}

// Bad input: an api.yaml with an unknown key fails at start naming the key.
func TestBadInputUnknownKeyIsNamed(t *testing.T) {
	cases := map[string]string{
		"listne: 127.0.0.1:1\n":            `unknown key "listne"`,
		"database:\n  urll: x\n":           `unknown key "database.urll"`,
		"log:\n  level: info\n  colour: 1": `unknown key "log.colour"`,
	}
	for text, want := range cases {
		_, err := Parse([]byte(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %s", text, err, want)
		}
	}
}

func TestBadValueIsNamedWithItsRule(t *testing.T) {
	cases := map[string]string{
		"listen: nohost\n":                                                       "listen:",
		"listen: 127.0.0.1:70000\n":                                              "listen: port",
		"public_url: ftp://x\n":                                                  "public_url:",
		"public_url: https://x/path\n":                                           "public_url:",
		"state_dir: relative/dir\n":                                              "state_dir:",
		"oauth:\n  public_url: http://api.example.com\n":                         "oauth.public_url: \"http://api.example.com\" is neither https nor http on a loopback host",
		"oauth:\n  public_url: http://10.0.0.1:8080\n":                           "oauth.public_url: \"http://10.0.0.1:8080\" is neither https",
		"oauth:\n  public_url: https://x/cb\n":                                   "oauth.public_url: \"https://x/cb\" is not an origin alone",
		"oauth:\n  public_url: https://x?a=b\n":                                  "oauth.public_url:",
		"oauth:\n  public_url: https://u@x\n":                                    "oauth.public_url:",
		"oauth:\n  public_url: javascript:alert(1)\n":                            "oauth.public_url:",
		"signup:\n  github:\n    web_url: http://github.com\n":                   `signup.github.web_url: "http://github.com" is not an https origin alone`,
		"signup:\n  github:\n    web_url: https://github.com/login\n":            `signup.github.web_url: "https://github.com/login" is not an https origin alone`,
		"signup:\n  github:\n    api_url: ''\n":                                  `signup.github.api_url: "" is not an https URL`,
		"signup:\n  github:\n    api_url: https://u@api.github.com\n":            `signup.github.api_url:`,
		"signup:\n  github:\n    api_url: https://x/api/v3?a=b\n":                `signup.github.api_url:`,
		"signup:\n  github:\n    ca_file: ca.pem\n":                              `signup.github.ca_file: "ca.pem" is not an absolute path`,
		"signup:\n  github:\n    client_secret: x\n":                             `unknown key "signup.github.client_secret"`,
		"log:\n  level: loud\n":                                                  "log.level:",
		"log:\n  format: xml\n":                                                  "log.format:",
		"database:\n  max_conns: 0\n":                                            "database.max_conns: 0",
		"database:\n  max_conns: many\n":                                         `database.max_conns: "many" is not a int`,
		"database:\n  url: 'http://%zz'\n":                                       "database.url:",
		"database: [1, 2]\n":                                                     "database: want a mapping",
		"listen: [a]\n":                                                          "listen: want a single value",
		"listen: a:1\nlisten: b:2\n":                                             `key "listen" given twice`,
		"a: 1\n---\nb: 2\n":                                                      "unknown key",
		"listen: 1:1\n---\nlog: {}\n":                                            "second YAML document",
		"listen: [\n":                                                            "not YAML",
		"sandbox:\n  hosts: {Bad: unix:/s}\n":                                    `sandbox.hosts: "Bad" is not a host name`,
		"sandbox:\n  hosts: {a: ftp://x}\n":                                      `sandbox.hosts.a: "ftp://x" is neither unix:/PATH, https://HOST:PORT nor http://HOST:PORT`,
		"sandbox:\n  hosts: {a: unix:rel}\n":                                     "sandbox.hosts.a:",
		"sandbox:\n  hosts: [a]\n":                                               "sandbox.hosts: want a mapping",
		"sandbox:\n  hosts: {a: unix:/s, a: unix:/t}\n":                          `key "sandbox.hosts.a" given twice`,
		"sandbox:\n  hosts: {a: [1]}\n":                                          "sandbox.hosts.a: want a single value",
		"sandbox:\n  local: {images: ''}\n":                                      "sandbox.local.images: empty",
		"state: {store: disk}\n":                                                 `state.store: "disk" is not embedded or s3`,
		"state: {presign_expiry: 2h}\n":                                          "state.presign_expiry: 2h0m0s is not 1s..1h",
		"state: {retention: {keep: 0}}\n":                                        "state.retention.keep: 0 is not 1..1000",
		"state: {retention: {max_age: -1h}}\n":                                   "state.retention.max_age: -1h0m0s is negative",
		"state: {gc_every: 10ms}\n":                                              "state.gc_every: 10ms is under 1s",
		"state: {s3: {url_style: dns}}\n":                                        `state.s3.url_style: "dns" is not path or virtual`,
		"state: {s3: {credentials_file: creds}}\n":                               `state.s3.credentials_file: "creds" is not an absolute path`,
		"state: {store: s3}\n":                                                   `state.s3.endpoint: "" is not http(s)://HOST[:PORT] alone`,
		"state: {store: s3, s3: {endpoint: 'https://s3.x/bucket'}}\n":            "state.s3.endpoint:",
		"state: {store: s3, s3: {endpoint: 'https://s3.x'}}\n":                   "state.s3.bucket: empty",
		"state: {store: s3, s3: {endpoint: 'https://s3.x', bucket: b}}\n":        "state.s3.credentials_file: empty",
		"sandbox:\n  local: {state_dir: x}\n":                                    "sandbox.local.state_dir:",
		"sandbox:\n  local: {bridge: way-too-long-name}\n":                       "sandbox.local.bridge:",
		"sandbox:\n  local: {gateway: 10.0.0.1}\n":                               "sandbox.local.gateway:",
		"sandbox:\n  local: {spares: 9}\n":                                       "sandbox.local.spares: 9 is not 0 to 8",
		"sandbox:\n  local: {spares: -1}\n":                                      "sandbox.local.spares: -1 is not 0 to 8",
		"sandbox:\n  local: {bridgee: x}\n":                                      `unknown key "sandbox.local.bridgee"`,
		"sandbox:\n  local: {egress: {resolve: {Api.Example.com: 127.0.0.1}}}\n": "sandbox.local.egress.resolve: \"Api.Example.com\" is not a lower-case DNS host name",
		"sandbox:\n  local: {egress: {resolve: {api.example.com: localhost}}}\n": "sandbox.local.egress.resolve.api.example.com: \"localhost\" is not an IP address",
		"sandbox:\n  local: {egress: {upstream_ca_file: ca.pem}}\n":              "sandbox.local.egress.upstream_ca_file:",
		"sandbox:\n  token_file: rel\n":                                          "sandbox.token_file:",
		"trusted_proxies: [10.0.0.1]\n":                                          `trusted_proxies[0]: "10.0.0.1" is not a CIDR prefix`,
		"trusted_proxies: 127.0.0.1/32\n":                                        "trusted_proxies: want a list",
		"trusted_proxies: [[a]]\n":                                               "trusted_proxies[0]: want a single value",
		"console:\n  sign_in:\n    per_user: 0\n":                                "console.sign_in.per_user: 0 is not 1..1000",
		"console:\n  sign_in:\n    per_address: -1\n":                            "console.sign_in.per_address: -1",
		"console:\n  sign_in:\n    window: soon\n":                               `console.sign_in.window: "soon" is not a duration with its unit`,
		"console:\n  sign_in:\n    window: 15\n":                                 `console.sign_in.window: "15" is not a duration with its unit`,
		"console:\n  sign_in:\n    window: 48h\n":                                "console.sign_in.window: 48h0m0s is not 1s..24h",
		"console:\n  sign_in:\n    per_user: 3\n    pre: 1\n":                    `unknown key "console.sign_in.pre"`,
		"sandbox:\n  ping_after: 50ms\n":                                         "sandbox.ping_after: 50ms is not 100ms..24h",
		"boxes:\n  recover_every: 500ms\n":                                       "boxes.recover_every: 500ms is not 1s..1h",
		"oauth:\n  idle_hibernate: 500ms\n":                                      "oauth.idle_hibernate: 500ms is neither 0s (off) nor 1s..720h",
		"oauth:\n  user_idle_hibernate: 800h\n":                                  "oauth.user_idle_hibernate: 800h0m0s is neither 0s (off) nor 1s..720h",
		"oauth:\n  idle_check_every: 0s\n":                                       "oauth.idle_check_every: 0s is not 1s..1h",
		"boxes:\n  recover_every: 2h\n":                                          "boxes.recover_every: 2h0m0s is not 1s..1h",
		"boxes:\n  max_operations: 0\n":                                          "boxes.max_operations: 0 is not 1..256",
		"boxes:\n  max_operations: 257\n":                                        "boxes.max_operations: 257 is not 1..256",
		"boxes:\n  max_queued: 0\n":                                              "boxes.max_queued: 0 is not 1..100000",
		"boxes:\n  recover_evry: 1m\n":                                           `unknown key "boxes.recover_evry"`,
		"boxes:\n  recover_every: 99999999999h\n":                                `line 2: boxes.recover_every: "99999999999h" is longer than any duration can be (2562047h)`,
		"http:\n  ping_after: soon\n":                                            `http.ping_after: "soon" is not a duration`,
		"http:\n  idle_timeout: 10\n":                                            `http.idle_timeout: "10" is not a duration`,
		"http:\n  ping_timeout: 0s\n":                                            "http.ping_timeout: 0s is not 100ms..24h",
		"http:\n  read_header_timeout: 25h\n":                                    "http.read_header_timeout: 25h0m0s is not",
		"sandbox:\n  local:\n    egress: {admit: [10.0.0.1]}\n":                  `sandbox.local.egress.admit: "10.0.0.1" is not a network in CIDR form`,
		"sandbox:\n  local:\n    egress: {admit: [10.1.2.3/8]}\n":                `sandbox.local.egress.admit: "10.1.2.3/8" has host bits set: the network is 10.0.0.0/8`,
		"sandbox:\n  local:\n    egress: {admit: [127.0.0.0/8]}\n":               `sandbox.local.egress.admit: "127.0.0.0/8" overlaps loopback 127.0.0.0/8`,
		"sandbox:\n  local:\n    egress: {admit: [0.0.0.0/0]}\n":                 `sandbox.local.egress.admit: "0.0.0.0/0" overlaps loopback`,
		"sandbox:\n  local:\n    egress: {admit: ['::1/128']}\n":                 `sandbox.local.egress.admit: "::1/128" overlaps loopback ::1/128`,
		"sandbox:\n  local:\n    egress: {admit: ['::/0']}\n":                    `sandbox.local.egress.admit: "::/0" overlaps loopback ::1/128`,
		"sandbox:\n  local:\n    egress: {admit: [0.0.0.0/32]}\n":                `sandbox.local.egress.admit: "0.0.0.0/32" overlaps unspecified 0.0.0.0/32`,
		"sandbox:\n  local:\n    egress: {admit: ['::/128']}\n":                  `sandbox.local.egress.admit: "::/128" overlaps unspecified ::/128`,
		"sandbox:\n  local:\n    egress: {admit: [169.254.169.254/32]}\n":        `sandbox.local.egress.admit: "169.254.169.254/32" overlaps link-local 169.254.0.0/16`,
		"sandbox:\n  local:\n    egress: {admit: ['fe80::/64']}\n":               `sandbox.local.egress.admit: "fe80::/64" overlaps link-local fe80::/10`,
		"sandbox:\n  local:\n    egress: {admit: [239.1.0.0/16]}\n":              `sandbox.local.egress.admit: "239.1.0.0/16" overlaps multicast 224.0.0.0/4`,
		"sandbox:\n  local:\n    egress: {admit: ['ff02::/16']}\n":               `sandbox.local.egress.admit: "ff02::/16" overlaps multicast ff00::/8`,
		"sandbox:\n  local:\n    egress: {admit: ['::ffff:10.0.0.0/104']}\n":     `sandbox.local.egress.admit: "::ffff:10.0.0.0/104" is an IPv4-mapped IPv6 network`,
		"sandbox:\n  local:\n    egress: {admit: 10.0.0.0/8}\n":                  "sandbox.local.egress.admit: want a list",
	}
	for text, want := range cases {
		_, err := Parse([]byte(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", text, err, want)
		}
	}
}

func TestSandboxHostsAreReadByName(t *testing.T) {
	c, err := Parse([]byte("sandbox:\n  hosts:\n    host-a: unix:/run/sandboxd.sock\n    host-b: https://10.0.0.2:18300\n  ca_file: /etc/cocoonbox/sandboxd-ca.pem\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"host-a": "unix:/run/sandboxd.sock", "host-b": "https://10.0.0.2:18300"}
	if !reflect.DeepEqual(c.Sandbox.Hosts, want) {
		t.Fatalf("hosts %v, want %v", c.Sandbox.Hosts, want)
	}
	for v, want := range map[string][2]string{"unix:/run/s.sock": {"http://sandboxd", "/run/s.sock"}, "http://127.0.0.1:1/": {"http://127.0.0.1:1", ""},
		"http://localhost:1": {"http://localhost:1", ""}, "http://[::1]:1": {"http://[::1]:1", ""}, "https://h:1": {"https://h:1", ""}} {
		base, socket, err := SandboxdURL(v)
		if err != nil || base != want[0] || socket != want[1] {
			t.Errorf("%s: %q %q %v, want %v", v, base, socket, err, want)
		}
	}
}

// Issue 24: a remote sandboxd was reachable only in cleartext. Cleartext
// TCP is refused unless its address is loopback, naming the rule; an
// https:// host needs the CA file.
func TestACleartextSandboxdOnANonLoopbackAddressIsRefused(t *testing.T) {
	for text, want := range map[string]string{
		"sandbox:\n  hosts: {a: 'http://10.0.0.2:18300'}\n":      `sandbox.hosts.a: "http://10.0.0.2:18300": cleartext http:// is for a loopback address only`,
		"sandbox:\n  hosts: {a: 'http://sandboxd.lan:18300'}\n":  "cleartext http:// is for a loopback address only",
		"sandbox:\n  hosts: {a: 'http://[2001:db8::2]:18300'}\n": "cleartext http:// is for a loopback address only",
		"sandbox:\n  hosts: {a: 'https://10.0.0.2:18300'}\n":     "sandbox.hosts.a is https:// but sandbox.ca_file is empty",
		"sandbox:\n  ca_file: ca.pem\n":                          `sandbox.ca_file: "ca.pem" is not an absolute path`,
	} {
		if _, err := Parse([]byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", text, err, want)
		}
	}
}

func TestDatabaseURLErrorNeverQuotesThePassword(t *testing.T) {
	_, err := Parse([]byte("database:\n  url: 'postgres://u:s3cret@h:notaport/db'\n"))
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v: want a refusal without the password", err)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.yaml")
	if err := os.WriteFile(path, []byte("bogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+": line 1: unknown key") {
		t.Fatalf("error %v, want it to start with the file, the line and the key", err)
	}
}

func TestIssuerDefaultsToTheListenAddress(t *testing.T) {
	c := Default()
	if got := c.Issuer(); got != "http://127.0.0.1:18200" {
		t.Fatalf("issuer %q", got)
	}
	c.PublicURL = "https://api.example.com/"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.Issuer(); got != "https://api.example.com" {
		t.Fatalf("issuer %q", got)
	}
}

// Issue 41, Deliver 7 (one issuer): with only oauth.public_url set, it is
// the issuer of the first-party sign-in too (it was http://<listen>, so
// the CLI's redirect carried an iss the metadata did not name), and
// Secure follows it; the same origin under both keys is one issuer.
func TestOAuthPublicURLAloneIsTheOneIssuer(t *testing.T) {
	for _, text := range []string{
		"oauth:\n  public_url: https://api.example.com/\n",
		"public_url: https://api.example.com\noauth:\n  public_url: https://api.example.com/\n",
	} {
		c, err := Parse([]byte(text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if got := c.Issuer(); got != "https://api.example.com" || !c.Secure() {
			t.Errorf("%q: issuer %q, Secure %v; want https://api.example.com, true", text, got, c.Secure())
		}
	}
	if c := Default(); c.Secure() {
		t.Error("the default http://<listen> issuer is Secure")
	}
}

// Two different origins under public_url and oauth.public_url are refused
// at start, the error naming both keys and both values.
func TestTwoIssuersAreRefusedNamingBothKeys(t *testing.T) {
	for _, text := range []string{
		"public_url: https://a.example.com\noauth:\n  public_url: https://b.example.com\n",
		"public_url: http://127.0.0.1:18200\noauth:\n  public_url: https://api.example.com\n",
	} {
		_, err := Parse([]byte(text))
		if err == nil || !strings.Contains(err.Error(), "public_url \"") || !strings.Contains(err.Error(), "oauth.public_url \"") ||
			!strings.Contains(err.Error(), "two origins") {
			t.Errorf("%q: %v; want a refusal naming public_url and oauth.public_url", text, err)
		}
	}
}

// The shipped api.yaml is the defaults, and names every key.
func TestShippedFileIsTheDefaultsWithEveryKey(t *testing.T) {
	c, err := Load("api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.Sandbox.Local.ImagesFrom = Default().Sandbox.Local.ImagesFrom // the file's name, not a value
	if !reflect.DeepEqual(c, Default()) {
		t.Fatalf("api.yaml is %+v\nthe defaults are %+v", c, Default())
	}
	text, _ := os.ReadFile("api.yaml")
	// Every key of Config, from its yaml tags, at its depth in the file.
	var walk func(t reflect.Type, indent string)
	walk = func(typ reflect.Type, indent string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Tag.Get("yaml") == "-" {
				continue
			}
			key := "\n" + indent + f.Tag.Get("yaml") + ":"
			if !strings.Contains(string(text), key) {
				t.Errorf("api.yaml does not document %q", strings.TrimSpace(key))
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, indent+"  ")
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

func TestOAuthPublicURLIsAnOriginWithoutTrailingSlash(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example.com/": "https://api.example.com",
		"https://api.example.com":  "https://api.example.com",
		"http://127.0.0.1:18200/":  "http://127.0.0.1:18200",
		"http://localhost:8080":    "http://localhost:8080",
		"http://[::1]:8080":        "http://[::1]:8080",
	} {
		c, err := Parse([]byte("oauth:\n  public_url: " + in + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if c.OAuth.PublicURL != want {
			t.Errorf("%s: public_url %q, want %q", in, c.OAuth.PublicURL, want)
		}
	}
}

// sandbox.local.egress.admit is read as networks, IPv4 and IPv6.
func TestEgressAdmitIsReadAsNetworks(t *testing.T) {
	c, err := Parse([]byte("sandbox:\n  local:\n    egress:\n      admit: [10.20.0.0/16, 203.0.113.80/32, 'fd00:1::/64']\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Sandbox.Local.AdmitPrefixes()); got != "[10.20.0.0/16 203.0.113.80/32 fd00:1::/64]" {
		t.Fatalf("AdmitPrefixes: %s", got)
	}
}

// Issue 45, Deliver 5: the image folder comes from the binary's
// configuration, never from the working directory it starts in: a
// relative sandbox.local.images is read from the config file's directory,
// the same folder from any working directory and however the file is
// named; the default is absolute; ImagesFrom says which.
func TestImagesAreReadFromTheConfigFilesDirectory(t *testing.T) {
	etc := t.TempDir()
	path := filepath.Join(etc, "api.yaml")
	if err := os.WriteFile(path, []byte("sandbox:\n  local:\n    images: images\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(etc, "images")
	for _, c := range []struct{ cwd, path string }{{t.TempDir(), path}, {etc, "api.yaml"}, {"/", path}} {
		t.Chdir(c.cwd)
		got, err := Load(c.path)
		if err != nil {
			t.Fatalf("from %s, Load(%s): %v", c.cwd, c.path, err)
		}
		if got.Sandbox.Local.Images != want || got.Sandbox.Local.ImagesFrom != "sandbox.local.images of "+path {
			t.Errorf("from %s, Load(%s): images %q from %q, want %q from the file", c.cwd, c.path, got.Sandbox.Local.Images, got.Sandbox.Local.ImagesFrom, want)
		}
	}
	d := Default().Sandbox.Local
	if !filepath.IsAbs(d.Images) || d.ImagesFrom != "the default" {
		t.Errorf("the default images %q from %q: want an absolute path from the default", d.Images, d.ImagesFrom)
	}
	_, err := Parse([]byte("sandbox:\n  local:\n    images: images\n"))
	if err == nil || !strings.Contains(err.Error(), `sandbox.local.images: "images" is not an absolute path`) {
		t.Errorf("Parse of a relative images, without a file: %v", err)
	}
}
