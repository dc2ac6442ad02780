package vault

import (
	"errors"
	"regexp"
	"strings"
)

// The validator restates the contract's rules as regular expressions,
// apart from the parser, so that the fuzz targets can check one against
// the other.
var (
	reToken  = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	reShell  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	reLabel  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	reHeader = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+: *[ -~]*\\{\\}[ -~]*$")
	reQuery  = regexp.MustCompile(`^\?[A-Za-z0-9._~-]+=\{\}$`)
)

// Validate checks an accepted record against the contract's rules (as
// this package reads them). Every record ParseRecord accepts passes it.
func Validate(r Record) error {
	switch {
	case !reToken.MatchString(r.Name):
		return errors.New("NAME is not [A-Za-z0-9_-]+")
	case !reToken.MatchString(r.Placeholder):
		return errors.New("placeholder is not [A-Za-z0-9_-]+")
	case r.Exported != reShell.MatchString(r.Name):
		return errors.New("the Exported flag does not match whether NAME is a shell name")
	case r.Exported && Reserved(r.Name):
		return errors.New("NAME is reserved")
	case !r.Exported && len(r.Hosts) == 0:
		return errors.New("a NAME that is not exported needs hosts")
	case len(r.Hosts) == 0 && r.How != "":
		return errors.New("how without hosts")
	case len(r.Hosts) > 0 && !reHeader.MatchString(r.How) && !reQuery.MatchString(r.How):
		return errors.New("how is neither Header: template nor ?param={}")
	case strings.Count(r.How, "{}") > 1:
		return errors.New("how holds {} more than once")
	case len(r.How) > MaxHowLen:
		return errors.New("how is longer than MaxHowLen")
	}
	for _, h := range r.Hosts {
		if len(h) > 253 {
			return errors.New("host longer than 253 bytes")
		}
		for _, l := range strings.Split(h, ".") {
			if !reLabel.MatchString(l) {
				return errors.New("host " + h + " is not a host name")
			}
		}
	}
	return nil
}
