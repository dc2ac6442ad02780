package client

// The rules of a Session.Exec stream that both its ends apply: how many
// bytes one message carries and what a TERM may be.
// Contract: Remote command (Session.Exec, cocoonbox rsh).

import "strings"

// ExecChunk is the most bytes of output one Session.Exec response
// carries, and what rsh puts in one stdin message.
const ExecChunk = 256 << 10

// IsTerm reports whether term can be a terminfo entry's name: 1 to 64 of
// [A-Za-z0-9._+-], from a letter or digit. It reaches the command's
// environment and names a file under /usr/share/terminfo.
func IsTerm(term string) bool {
	ok := term != "" && len(term) <= 64 && term[0] != '.' && term[0] != '-' && term[0] != '+'
	for _, c := range term {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._+-", c))
	}
	return ok
}
