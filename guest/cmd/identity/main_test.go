package main

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args  []string
		stdin string
		code  int
		err   string
	}{
		// Usage errors exit 2 like every helper's (package cli); it was 64.
		{nil, "", cli.Usage, "usage"},
		{[]string{"frobnicate"}, "", cli.Usage, `unknown command "frobnicate"`},
		{[]string{"write", "extra"}, "", cli.Usage, "takes no arguments"},
		{[]string{"show", "--bogus"}, "", cli.Usage, "flag provided but not defined: -bogus"},
		{[]string{"write"}, `{"box_id":"nope"`, cli.Invalid, "stdin: file: "},
		{[]string{"write"}, `{"box_id":"x","wake_id":"w","key_id":"k","public_key":"p","name":"n"}`, cli.Invalid, "stdin: box_id: must start with cb-"},
		{[]string{"write"}, strings.Repeat(" ", 1<<20), cli.Invalid, "the limit is 4096"},
		{[]string{"--help"}, "", cli.OK, "usage: identity write"},
		{[]string{"write", "--help"}, "", cli.OK, "usage: identity write"},
		{[]string{"--version"}, "", cli.OK, "identity "},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, strings.NewReader(c.stdin), &out, &errb)
		if code != c.code || !strings.Contains(errb.String()+out.String(), c.err) {
			t.Errorf("identity %q: exit %d, %q; want %d with %q", c.args, code, errb.String(), c.code, c.err)
		}
		if code != cli.OK && strings.Count(errb.String(), "\n") > 1 && c.code != cli.Usage {
			t.Errorf("identity %q: error is not one line: %q", c.args, errb.String())
		}
	}
}

func TestShowWithoutAnIdentityExits66(t *testing.T) {
	if _, err := os.Stat(identity.Path); err == nil {
		testenv.SkipOrFail(t, "this machine has an identity file at "+identity.Path+" (a box): the test needs one without")
	}
	var out, errb bytes.Buffer
	if code := run([]string{"show"}, nil, &out, &errb); code != cli.NoInput {
		t.Fatalf("show: exit %d (%s), want 66", code, errb.String())
	}
}

// identity write refuses a name the hostname helper would refuse, instead
// of telling the api it succeeded (issue 18, item 6). The refusal happens
// before any file is touched, so this runs without root.
func TestWriteRefusesANameThatMapsToNoHostname(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"_box", "box_", "-box"} {
		id := &identity.Identity{BoxID: "cb-0a1b2c3d", WakeID: "w-1", KeyID: identity.KeyID(pub),
			PublicKey: identity.EncodePublicKey(pub), Name: name}
		var out, errb bytes.Buffer
		code := run([]string{"write"}, bytes.NewReader(id.Marshal()), &out, &errb)
		if _, perr := identity.Parse(id.Marshal()); perr != nil && name != "-box" {
			t.Fatalf("the record parser refuses %q (%v); this test needs one it accepts", name, perr)
		}
		if code != cli.Invalid || !strings.Contains(errb.String(), "name") {
			t.Errorf("write of name %q: exit %d, %q; want 65 naming the name", name, code, errb.String())
		}
	}
}
