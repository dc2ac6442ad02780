package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/identity"
)

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args  []string
		stdin string
		code  int
		err   string
	}{
		{nil, "", exitUsage, "usage"},
		{[]string{"frobnicate"}, "", exitUsage, `unknown command "frobnicate"`},
		{[]string{"write", "extra"}, "", exitUsage, "takes no arguments"},
		{[]string{"show", "--bogus"}, "", exitUsage, "unknown option"},
		{[]string{"write"}, `{"box_id":"nope"`, exitInvalid, "stdin: file: "},
		{[]string{"write"}, `{"box_id":"x","wake_id":"w","key_id":"k","public_key":"p","name":"n"}`, exitInvalid, "stdin: box_id: must start with cb-"},
		{[]string{"write"}, strings.Repeat(" ", 1<<20), exitInvalid, "the limit is 4096"},
		{[]string{"--help"}, "", exitOK, ""},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, strings.NewReader(c.stdin), &out, &errb)
		if code != c.code || !strings.Contains(errb.String()+out.String(), c.err) {
			t.Errorf("identity %q: exit %d, %q; want %d with %q", c.args, code, errb.String(), c.code, c.err)
		}
		if code != exitOK && strings.Count(errb.String(), "\n") > 1 && c.code != exitUsage {
			t.Errorf("identity %q: error is not one line: %q", c.args, errb.String())
		}
	}
}

func TestShowWithoutAnIdentityExits66(t *testing.T) {
	if _, err := os.Stat(identity.Path); err == nil {
		t.Skip("this machine has an identity file")
	}
	var out, errb bytes.Buffer
	if code := run([]string{"show"}, nil, &out, &errb); code != exitNoInput {
		t.Fatalf("show: exit %d (%s), want 66", code, errb.String())
	}
}
