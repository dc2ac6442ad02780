package contract

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// exposure is the last line of systemd-analyze security UNIT.
var exposure = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+) (\S+)`)

// ownLimit is the highest exposure allowed for the units this concern
// ships; every other cocoonbox service must at least not be left at
// systemd's default (UNSAFE, 9.x), the score of a unit nobody hardened.
var ownLimit = map[string]float64{session: 4.0}

const anyLimit = 9.0

// Every cocoonbox-*.service in the box (ours and those other concerns
// add) gets systemd-analyze security; the test prints each score.
func TestSystemdAnalyzeSecurityOfEveryCocoonboxService(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	var units []string
	out := b.Must(t, "systemctl", "list-unit-files", "--type=service", "--no-legend", "--no-pager", "cocoonbox-*")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.Contains(f[0], "@") {
			units = append(units, f[0])
		}
	}
	if len(units) == 0 {
		t.Fatal("no cocoonbox-*.service in the box")
	}
	for _, u := range units {
		res, err := b.Exec(box.Cmd{Args: []string{"systemd-analyze", "security", "--no-pager", u}})
		if err != nil {
			t.Fatal(err)
		}
		m := exposure.FindStringSubmatch(res.Stdout)
		if m == nil {
			t.Errorf("systemd-analyze security %s: no exposure level (exit %d): %s", u, res.ExitCode, res.Stderr)
			continue
		}
		score, _ := strconv.ParseFloat(m[2], 64)
		t.Logf("systemd-analyze security %-34s %4.1f %s", u, score, m[3])
		limit, own := ownLimit[u]
		if !own {
			limit = anyLimit
		}
		if score > limit {
			var open []string
			for _, line := range strings.Split(res.Stdout, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "✗") {
					open = append(open, strings.TrimSpace(line))
				}
			}
			t.Errorf("%s: exposure %.1f %s, above %.1f; open:\n%s", u, score, m[3], limit, strings.Join(open, "\n"))
		}
	}
}
