// Package deptest checks what each binary of this repository links
// against an allow-list, after tailscale's tstest/deptest: a rule names the
// packages a binary may link, so a new import that crosses a boundary (the
// CLI linking a server package, a guest helper linking the api) fails a
// test instead of growing the binary unseen. An allow-list, not a
// deny-list: the package nobody thought of is refused too.
package deptest

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// Module is this repository's module path; the api's is Module + "/api".
const Module = "github.com/cocoonbox/cocoonbox"

// Rule is what one binary may link.
type Rule struct {
	// Ours are the packages of this repository the binary may link, as
	// paths inside the repository ("api/client"), each admitting the
	// package and every package under it (not "api/clientx").
	Ours []string
	// Others are the packages outside this repository and the standard
	// library the binary may link, by import path prefix, under the same
	// element rule ("golang.org/x/sys" admits golang.org/x/sys/unix); nil
	// admits any.
	Others []string
	// Denied are import path prefixes the binary never links, whatever
	// Others says (pgx, the MCP SDK).
	Denied []string
}

// Check answers the packages of deps that r does not admit, each with the
// rule it broke, sorted; none when r admits every one. The standard
// library (a first path element without a dot, and its vendored
// golang.org/x copies) is always admitted.
func (r Rule) Check(deps []string) []string {
	var bad []string
	for _, dep := range deps {
		if why := r.refuses(dep); why != "" {
			bad = append(bad, dep+": "+why)
		}
	}
	sort.Strings(bad)
	return bad
}

func (r Rule) refuses(dep string) string {
	for _, p := range r.Denied {
		if under(dep, p) {
			return "denied (" + p + ")"
		}
	}
	if rel, ok := strings.CutPrefix(dep, Module+"/"); ok {
		for _, p := range r.Ours {
			if under(rel, p) {
				return ""
			}
		}
		return "not among this repository's packages it may link (" + strings.Join(r.Ours, ", ") + ")"
	}
	if first, _, _ := strings.Cut(dep, "/"); !strings.Contains(first, ".") || first == "vendor" {
		return ""
	}
	if r.Others == nil {
		return ""
	}
	for _, p := range r.Others {
		if under(dep, p) {
			return ""
		}
	}
	return "not among the other modules it may link (" + strings.Join(r.Others, ", ") + ")"
}

// under reports whether path is prefix or a package under it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// Binaries answers each main package that patterns match (go list, run in
// dir: a module's directory) with every package it links (go list's
// Deps: the transitive imports, the standard library's too).
func Binaries(dir string, patterns ...string) (map[string][]string, error) {
	args := append([]string{"list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{"\t"}}{{join .Deps " "}}{{end}}`}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s in %s: %v: %s", strings.Join(patterns, " "), dir, err, stderr.Bytes())
	}
	bins := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		pkg, deps, _ := strings.Cut(line, "\t")
		bins[pkg] = strings.Fields(deps)
	}
	return bins, nil
}
