package branchbox

import "strings"

// checkBranch says why b is not a branch name `git check-ref-format
// --branch` accepts (git-check-ref-format(1), rules 1-10), or "". It is
// stricter in two ways: at most 200 bytes, and no leading '-'.
func checkBranch(b string) string {
	switch {
	case b == "":
		return "is missing"
	case len(b) > 200:
		return "is longer than 200 bytes"
	case b == "@" || b == "HEAD":
		return "is not a branch name"
	case b[0] == '-':
		return "must not start with '-'"
	case strings.HasSuffix(b, "/") || strings.HasSuffix(b, "."):
		return "must not end with '/' or '.'"
	case strings.Contains(b, "..") || strings.Contains(b, "//") || strings.Contains(b, "@{"):
		return "must not contain '..', '//' or '@{'"
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return "must not contain control characters, space or any of ~^:?*[\\"
		}
	}
	for _, c := range strings.Split(b, "/") {
		if strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return "has a component starting with '.' or ending with '.lock'"
		}
	}
	return ""
}
