//go:build booted

package contract

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

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
		score, level, open, err := b.Security(u)
		if err != nil {
			t.Error(err)
			continue
		}
		t.Logf("systemd-analyze security %-34s %4.1f %s", u, score, level)
		limit, own := ownLimit[u]
		if !own {
			limit = anyLimit
		}
		if score > limit {
			t.Errorf("%s: exposure %.1f %s, above %.1f; open:\n%s", u, score, level, limit, strings.Join(open, "\n"))
		}
	}
}
