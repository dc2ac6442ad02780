//go:build booted

package boxcli

import (
	"slices"
	"strings"
	"testing"
)

// badInput: each refusal names the input and the rule it broke, exits 1
// (the api said no) or 2 (bad usage, before any call), and changes
// nothing: the box list is the same after every one.
func badInput(t *testing.T, id string) {
	before := list(t)
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"box", "create", "Bad_Name"}, 2, []string{`box create: NAME "Bad_Name" must be 1 to 63 of [a-z0-9-]`}},
		{[]string{"box", "create", "web-"}, 2, []string{`box create: NAME "web-" must be`}},
		{[]string{"box", "create", "web"}, 1, []string{`box create "web"`, "web"}},
		{[]string{"box", "create", "second"}, 1, []string{`box create "second"`, "max_boxes"}},
		{[]string{"box", "status", "nosuch"}, 1, []string{`box status "nosuch"`, "cocoonbox boxes lists yours"}},
		{[]string{"box", "hibernate", "nosuch"}, 1, []string{`box hibernate "nosuch"`, "cocoonbox boxes lists yours"}},
		{[]string{"box", "save", "web", "--request-id", "not a request id"}, 2, []string{`box save "web": --request-id "not a request id" must be 1 to 64`}},
		{[]string{"box", "upgrade", "web"}, 2, []string{"box upgrade needs --confirm"}},
		{[]string{"box", "delete", "web"}, 2, []string{`box delete "web" needs --confirm`}},
		{[]string{"box", "delete"}, 2, []string{"box delete needs the box's NAME"}},
	} {
		r := cli(t, c.args...)
		if r.code != c.code {
			t.Errorf("cocoonbox %s: exit %d, want %d\n%s%s", strings.Join(c.args, " "), r.code, c.code, r.stdout, r.stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("cocoonbox %s: %q does not name %q", strings.Join(c.args, " "), firstLine(r.stderr), w)
			}
		}
	}
	// Another user's box is nobody's box to bob, by id as by name.
	for _, box := range []string{id, "web"} {
		r := bobCLI(t, "box", "status", box)
		if r.code != 1 || !strings.Contains(r.stderr, "cocoonbox boxes lists yours") {
			t.Errorf("bob's box status %s: exit %d %s", box, r.code, r.stderr)
		}
	}
	if after := list(t); !slices.Equal(after, before) {
		t.Fatalf("the refusals changed the boxes: %+v, was %+v", after, before)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
