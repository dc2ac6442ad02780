package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/command"
)

// Issue 42, Deliver 4: box snapshots, ls and restore refuse a missing or
// bad NAME, a missing PATH and an extra argument as usage errors naming
// the fault, before any call (the endpoint is a closed port).
func TestSnapshotCommandsRefuseBadUsageBeforeAnyCall(t *testing.T) {
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("0", 64))
	endpoint := closedEndpoint(t)
	for args, want := range map[string]string{
		"box snapshots":        "box snapshots needs the box's NAME",
		"box snapshots demo x": `unexpected argument "x"`,
		"box ls":               "box ls needs the box's NAME",
		"box ls Demo@s1":       `NAME "Demo"`,
		"box ls demo /a /b":    `unexpected argument "/b"`,
		"box restore demo":     "box restore demo needs at least one PATH",
		"box restore @s1 /a":   "box restore needs the box's NAME",
	} {
		_, err := runCLI(t, "", append(strings.Fields(args), "--endpoint", endpoint)...)
		var ue command.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("cocoonbox %s: %v, want a usage error saying %q", args, err, want)
		}
	}
}
