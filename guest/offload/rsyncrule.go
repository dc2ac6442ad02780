package offload

import "strings"

// rsync's filter patterns (rsync(1), PATTERN MATCHING RULES): a pattern
// holding any of * ? [ is a wildcard pattern, where a backslash escapes
// the next character; one holding none is matched as it is, backslashes
// and all. A path is a pattern only through these two functions.

// RsyncWildcards are the characters that make a pattern a wildcard one.
const RsyncWildcards = "*?["

// RsyncLiteral is the rsync pattern that matches the path p and nothing
// else: p as it is when it has none of RsyncWildcards, else RsyncEscape(p).
func RsyncLiteral(p string) string {
	if !strings.ContainsAny(p, RsyncWildcards) {
		return p
	}
	return RsyncEscape(p)
}

// RsyncEscape is p with each of * ? [ ] \ escaped by a backslash, for a
// part of a pattern that holds a wildcard elsewhere ("/<dir>/*").
func RsyncEscape(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if strings.IndexByte(`*?[]\`, p[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// RsyncRules is an --exclude-from file for --from0: each rule ended by a
// NUL, so a name holding a newline or a carriage return is one rule
// (without --from0 rsync cuts its lines at either).
func RsyncRules(rules []string) []byte {
	var b strings.Builder
	for _, r := range rules {
		b.WriteString(r)
		b.WriteByte(0)
	}
	return []byte(b.String())
}
