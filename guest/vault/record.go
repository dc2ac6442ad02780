// Package vault turns the claim env's key records into the vault files a
// box's shells and agent read: /run/cocoonbox-vault/{vault.sh,names,keys}.
//
// Contract: Box API keys (and the placeholder form under Key vault).
//
// The api puts records into two claim env entries, COCOONBOX_VAULT (the
// user's vault keys) and COCOONBOX_CONNECT (Connect's injected grants),
// each a list of records separated by spaces:
//
//	NAME=placeholder;host,host;how
//
// Records.Add reads such a list (ParseClaimEnv both of a claim env file);
// Render turns the records into the three files; Install swaps a render
// into place atomically.
//
// What this package decides where the contract is silent:
//
//   - Records are separated by runs of ASCII spaces only. Any other byte
//     (a tab, a newline from a quoted claim env value) belongs to a record,
//     and a record with a control byte is refused.
//   - A record is at most MaxRecordLen bytes; a longer one is refused.
//   - NAME and placeholder are [A-Za-z0-9_-], at least one byte each.
//   - A NAME that is valid by the contract but is not a shell variable
//     name ([A-Za-z_][A-Za-z0-9_]*: it starts with a digit or holds '-')
//     cannot be exported. Such a record with hosts still goes into keys
//     (sandboxd swaps its placeholder on those hosts all the same, and the
//     agent lists it), and is left out of vault.sh and names, with a
//     warning. Without hosts it would do nothing, so it is refused.
//   - A NAME that a login shell, the dynamic loader or a common runtime or
//     tool gives a meaning to (PATH, PS0, BASH_ENV, LD_*, LESSOPEN,
//     PYTHON*, JAVA_TOOL_OPTIONS, GIT_*, ... see Reserved) is refused:
//     exporting a placeholder under it would break or steer every login
//     shell and what runs in it. A list of names refused, not of names
//     allowed: keys are named by their vendors (GITHUB_TOKEN,
//     OPENAI_API_KEY, LINK_NO_REFRESH), which no allowlist can know.
//   - A repeated NAME: the first record wins, later ones are refused.
//     COCOONBOX_VAULT is read before COCOONBOX_CONNECT, so the user's own
//     key wins over a Connect grant of the same name, and nothing appended
//     later can shadow a key already listed.
//   - hosts are DNS host names (letters, digits, '-', dot-separated labels
//     of 1 to 63 bytes, not starting or ending with '-', 253 bytes at
//     most), compared as written. An empty list means "only sets a
//     variable"; then how must be empty too.
//   - how, with hosts, is "Header: template" (an HTTP header name, a colon,
//     optional spaces, then a template with exactly one {}) or "?param={}"
//     (param of [A-Za-z0-9._~-]), at most MaxHowLen bytes decoded: it
//     reaches the agent's system prompt through keys. In the raw record, '%' is only allowed in
//     the three escapes %25, %20 and %3B (either case of hex), which decode
//     to '%', ' ' and ';'.
package vault

import (
	"fmt"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/hostname"
)

// MaxRecordLen is the longest record, in bytes, that Records.Add accepts.
// A placeholder is a short vendor prefix, "cbv_" and 32 hex digits, so 4 KiB
// leaves ample room and keeps a hostile entry from bloating the files.
const MaxRecordLen = 4096

// MaxHowLen is the longest how, decoded, that a record may carry. Real
// ones are a header and a short template ("Authorization: Bearer {}");
// the agent lists each key's how in its system prompt, so a long one
// would be text the api never meant the model to read.
const MaxHowLen = 256

// Source names the claim env entry a record came from.
type Source string

// The claim env entries that carry records, in the order they are read.
const (
	SourceVault   Source = "COCOONBOX_VAULT"
	SourceConnect Source = "COCOONBOX_CONNECT"
)

// Sources are the claim env entries ParseClaimEnv reads, in order.
var Sources = []Source{SourceVault, SourceConnect}

// Record is one accepted record.
type Record struct {
	// Name is the variable's name, [A-Za-z0-9_-]+.
	Name string
	// Placeholder is what sandboxd swaps for the key, [A-Za-z0-9_-]+.
	Placeholder string
	// Hosts are the hosts the key is sent to; empty for a record that only
	// sets a variable.
	Hosts []string
	// How is how the key is sent, decoded: "Authorization: Bearer {}" or
	// "?key={}"; empty without hosts.
	How string
	// Exported says whether Name is a shell variable name, so that vault.sh
	// exports it.
	Exported bool
	// Source and Position (1-based, within Source) say where it came from.
	Source   Source
	Position int
}

// Reject is a record that was refused, with the rule it broke.
type Reject struct {
	Source   Source
	Position int
	// Name is the record's NAME as far as it could be read (may be empty or
	// hostile: quote it when printing).
	Name string
	Rule string
}

func (r Reject) String() string {
	return fmt.Sprintf("%s record %d: %s", r.Source, r.Position, r.Rule)
}

// Warning is a record that was accepted with a caveat (a NAME that cannot be
// exported).
type Warning = Reject

// Records are the outcome of reading one or more record lists.
type Records struct {
	Accepted []Record
	Rejected []Reject
	Warnings []Warning
	seen     map[string]Reject
}

// Add reads one entry's list of records (its value) and appends what it
// finds. Call it for COCOONBOX_VAULT first, then COCOONBOX_CONNECT.
func (rs *Records) Add(src Source, list string) {
	if rs.seen == nil {
		rs.seen = map[string]Reject{}
	}
	pos := 0
	for _, raw := range strings.Split(list, " ") {
		if raw == "" {
			continue
		}
		pos++
		rec, err := ParseRecord(raw)
		name := rec.Name
		if err != nil {
			if name == "" {
				name, _, _ = strings.Cut(raw, "=")
				if len(name) > 64 {
					name = name[:64]
				}
			}
			rs.Rejected = append(rs.Rejected, Reject{src, pos, name, err.Error()})
			continue
		}
		rec.Source, rec.Position = src, pos
		if first, dup := rs.seen[rec.Name]; dup {
			rs.Rejected = append(rs.Rejected, Reject{src, pos, rec.Name,
				fmt.Sprintf("NAME %s repeats %s record %d; the first wins", rec.Name, first.Source, first.Position)})
			continue
		}
		rs.seen[rec.Name] = Reject{Source: src, Position: pos}
		if !rec.Exported {
			rs.Warnings = append(rs.Warnings, Warning{src, pos, rec.Name,
				fmt.Sprintf("NAME %s is not a shell variable name: listed in keys, not exported", rec.Name)})
		}
		rs.Accepted = append(rs.Accepted, rec)
	}
}

// RecordError is a record that breaks a rule.
type RecordError struct{ Rule string }

func (e *RecordError) Error() string { return e.Rule }

func refuse(format string, args ...any) error {
	return &RecordError{fmt.Sprintf(format, args...)}
}

// ParseRecord reads one record, NAME=placeholder;hosts;how. The error, a
// *RecordError, names the rule the record breaks. On error the returned
// Record carries the NAME when it was a valid one.
func ParseRecord(raw string) (Record, error) {
	var r Record
	if len(raw) > MaxRecordLen {
		return r, refuse("record is %d bytes, longer than %d", len(raw), MaxRecordLen)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x20 || c >= 0x7f {
			return r, refuse("record has byte 0x%02x at offset %d: only printable ASCII is allowed", c, i)
		}
	}
	name, rest, ok := strings.Cut(raw, "=")
	if !ok {
		return r, refuse("no '=' after NAME")
	}
	if !isToken(name) {
		return r, refuse("NAME must be [A-Za-z0-9_-]+")
	}
	r.Name = name
	fields := strings.Split(rest, ";")
	if len(fields) != 3 {
		return r, refuse("record must be NAME=placeholder;hosts;how (%d ';'-separated fields after '=', want 3)", len(fields))
	}
	if !isToken(fields[0]) {
		return r, refuse("placeholder must be [A-Za-z0-9_-]+")
	}
	r.Placeholder = fields[0]
	if fields[1] != "" {
		for i, h := range strings.Split(fields[1], ",") {
			if !hostname.Valid(h) {
				return r, refuse("host %d %q is not a host name", i+1, h)
			}
			r.Hosts = append(r.Hosts, h)
		}
	}
	switch {
	case len(r.Hosts) == 0 && fields[2] != "":
		return r, refuse("how without hosts: a record without hosts only sets a variable")
	case len(r.Hosts) > 0 && fields[2] == "":
		return r, refuse("hosts without how: say how the key is sent (Header: template or ?param={})")
	case len(r.Hosts) > 0:
		how, err := decodeHow(fields[2])
		if err != nil {
			return r, err
		}
		if err := checkHow(how); err != nil {
			return r, err
		}
		r.How = how
	}
	r.Exported = ShellName(name)
	if r.Exported && Reserved(name) {
		return r, refuse("NAME %s is reserved: the shell or the dynamic loader gives it a meaning", name)
	}
	if !r.Exported && len(r.Hosts) == 0 {
		return r, refuse("NAME %s is not a shell variable name and the record has no hosts: it would do nothing", name)
	}
	return r, nil
}

// decodeHow undoes the contract's three escapes.
func decodeHow(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 > len(s) {
			return "", refuse("how: '%%' at offset %d must start %%25, %%20 or %%3B", i)
		}
		switch strings.ToUpper(s[i+1 : i+3]) {
		case "25":
			b.WriteByte('%')
		case "20":
			b.WriteByte(' ')
		case "3B":
			b.WriteByte(';')
		default:
			return "", refuse("how: %q at offset %d: only %%25, %%20 and %%3B are allowed", s[i:i+3], i)
		}
		i += 2
	}
	return b.String(), nil
}

// checkHow checks a decoded how.
func checkHow(how string) error {
	if len(how) > MaxHowLen {
		return refuse("how is %d bytes decoded, longer than %d", len(how), MaxHowLen)
	}
	if strings.Count(how, "{}") != 1 {
		return refuse("how must hold {} exactly once, where the placeholder goes")
	}
	if param, ok := strings.CutPrefix(how, "?"); ok {
		p, tmpl, ok := strings.Cut(param, "=")
		if !ok || tmpl != "{}" || p == "" || !querySet.all(p) {
			return refuse("how: a query key is ?param={} with param of [A-Za-z0-9._~-]")
		}
		return nil
	}
	header, tmpl, ok := strings.Cut(how, ":")
	if !ok || header == "" || !headerSet.all(header) {
		return refuse("how must be 'Header: template' (an HTTP header name, then ':') or ?param={}")
	}
	tmpl = strings.TrimLeft(tmpl, " ")
	if !strings.Contains(tmpl, "{}") {
		return refuse("how: the {} must be in the header's template, after the ':'")
	}
	return nil
}

const (
	letters     = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	digits      = "0123456789"
	tokenChars  = letters + digits + "_-"
	queryChars  = letters + digits + "._~-"
	headerChars = letters + digits + "!#$%&'*+-.^_`|~" // RFC 9110 tchar
)

// byteSet is a set of bytes, for checks on the hot path (Render checks
// every name; strings.Trim would build its set on every call).
type byteSet [256]bool

func setOf(chars string) *byteSet {
	var s byteSet
	for i := 0; i < len(chars); i++ {
		s[chars[i]] = true
	}
	return &s
}

func (s *byteSet) all(str string) bool {
	for i := 0; i < len(str); i++ {
		if !s[str[i]] {
			return false
		}
	}
	return true
}

var (
	tokenSet  = setOf(tokenChars)
	shellSet  = setOf(letters + digits + "_")
	querySet  = setOf(queryChars)
	headerSet = setOf(headerChars)
)

func isToken(s string) bool { return s != "" && tokenSet.all(s) }

// ShellName says whether name can be exported by a POSIX shell:
// [A-Za-z_][A-Za-z0-9_]*.
func ShellName(name string) bool {
	return name != "" && (name[0] < '0' || name[0] > '9') && shellSet.all(name)
}

// reserved are the names a login shell, the dynamic loader, the C library
// or a common runtime or tool reads to decide what to run, where to look
// or whom to trust. Names of a family are in reservedPrefixes.
var reserved = setOfNames(
	// POSIX sh, bash and login(1).
	"PATH", "HOME", "SHELL", "USER", "LOGNAME", "IFS", "ENV", "CDPATH",
	"PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "GLOBIGNORE",
	"MAIL", "MAILPATH", "MAILCHECK", "TERM", "TERMINFO", "TERMCAP", "TMPDIR", "TZ",
	"TZDIR", "LANG", "LANGUAGE", "INPUTRC", "PWD", "OLDPWD", "OPTIND", "OPTARG",
	"PPID", "UID", "EUID", "HOSTNAME", "SHLVL", "TMOUT", "FCEDIT", "FIGNORE",
	"COLUMNS", "LINES", "POSIXLY_CORRECT", "EXECIGNORE",
	// The C library and the resolver.
	"GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "LOCALDOMAIN",
	"RES_OPTIONS", "GLIBC_TUNABLES",
	// The session.
	"XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "XAUTHORITY",
	"SESSION_MANAGER", "SHUTTLE_SOCKET", "TOOLHOST_SOCKET",
	// Pagers, editors and browsers, which shells and tools start.
	"EDITOR", "VISUAL", "PAGER", "MANPAGER", "MANOPT", "MANPATH", "BROWSER",
	// Runtimes: what they load at start.
	"PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYOPT", "RUBYLIB", "GEM_HOME", "GEM_PATH",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "JAVA_HOME", "CLASSPATH",
	"GOFLAGS", "GOROOT", "GOPATH", "GOPROXY", "GOTOOLCHAIN", "GODEBUG", "GOENV",
	"RUSTFLAGS", "RUSTC_WRAPPER", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "CARGO_HOME",
	"CC", "CXX", "CPP", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS",
	// Trust and transport.
	"SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
	"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy",
	"ALL_PROXY", "all_proxy", "GNUPGHOME", "DOCKER_HOST", "DOCKER_CONFIG", "KUBECONFIG",
)

// reservedPrefixes are the families of names reserved as a whole: bash's
// own, history, the dynamic loader, the locale, malloc, less (LESSOPEN runs
// a command), Python (PYTHONHOME, PYTHONSTARTUP, ...), Node.js and npm, pip,
// git (GIT_DIR, GIT_SSH_COMMAND, GIT_CONFIG_*, ...), ssh, sudo, systemd's
// tools, the XDG directories and ours.
var reservedPrefixes = []string{"BASH", "HIST", "LD_", "LC_", "MALLOC_", "LESS",
	"PYTHON", "NODE_", "NPM_CONFIG_", "npm_config_", "PIP_", "GIT_", "SSH_", "SUDO_",
	"SYSTEMD_", "XDG_", "COCOONBOX_"}

func setOfNames(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Reserved says whether a shell name is refused as a NAME: a name in
// reserved, or one starting with a prefix of reservedPrefixes.
func Reserved(name string) bool {
	if reserved[name] {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
