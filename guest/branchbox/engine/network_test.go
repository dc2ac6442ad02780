package engine

import (
	"testing"

	"github.com/moby/moby/api/types/container"
)

// TestANetworkModeIsTheOneTheFacadeWrote (issue 38, Deliver 3): a
// container of a service the facade wrote with network_mode
// service:<db> must be in the network namespace of db's container of the
// same project (container:<its id>); any other container's namespace, or
// a project network where a share was written, is refused; a service
// with no share must be on a network of the project.
func TestANetworkModeIsTheOneTheFacadeWrote(t *testing.T) {
	ids := map[string]string{"aaa": "db", "bbb": "app", "ccc": "other"}
	for _, c := range []struct {
		mode, share string
		ok          bool
	}{
		{"p_default", "", true},
		{"host", "", false},
		{"container:aaa", "", false},
		{"container:aaa", "db", true},
		{"container:ccc", "db", false},
		{"container:zzz", "db", false},
		{"p_default", "db", false},
	} {
		err := checkNetwork(container.NetworkMode(c.mode), "p", "container x", c.share, ids)
		if (err == nil) != c.ok {
			t.Errorf("mode %s, share %q: %v, want ok %v", c.mode, c.share, err, c.ok)
		}
	}
}
