//go:build booted

package local

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// A command that cannot start (here: an argument past the kernel's 128 KiB
// for one, E2BIG) fails with an error the api logs: it named the first
// word, so a secret given as one (GH_TOKEN=ghp_…) reached the log.
func TestAStartFailureNamesNothingOfTheCommand(t *testing.T) {
	const token = "GH_TOKEN=ghp_0123456789abcdefSECRET"
	d := &unitDoor{leader: 1 << 30}
	for _, tty := range []*sandbox.WindowSize{nil, {Rows: 24, Cols: 80}} {
		p, err := d.Start(t.Context(), sandbox.ExecRequest{Args: []string{token, strings.Repeat("x", 200<<10)}, TTY: tty})
		if err == nil {
			p.Wait()
			t.Fatal("a command with a 200 KiB argument started")
		}
		if strings.Contains(err.Error(), "ghp_") || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("the start error quotes the command: %v", err)
		}
		t.Logf("tty %v: %v", tty != nil, err)
	}
}
