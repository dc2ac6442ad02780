package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

// TestOneBoundaryRunOutsideTheRootOnEveryVerb (One boundary): `--run
// ../victim` (and every other argument that becomes a path or a name) is
// refused at the command line by the manifest's own grammar on every verb,
// exit 65 naming the flag and rule field-syntax, never 75, before any file
// is opened: teardown --force once deleted such a directory outside the
// root and exited 0. The victim, and the root, are left as they were.
func TestOneBoundaryRunOutsideTheRootOnEveryVerb(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	victim := filepath.Join(r.Root, "victim")
	if err := os.MkdirAll(filepath.Join(victim, "keep"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "assignment.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := tree(t, r.Root)
	verbArgs := map[string][][2]string{
		"check": nil, "materialize": nil, "teardown": {{"--force", "true"}}, "launch": nil,
		"exec":          {{"--consumer", "coding-agent"}, {"--executable", "cat"}},
		"dispatch-tool": {{"--lease", "delivery_requests"}, {"--request-id", "artifact-delivery"}},
	}
	type bad struct{ verb, flag, value string }
	var cases []bad
	for verb := range verbArgs {
		for _, v := range []string{"../victim", "../../" + filepath.Base(r.Root) + "/victim", "..", "", "Run-Demo", "run/demo"} {
			cases = append(cases, bad{verb, "--run", v})
		}
		cases = append(cases, bad{verb, "NAME", "../victim"})
	}
	for _, v := range []string{"../victim", "a/b", ".hidden", "", "x\n"} {
		cases = append(cases, bad{"dispatch-tool", "--request-id", v}, bad{"dispatch-tool", "--lease", v})
	}
	cases = append(cases, bad{"exec", "--consumer", "../x"}, bad{"exec", "--executable", "../../bin/sh"},
		bad{"exec", "--inherit", "LD_PRELOAD"}, bad{"exec", "--inherit", "A,../x"})
	for _, c := range cases {
		name := "coding-demo"
		if c.flag == "NAME" {
			name = c.value
		}
		argv := []string{"feature", c.verb, name, "--root", r.Root, "--json"}
		for _, fv := range append([][2]string{{"--run", branchboxtest.RunID}}, verbArgs[c.verb]...) {
			if fv[0] == c.flag {
				fv[1] = c.value
			}
			argv = append(argv, fv[0]+"="+fv[1])
		}
		if c.flag == "--inherit" {
			argv = append(argv, "--inherit="+c.value)
		}
		out, errs, code := runIn(argv...)
		var rep struct {
			Rule, Where string
			Retryable   bool
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitInvalid || rep.Where != c.flag || rep.Retryable {
			t.Errorf("%v: exit %d, %+v (%v): %s%s; want exit 65 naming %s", argv, code, rep, err, out, errs, c.flag)
			continue
		}
		want := "field-syntax"
		if c.flag == "--inherit" {
			want = "environment-name"
		}
		if rep.Rule != want {
			t.Errorf("%v: rule %q, want %q", argv, rep.Rule, want)
		}
	}
	if after := tree(t, r.Root); after != before {
		t.Fatalf("a refused argument changed the root:\nbefore %s\nafter  %s", before, after)
	}
}

// tree lists every path below root, for a before/after comparison.
func tree(t *testing.T, root string) string {
	t.Helper()
	var out string
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out += p[len(root):] + " "
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
