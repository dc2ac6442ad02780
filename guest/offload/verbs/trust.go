package verbs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// Contract: Offload, send steps: preset the CLI's trust for the directory
// and nothing else of its config. The user's other keys, their order and
// (in TOML) their comments stay as they were.

// object is a JSON object that keeps its keys' order and the other keys'
// values byte for byte.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseObject(data []byte) (*object, error) {
	o := &object{vals: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return o, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := o.vals[k]; !dup {
			o.keys = append(o.keys, k)
		}
		o.vals[k] = v
	}
	return o, nil
}

func (o *object) set(k string, v json.RawMessage) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) marshal() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// TrustClaude sets hasCompletedOnboarding and
// projects[dir].hasTrustDialogAccepted in ~/.claude.json.
func TrustClaude(home, dir string) error {
	path := filepath.Join(home, ".claude.json")
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	top, err := parseObject(data)
	if err != nil {
		return fmt.Errorf("%s: %w; it is left as it is", path, err)
	}
	top.set("hasCompletedOnboarding", json.RawMessage("true"))
	projects, err := parseObject(top.vals["projects"])
	if err != nil {
		return fmt.Errorf("%s: projects: %w", path, err)
	}
	project, err := parseObject(projects.vals[dir])
	if err != nil {
		return fmt.Errorf("%s: projects[%q]: %w", path, dir, err)
	}
	project.set("hasTrustDialogAccepted", json.RawMessage("true"))
	projects.set(dir, project.marshal())
	top.set("projects", projects.marshal())
	var out bytes.Buffer
	if err := json.Indent(&out, top.marshal(), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	return offload.WriteFile(path, out.Bytes())
}

var tableHeader = regexp.MustCompile(`^\s*\[\[?\s*(.*?)\s*\]\]?\s*(#.*)?$`)

// TrustCodex sets [projects."<dir>"] trust_level = "trusted" in
// ~/.codex/config.toml by editing lines, then parses the result to check
// it says that (and is still TOML).
func TrustCodex(home, dir string) error {
	path := filepath.Join(home, ".codex/config.toml")
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var before map[string]any
	if _, err := toml.Decode(string(data), &before); err != nil {
		return fmt.Errorf("%s is not valid TOML (%v); it is left as it is", path, err)
	}
	header := fmt.Sprintf(`projects."%s"`, dir)
	lines := strings.Split(string(data), "\n")
	if len(data) == 0 {
		lines = nil
	}
	in, done := false, false
	var out []string
	for i, l := range lines {
		if m := tableHeader.FindStringSubmatch(l); m != nil && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			if in && !done {
				out = append(out, `trust_level = "trusted"`)
				done = true
			}
			in = m[1] == header
		} else if in && !done && regexp.MustCompile(`^\s*trust_level\s*=`).MatchString(l) {
			l, done = `trust_level = "trusted"`, true
		}
		out = append(out, l)
		if in && !done && i == len(lines)-1 {
			out = append(out, `trust_level = "trusted"`)
			done = true
		}
	}
	if !done {
		if len(out) > 0 && out[len(out)-1] != "" {
			out = append(out, "")
		}
		out = append(out, "["+header+"]", `trust_level = "trusted"`, "")
	}
	result := strings.Join(out, "\n")
	var after struct {
		Projects map[string]struct {
			TrustLevel string `toml:"trust_level"`
		} `toml:"projects"`
	}
	if _, err := toml.Decode(result, &after); err != nil || after.Projects[dir].TrustLevel != "trusted" {
		return fmt.Errorf("%s: the trust preset did not come out as meant (%v); the file is left as it is", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return offload.WriteFile(path, []byte(result))
}
