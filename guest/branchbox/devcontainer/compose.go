package devcontainer

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// loadOptions makes compose-go read only the bytes given: no include, no
// extends, no env_file, no interpolation, no environment lookup, no path
// rewriting; the schema is still validated. The project name is fixed so
// no COMPOSE_PROJECT_NAME or directory name is consulted.
func loadOptions(o *loader.Options) {
	o.SkipInterpolation = true
	o.SkipInclude = true
	o.SkipExtends = true
	o.SkipResolveEnvironment = true
	o.SkipResolveLabels = true
	o.SkipNormalization = true
	o.ResolvePaths = false
	o.SetProjectName("branchbox", true)
}

// indirectKeys are the service attributes that make Compose read another
// file (Contract: Preloaded service images, "indirect Compose includes").
// env_file is not one: BranchBox reads it itself (readEnvFiles).
var indirectKeys = []string{"extends", "label_file"}

// checkComposeModel refuses, in one file's model, every indirect include
// and every interpolation (where is the file, for the refusal).
func checkComposeModel(where string, model map[string]any, o order) error {
	if _, ok := model["include"]; ok {
		return branchbox.Refuse(branchbox.RuleIndirectInclude, where+": include", "includes another Compose file; indirect includes are refused")
	}
	// A top-level config or secret with a file (or an environment
	// variable) hands the guest's file or environment to a container.
	for _, kind := range []string{"configs", "secrets"} {
		entries, _ := model[kind].(map[string]any)
		for _, name := range keys(o, entries, kind) {
			e, _ := entries[name].(map[string]any)
			for _, k := range []string{"file", "environment"} {
				if _, ok := e[k]; ok {
					return branchbox.Refuse(branchbox.RuleIndirectInclude, fmt.Sprintf("%s: %s.%s.%s", where, kind, name, k), "reads a file or variable of the guest; indirect includes are refused")
				}
			}
		}
	}
	services, _ := model["services"].(map[string]any)
	for _, name := range keys(o, services, "services") {
		svc, _ := services[name].(map[string]any)
		for _, k := range keys(o, svc, "services."+name) {
			if !slices.Contains(indirectKeys, k) {
				continue
			}
			if _, ok := svc[k]; ok {
				return branchbox.Refuse(branchbox.RuleIndirectInclude, fmt.Sprintf("%s: services.%s.%s", where, name, k), "reads another file; indirect includes are refused")
			}
		}
	}
	if at, ok := findInterpolation(model, "", o); ok {
		return branchbox.Refuse(branchbox.RuleInterpolatedValue, where+": "+at, "is interpolated ($VAR or ${VAR}); only literal values are accepted, a literal dollar is written $$")
	}
	return nil
}

// interpolated reports whether s has a '$' that Compose would substitute:
// every '$' not part of a "$$" pair.
func interpolated(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			i++
			continue
		}
		return true
	}
	return false
}

// findInterpolation returns the path of the first interpolated key or
// string value in a Compose model, in file order (o).
func findInterpolation(v any, at string, o order) (string, bool) {
	switch v := v.(type) {
	case string:
		return at, interpolated(v)
	case []any:
		for i, e := range v {
			if w, ok := findInterpolation(e, fmt.Sprintf("%s[%d]", at, i), o); ok {
				return w, true
			}
		}
	case map[string]any:
		for _, k := range keys(o, v, at) {
			w := join(at, k)
			if interpolated(k) {
				return w, true
			}
			if w, ok := findInterpolation(v[k], w, o); ok {
				return w, true
			}
		}
	}
	return "", false
}

// loadCompose reads the Compose files (repository-relative) below dfd,
// checks each on its own, then loads them merged, in order, as Compose
// would, with the directory of the first as the project directory.
func loadCompose(ctx context.Context, dfd int, repo string, files []string, primary string) (*types.Project, error) {
	var models []map[string]any
	var orders []order
	details := types.ConfigDetails{WorkingDir: path.Join(repo, path.Dir(files[0])), Environment: types.Mapping{}}
	for _, rel := range files {
		data, err := readBeneath(dfd, rel, rel, branchbox.RuleComposeFile)
		if err != nil {
			return nil, err
		}
		if data == nil {
			return nil, branchbox.Refuse(branchbox.RuleComposeFile, rel, "does not exist")
		}
		file := types.ConfigFile{Filename: path.Join(repo, rel), Content: data}
		one := types.ConfigDetails{WorkingDir: details.WorkingDir, Environment: types.Mapping{}, ConfigFiles: []types.ConfigFile{file}}
		model, err := loader.LoadModelWithContext(ctx, one, loadOptions)
		if err != nil {
			return nil, branchbox.Refuse(branchbox.RuleComposeFile, rel, "is not a valid Compose file: %v", err)
		}
		o := fileOrder(data)
		if err := checkComposeModel(rel, model, o); err != nil {
			return nil, err
		}
		models = append(models, model)
		orders = append(orders, o)
		details.ConfigFiles = append(details.ConfigFiles, file)
	}
	p, err := loader.LoadWithContext(ctx, details, loadOptions)
	if err != nil {
		return nil, branchbox.Refuse(branchbox.RuleComposeFile, strings.Join(files, ", "), "do not load as one project: %v", err)
	}
	// The allow-list, once the runnable services are known (a
	// profile-gated service or an outer tunnel connector never runs).
	disableTunnelConnectors(p)
	runnable := map[string]bool{}
	for name := range p.Services {
		runnable[name] = true
	}
	for i, model := range models {
		if err := checkAllowedKeys(files[i], model, runnable, primary, orders[i]); err != nil {
			return nil, err
		}
	}
	if err := checkProject(p, primary, merged(orders)); err != nil {
		return nil, err
	}
	if err := readEnvFiles(dfd, path.Dir(files[0]), p, merged(orders)); err != nil {
		return nil, err
	}
	return p, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
