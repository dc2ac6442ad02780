package devcontainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"path"
	"regexp"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// variable is the Dev Containers CLI's variable syntax (its a_ pattern).
var variable = regexp.MustCompile(`\$\{(.*?)\}`)

// vars are the Dev Containers variables BranchBox knows for one launch
// and substitutes itself, before any check, so that every check sees the
// value the CLI would use (Deliver 3 of issue 38: every Compose template
// sets workspaceFolder to /workspaces/${localWorkspaceFolderBasename}).
type vars struct {
	// local is the workspace the CLI is given (--workspace-folder).
	local string
	// configFile is the facade devcontainer.json the CLI reads ("" when
	// unknown: ${devcontainerId} is then refused).
	configFile string
}

// devcontainerID is the CLI's ${devcontainerId}: the SHA-256 of its id
// labels as JSON with sorted keys, in base 32, padded to 52 digits (its
// Q_ function).
func (v vars) devcontainerID() string {
	// JSON.stringify's bytes: keys sorted (as encoding/json writes a
	// map), '<', '>' and '&' unescaped.
	var labels bytes.Buffer
	enc := json.NewEncoder(&labels)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]string{"devcontainer.config_file": v.configFile, "devcontainer.local_folder": v.local})
	sum := sha256.Sum256(bytes.TrimSuffix(labels.Bytes(), []byte("\n")))
	id := new(big.Int).SetBytes(sum[:]).Text(32)
	return strings.Repeat("0", max(0, 52-len(id))) + id
}

// substitute replaces the variables of s (at where) BranchBox knows;
// container is the container's workspace folder ("" while workspaceFolder
// itself is substituted). Any other variable (${localEnv:X} reads the
// launcher's environment, ${containerEnv:X} the container's) is refused,
// rule interpolated-value.
func (v vars) substitute(s, where, container string) (string, error) {
	var bad string
	out := variable.ReplaceAllStringFunc(s, func(m string) string {
		name, _, _ := strings.Cut(m[2:len(m)-1], ":")
		switch {
		case name == "localWorkspaceFolder":
			return v.local
		case name == "localWorkspaceFolderBasename":
			return path.Base(v.local)
		case name == "containerWorkspaceFolder" && container != "":
			return container
		case name == "containerWorkspaceFolderBasename" && container != "":
			return path.Base(container)
		case name == "devcontainerId" && v.configFile != "":
			return v.devcontainerID()
		}
		if bad == "" {
			bad = m
		}
		return m
	})
	if bad != "" {
		return "", branchbox.Refuse(branchbox.RuleInterpolatedValue, where, "holds %s, which BranchBox cannot know for a managed launch (it substitutes ${localWorkspaceFolder}, ${localWorkspaceFolderBasename}, ${containerWorkspaceFolder}, ${containerWorkspaceFolderBasename} and ${devcontainerId})", bad)
	}
	return out, nil
}

// substituteConfig substitutes the known variables in every string value
// of the parsed devcontainer.json (place) in place, in file order:
// workspaceFolder first (the container's workspace folder the others may
// name), then the rest. A key holding a variable is left for findVariable
// to refuse.
func (v vars) substituteConfig(place string, root *hujson.Value) error {
	container := ""
	if obj, ok := root.Value.(*hujson.Object); ok {
		for i := range obj.Members {
			m := &obj.Members[i]
			if m.Name.Value.(hujson.Literal).String() != "workspaceFolder" {
				continue
			}
			if lit, ok := m.Value.Value.(hujson.Literal); ok && lit.Kind() == '"' {
				s, err := v.substitute(lit.String(), place+": workspaceFolder", "")
				if err != nil {
					return err
				}
				m.Value.Value, container = hujson.String(s), s
			}
		}
	}
	var walk func(val *hujson.Value, at string) error
	walk = func(val *hujson.Value, at string) error {
		switch t := val.Value.(type) {
		case *hujson.Object:
			for i := range t.Members {
				if err := walk(&t.Members[i].Value, join(at, t.Members[i].Name.Value.(hujson.Literal).String())); err != nil {
					return err
				}
			}
		case *hujson.Array:
			for i := range t.Elements {
				if err := walk(&t.Elements[i], fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		case hujson.Literal:
			if t.Kind() == '"' && strings.Contains(t.String(), "${") {
				s, err := v.substitute(t.String(), place+": "+at, container)
				if err != nil {
					return err
				}
				val.Value = hujson.String(s)
			}
		}
		return nil
	}
	return walk(root, "")
}
