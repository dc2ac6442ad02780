package devcontainer

import (
	"fmt"
	"sort"

	"github.com/tailscale/hujson"
	"go.yaml.in/yaml/v4"
)

// order is the position in its file of every mapping key of one Compose
// file, by path ("services.app.cap_add"), so that a walk over the decoded
// model (a Go map, unordered) visits keys as the file has them and a
// refusal names the first offending key in file order, the same on every
// run (issue 38).
type order map[string]int

// fileOrder indexes data's mapping keys; a file that does not parse
// indexes nothing (compose-go refuses it first).
func fileOrder(data []byte) order {
	o := order{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return o
	}
	var walk func(n *yaml.Node, at string)
	walk = func(n *yaml.Node, at string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, at)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := join(at, n.Content[i].Value)
				if _, ok := o[p]; !ok {
					o[p] = len(o)
				}
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	}
	walk(&doc, "")
	return o
}

// keys are m's keys (m at path at) in file order; a key the file does not
// have (none, for a model decoded from it) after the rest, by name.
func keys[V any](o order, m map[string]V, at string) []string {
	ks := sortedKeys(m)
	pos := func(k string) int {
		if p, ok := o[join(at, k)]; ok {
			return p
		}
		return len(o)
	}
	sort.SliceStable(ks, func(i, j int) bool { return pos(ks[i]) < pos(ks[j]) })
	return ks
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

// merged is the order of a project merged from files in order: a key
// where the earliest file that has it puts it, a later file's new keys
// after every key of the earlier ones.
func merged(orders []order) order {
	out := order{}
	for _, o := range orders {
		paths := make([]string, 0, len(o))
		for p := range o {
			paths = append(paths, p)
		}
		sort.Slice(paths, func(i, j int) bool { return o[paths[i]] < o[paths[j]] })
		for _, p := range paths {
			if _, ok := out[p]; !ok {
				out[p] = len(out)
			}
		}
	}
	return out
}

// jsoncOrder indexes the member names of a parsed devcontainer.json
// the same way.
func jsoncOrder(v hujson.Value) order {
	o := order{}
	var walk func(v hujson.Value, at string)
	walk = func(v hujson.Value, at string) {
		switch t := v.Value.(type) {
		case *hujson.Object:
			for _, m := range t.Members {
				p := join(at, m.Name.Value.(hujson.Literal).String())
				if _, ok := o[p]; !ok {
					o[p] = len(o)
				}
				walk(m.Value, p)
			}
		case *hujson.Array:
			for i, e := range t.Elements {
				walk(e, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	}
	walk(v, "")
	return o
}
