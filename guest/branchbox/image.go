package branchbox

import (
	"regexp"
	"strings"

	"github.com/distribution/reference"
)

// serviceRe is a Compose service name as an assignment may spell it.
var serviceRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

var localDigestRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// CheckImageReference says why ref is not an immutable image reference,
// or "" when it is (Contract: Preloaded service images): a literal
// lowercase registry/repository[:tag]@sha256:<64 lowercase hex> (the
// registry has a '.' or a ':' port, or is localhost, as Docker reads it;
// the tag is optional), or a local content digest sha256:<64 lowercase
// hex>. Interpolation, URLs, tag-only and other digests are refused.
func CheckImageReference(ref string) string {
	switch {
	case localDigestRe.MatchString(ref):
		return ""
	case ref == "":
		return "is empty"
	case strings.ContainsAny(ref, "${}"):
		return "is interpolated; only literal references are accepted"
	case strings.Contains(ref, "://"):
		return "is URL-shaped; an image reference has no scheme"
	}
	parsed, err := reference.Parse(ref)
	if err != nil {
		return "is not an image reference: " + err.Error()
	}
	named, ok := parsed.(reference.Named)
	if !ok {
		return "has no registry/repository name"
	}
	canonical, ok := parsed.(reference.Canonical)
	if !ok {
		return "has no digest; tag-only references are mutable and refused"
	}
	d := canonical.Digest()
	if d.Algorithm() != "sha256" || !sha256Re.MatchString(d.Encoded()) {
		return "must pin a sha256 digest of 64 lowercase hex digits"
	}
	// reference.Parse takes an upper-case registry host ("Registry.Example");
	// the contract's reference is literal lowercase.
	if n := named.Name(); n != strings.ToLower(n) {
		return "must be literal lowercase (registry and repository)"
	}
	domain := reference.Domain(named)
	if !strings.ContainsAny(domain, ".:") && domain != "localhost" {
		return "must name its registry (registry.example/repository@sha256:...)"
	}
	return ""
}
