package devcontainer

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/tailscale/hujson"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// The Dev Containers CLI writes some devcontainer.json values into a
// Compose override of its own by string concatenation (docs/branchbox.md,
// "What the CLI writes"): containerEnv as `- '<key>=<value>'` with the
// key unescaped, containerUser as `user: <value>` unquoted, service as
// `'<service>':`. A value the CLI would write is held here to a grammar
// that YAML cannot read as anything but that one scalar; every other
// string of the file to having no control character, so no value of the
// repository's can start a line in any file the CLI generates.
var (
	// envName is an environment variable name (POSIX's portable set).
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// userName is a user as a name (Debian's adduser names, dots
	// allowed, no trailing $) or a numeric uid.
	userName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.-]{0,31}|[0-9]{1,10})$`)
	// serviceName is a Compose service name (the Compose schema's).
	serviceName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)
)

// yamlWords are plain scalars that YAML reads as a boolean or null, not
// as the name written: `user: null` is no user at all.
var yamlWords = map[string]bool{"true": true, "false": true, "null": true, "yes": true, "no": true, "on": true, "off": true, "y": true, "n": true}

// envMaps are the devcontainer.json objects whose keys are environment
// variable names.
var envMaps = map[string]bool{"containerEnv": true, "remoteEnv": true}

// userFields are the devcontainer.json users.
var userFields = map[string]bool{"containerUser": true, "remoteUser": true}

// checkConfigValues holds the parsed devcontainer.json at place to the
// grammars above, in file order: the first offending key or value is the
// one named. A key is named by its object's path and quoted in the
// detail (it may hold anything); a value by its path.
func checkConfigValues(place string, v hujson.Value) error {
	return walkConfig(place, "", v)
}

func walkConfig(place, at string, v hujson.Value) error {
	refuse := func(where, detail string, args ...any) error {
		return branchbox.Refuse(branchbox.RuleDevcontainer, strings.TrimSuffix(place+": "+where, ": "), detail, args...)
	}
	switch t := v.Value.(type) {
	case *hujson.Object:
		for _, m := range t.Members {
			k := m.Name.Value.(hujson.Literal).String()
			if bad, ok := controlIn(k); ok {
				return refuse(at, "has the key %q, which holds the control character %U; no value of a managed launch holds one", k, bad)
			}
			if envMaps[at] && !envName.MatchString(k) {
				return refuse(at, "has the key %q; an environment variable name is [A-Za-z_][A-Za-z0-9_]*", k)
			}
			if err := walkConfig(place, strings.TrimPrefix(at+"."+k, "."), m.Value); err != nil {
				return err
			}
		}
	case *hujson.Array:
		for i, e := range t.Elements {
			if err := walkConfig(place, fmt.Sprintf("%s[%d]", at, i), e); err != nil {
				return err
			}
		}
	case hujson.Literal:
		if t.Kind() != '"' {
			return nil
		}
		s := t.String()
		if bad, ok := controlIn(s); ok {
			return refuse(at, "holds the control character %U; no value of a managed launch holds one", bad)
		}
		switch {
		case userFields[at] && (!userName.MatchString(s) || yamlWords[strings.ToLower(s)]):
			return refuse(at, "is %q; a user is a name ([A-Za-z_][A-Za-z0-9_.-]*, at most 32) or a numeric uid", s)
		case (at == "service" || strings.HasPrefix(at, "runServices[")) && !serviceName.MatchString(s):
			return refuse(at, "is %q; a Compose service name is [a-zA-Z0-9._-]+", s)
		}
	}
	return nil
}

// controlIn returns the first control character of s (Unicode's Cc, and
// the line and paragraph separators YAML reads as line breaks).
func controlIn(s string) (rune, bool) {
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return r, true
		}
	}
	return 0, false
}
