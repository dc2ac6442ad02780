package packages

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// The files apt-mark showmanual reads; Recording reads them directly.
const (
	// DpkgStatus is dpkg's database of the installed packages.
	DpkgStatus = "/var/lib/dpkg/status"
	// ExtendedStates is apt's record of the automatically installed ones.
	ExtendedStates = "/var/lib/apt/extended_states"
	// Baseline is the image's apt-mark showmanual, written at provision
	// (image/tiers/base.d/50-packages-baseline.sh).
	Baseline = "/etc/cocoonbox/packages.baseline"
)

// Manual returns what `apt-mark showmanual` prints, sorted: every package
// dpkg counts as present (any state but not-installed and config-files)
// that apt has not marked Auto-Installed, named as apt-mark names it (bare
// for the native architecture and "all", "name:arch" for a foreign one).
//
// It reads the two files itself instead of running apt-mark, which loads
// apt's whole cache (about a second with package lists present) and would
// slow every apt run the hook follows; a test checks it against apt-mark.
// A missing extended_states means nothing is automatic.
func Manual(dpkgStatus, extendedStates string) ([]string, error) {
	type key struct{ name, arch string }
	var installed []key
	native := ""
	err := readStanzas(dpkgStatus, func(f map[string]string) {
		name, arch := f["Package"], f["Architecture"]
		status := strings.Fields(f["Status"])
		if name == "" || len(status) != 3 || status[2] == "not-installed" || status[2] == "config-files" {
			return
		}
		if name == "dpkg" {
			native = arch
		}
		installed = append(installed, key{name, arch})
	})
	if err != nil {
		return nil, err
	}
	if native == "" {
		return nil, fmt.Errorf("%s: dpkg itself is not installed, so the native architecture is unknown", dpkgStatus)
	}
	auto := map[key]bool{}
	err = readStanzas(extendedStates, func(f map[string]string) {
		if f["Auto-Installed"] == "1" {
			auto[key{f["Package"], f["Architecture"]}] = true
		}
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range installed {
		// apt records an "all" package under the native architecture.
		if auto[k] || (k.arch == "all" && auto[key{k.name, native}]) {
			continue
		}
		name := k.name
		if k.arch != native && k.arch != "all" {
			name += ":" + k.arch
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Beyond returns the names of manual that baseline lacks, in manual's order.
func Beyond(manual, baseline []string) []string {
	base := make(map[string]bool, len(baseline))
	for _, b := range baseline {
		base[b] = true
	}
	var out []string
	for _, m := range manual {
		if !base[m] {
			out = append(out, m)
		}
	}
	return out
}

// readStanzas calls fn with the fields of each deb822 stanza of path
// (continuation lines are skipped: no field this package reads has any).
func readStanzas(path string, fn func(map[string]string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return scanStanzas(f, fn)
}

func scanStanzas(r io.Reader, fn func(map[string]string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	fields := map[string]string{}
	flush := func() {
		if len(fields) > 0 {
			fn(fields)
			fields = map[string]string{}
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			switch k {
			case "Package", "Architecture", "Status", "Auto-Installed":
				fields[k] = strings.TrimSpace(v)
			}
		}
	}
	flush()
	return sc.Err()
}
