package packer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/offload/envstep"
)

var (
	goLineRe       = regexp.MustCompile(`(?m)^go ([0-9][0-9.]*)\s*$`)
	toolchainRe    = regexp.MustCompile(`(?m)^toolchain go([0-9][0-9.]*)\s*$`)
	rustChannelRe  = regexp.MustCompile(`(?m)^channel\s*=\s*"([^"\s]+)"`)
	packageManager = regexp.MustCompile(`^([a-z]+)@([0-9][^+\s]*)`)
)

// DetectEnv is env.json for the repository at top (Contract: Offload,
// Environment): the tool versions its files pin (go.mod's toolchain or go
// line, .tool-versions, rust-toolchain(.toml), .nvmrc, .node-version,
// .python-version), package.json's packageManager, the files read and the
// lockfiles the box's environment step fetches.
func DetectEnv(top string) ([]byte, error) {
	e := envstep.Env{V: 1, Tools: map[string]string{}, PackageManagers: map[string]string{}, Files: []string{}, Lockfiles: []string{}}
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(top, name))
		if err != nil {
			return ""
		}
		e.Files = append(e.Files, name)
		return string(data)
	}
	if s := read("go.mod"); s != "" {
		if m := toolchainRe.FindStringSubmatch(s); m != nil {
			e.Tools["go"] = m[1]
		} else if m := goLineRe.FindStringSubmatch(s); m != nil {
			e.Tools["go"] = m[1]
		}
	}
	for _, l := range strings.Split(read(".tool-versions"), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
			e.Tools[f[0]] = f[1]
		}
	}
	if m := rustChannelRe.FindStringSubmatch(read("rust-toolchain.toml")); m != nil {
		e.Tools["rust"] = m[1]
	} else if s := strings.TrimSpace(read("rust-toolchain")); s != "" && !strings.ContainsAny(s, " \n") {
		e.Tools["rust"] = s
	}
	for _, f := range []string{".nvmrc", ".node-version"} {
		if s := strings.TrimPrefix(strings.TrimSpace(read(f)), "v"); s != "" && !strings.ContainsAny(s, " \n") {
			e.Tools["node"] = s
		}
	}
	if s := strings.TrimSpace(read(".python-version")); s != "" && !strings.ContainsAny(s, " \n") {
		e.Tools["python"] = s
	}
	if s := read("package.json"); s != "" {
		var pj struct {
			PackageManager string `json:"packageManager"`
		}
		json.Unmarshal([]byte(s), &pj)
		if m := packageManager.FindStringSubmatch(pj.PackageManager); m != nil {
			e.PackageManagers[m[1]] = m[2]
		}
	}
	for _, l := range envstep.LockfileNames() {
		if _, err := os.Stat(filepath.Join(top, l)); err == nil {
			e.Lockfiles = append(e.Lockfiles, l)
		}
	}
	data, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	// The box refuses what it would refuse: check here, before any Exec.
	if _, err := envstep.Parse(data); err != nil {
		return nil, err
	}
	return data, nil
}
