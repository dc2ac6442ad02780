package devcontainer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// Config locations BranchBox accepts, relative to the repository (the Dev
// Containers spec's two fixed places; named configurations under
// .devcontainer/<name>/ would need a choice the assignment does not sign).
var configPlaces = []string{".devcontainer/devcontainer.json", ".devcontainer.json"}

// Config is the repository's devcontainer.json, as far as a managed launch
// reads it. Paths are relative to the repository, clean, below it.
type Config struct {
	// Path is where the file is: one of configPlaces.
	Path string
	// ComposeFiles are dockerComposeFile's entries, in order (a later file
	// overrides an earlier one, as Compose merges them).
	ComposeFiles []string
	// Service is the primary container's Compose service.
	Service string
	// RunServices is runServices when set (nil: every service).
	RunServices []string
	// RemoteUser, ContainerUser and WorkspaceFolder are copied as written.
	RemoteUser      string
	ContainerUser   string
	WorkspaceFolder string
	// Raw is the whole object (JSONC comments and trailing commas
	// removed), from which the facade copies what it keeps.
	Raw map[string]any
}

// configFields is the shape of the fields read; the rest stays in Raw.
type configFields struct {
	DockerComposeFile json.RawMessage `json:"dockerComposeFile"`
	Service           string          `json:"service"`
	RunServices       []string        `json:"runServices"`
	RemoteUser        string          `json:"remoteUser"`
	ContainerUser     string          `json:"containerUser"`
	WorkspaceFolder   string          `json:"workspaceFolder"`
}

// readConfig finds and parses devcontainer.json below the repository dfd.
// Exactly one of configPlaces must exist; it must be JSONC holding one
// object, Compose-based (dockerComposeFile and service), whose ${...}
// variables are the ones BranchBox knows (v), substituted; any other (the
// Dev Containers CLI would substitute ${localEnv:...} from the launcher's
// environment) is an interpolated value, refused.
func readConfig(dfd int, v vars) (*Config, error) {
	var found *Config
	for _, place := range configPlaces {
		data, err := readBeneath(dfd, place, place, branchbox.RuleDevcontainer)
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue
		}
		if found != nil {
			return nil, branchbox.Refuse(branchbox.RuleDevcontainer, place, "and %s both exist; the configuration to launch is ambiguous", found.Path)
		}
		c, err := parseConfig(place, data, v)
		if err != nil {
			return nil, err
		}
		found = c
	}
	if found == nil {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, configPlaces[0], "does not exist (nor %s); a managed launch needs a Compose-based devcontainer.json", configPlaces[1])
	}
	return found, nil
}

// parseConfig parses the devcontainer.json at place (repository-relative).
func parseConfig(place string, data []byte, v vars) (*Config, error) {
	hv, err := hujson.Parse(data)
	if err != nil {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, place, "is not JSON with comments: %v", err)
	}
	hv.Standardize()
	if err := v.substituteConfig(place, &hv); err != nil {
		return nil, err
	}
	std := hv.Pack()
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(std))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, place, "is not one JSON object")
	}
	o := jsoncOrder(hv)
	if where, ok := findVariable(raw, "", o); ok {
		return nil, branchbox.Refuse(branchbox.RuleInterpolatedValue, place+": "+where, "holds a ${...} variable; only literal values are accepted")
	}
	if err := checkConfigKeys(place, raw, o); err != nil {
		return nil, err
	}
	if err := checkConfigValues(place, hv); err != nil {
		return nil, err
	}
	var f configFields
	if err := json.Unmarshal(std, &f); err != nil {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, place, "has a field of the wrong type: %v", err)
	}
	c := &Config{Path: place, Service: f.Service, RunServices: f.RunServices, RemoteUser: f.RemoteUser,
		ContainerUser: f.ContainerUser, WorkspaceFolder: f.WorkspaceFolder, Raw: raw}
	if f.DockerComposeFile == nil {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, place, "has no dockerComposeFile; a managed launch runs Compose services only")
	}
	var names []string
	var one string
	if json.Unmarshal(f.DockerComposeFile, &one) == nil {
		names = []string{one}
	} else if err := json.Unmarshal(f.DockerComposeFile, &names); err != nil {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, place+": dockerComposeFile", "is neither a string nor a list of strings")
	}
	if len(names) == 0 {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, place+": dockerComposeFile", "is empty")
	}
	seen := map[string]bool{}
	for i, n := range names {
		rel, ok := repoRel(path.Dir(place), n)
		if !ok {
			return nil, branchbox.Refuse(branchbox.RuleComposeFile, fmt.Sprintf("%s: dockerComposeFile[%d]", place, i), "%q is not a relative path below the repository", n)
		}
		if seen[rel] {
			return nil, branchbox.Refuse(branchbox.RuleComposeFile, fmt.Sprintf("%s: dockerComposeFile[%d]", place, i), "names %s twice", rel)
		}
		seen[rel] = true
		c.ComposeFiles = append(c.ComposeFiles, rel)
	}
	if c.Service == "" {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, place, "has no service; the primary container must be named")
	}
	return c, nil
}

// findVariable returns the JSON path of the first string (key or value)
// holding "${", the Dev Containers CLI's variable syntax, in file order.
func findVariable(v any, at string, o order) (string, bool) {
	switch v := v.(type) {
	case string:
		return at, strings.Contains(v, "${")
	case []any:
		for i, e := range v {
			if w, ok := findVariable(e, fmt.Sprintf("%s[%d]", at, i), o); ok {
				return w, true
			}
		}
	case map[string]any:
		for _, k := range keys(o, v, at) {
			w := join(at, k)
			if strings.Contains(k, "${") {
				return w, true
			}
			if w, ok := findVariable(v[k], w, o); ok {
				return w, true
			}
		}
	}
	return "", false
}
