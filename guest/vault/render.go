package vault

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// Files are one render of the vault: the contents of the three files.
type Files struct {
	// ID names the render; vault.sh and keys carry it in their first line,
	// so a reader that reads both can tell they are of one render.
	ID string
	// VaultSH is vault.sh: a comment line, `export NAME='placeholder'` per
	// exported record in record order, then `unset NAME` for each name of
	// Names that no record carries now (sorted).
	VaultSH []byte
	// Names is names: every name exported since boot, one a line, sorted.
	Names []byte
	// Keys is keys: a comment line, then one line per record with hosts, in
	// record order, four fields separated by a tab:
	//
	//	NAME<TAB>placeholder<TAB>host,host<TAB>how
	//
	// how decoded ("Authorization: Bearer {}", "?key={}"). Lines starting
	// with '#' are comments. Nil when no record has hosts: then there is
	// no keys file.
	Keys []byte
}

// Render builds the files from accepted records (in order) and the names
// exported by earlier renders since boot (the previous names file; see
// ParseNames). id names the render; source is the claim env file the
// records came from, named in vault.sh's first line (a path with a control
// character or a non-ASCII byte appears Go-quoted, so it cannot end the
// comment). Records are trusted to be valid (from Records.Add); values
// are single-quoted all the same.
func Render(id, source string, records []Record, previous []string) *Files {
	f := &Files{ID: id}
	header := "# cocoonbox vault render " + id + ": generated from " + commentSafe(source) + " by /usr/local/lib/cocoonbox/vault; do not edit\n"

	var sh bytes.Buffer
	sh.Grow(len(header) + 64*(len(records)+len(previous)))
	sh.WriteString(header)
	now := make(map[string]bool, len(records))
	names := make([]string, 0, len(previous)+len(records))
	names = append(names, previous...)
	hasKeys := false
	for _, r := range records {
		if len(r.Hosts) > 0 {
			hasKeys = true
		}
		if !r.Exported || !ShellName(r.Name) || now[r.Name] {
			continue
		}
		now[r.Name] = true
		names = append(names, r.Name)
		sh.WriteString("export ")
		sh.WriteString(r.Name)
		sh.WriteByte('=')
		sh.WriteString(ShellQuote(r.Placeholder))
		sh.WriteByte('\n')
	}
	slices.Sort(names)
	names = slices.Compact(names)

	var nb bytes.Buffer
	nb.Grow(24 * len(names))
	for _, n := range names {
		if !ShellName(n) {
			continue
		}
		nb.WriteString(n)
		nb.WriteByte('\n')
		if !now[n] {
			sh.WriteString("unset ")
			sh.WriteString(n)
			sh.WriteByte('\n')
		}
	}
	f.VaultSH, f.Names = sh.Bytes(), nb.Bytes()

	if hasKeys {
		var kb bytes.Buffer
		kb.Grow(160 * len(records))
		kb.WriteString("# cocoonbox vault render " + id + ": NAME\tPLACEHOLDER\tHOSTS\tHOW\n")
		for _, r := range records {
			if len(r.Hosts) == 0 {
				continue
			}
			kb.WriteString(r.Name)
			kb.WriteByte('\t')
			kb.WriteString(r.Placeholder)
			kb.WriteByte('\t')
			for i, h := range r.Hosts {
				if i > 0 {
					kb.WriteByte(',')
				}
				kb.WriteString(h)
			}
			kb.WriteByte('\t')
			kb.WriteString(r.How)
			kb.WriteByte('\n')
		}
		f.Keys = kb.Bytes()
	}
	return f
}

// ShellQuote quotes s for a POSIX shell: in single quotes, each ' written
// as '\” . Nothing inside single quotes is expanded.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ParseNames reads a names file: one name a line; lines that are not shell
// names are ignored.
func ParseNames(data []byte) []string {
	var names []string
	for _, l := range strings.Split(string(data), "\n") {
		if ShellName(l) {
			names = append(names, l)
		}
	}
	return names
}

// commentSafe returns s as it may stand in a one-line shell comment.
func commentSafe(s string) string {
	for _, c := range []byte(s) {
		if c < 0x20 || c >= 0x7f {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}
