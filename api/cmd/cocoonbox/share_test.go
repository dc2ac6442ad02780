package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
)

// cocoonbox share create, list, revoke and log through the api (issue
// 43, Deliver 4): create prints the link once (the secret in its
// fragment), list shows the share live and then revoked, log answers with
// its header (no viewer opened here: api/shares shows the opens and
// closes); bad input names the argument and the rule before any call.
func TestShareCreatesListsRevokesAndLogs(t *testing.T) {
	a := apitest.New(t)
	addHibernatedBox(t, a, "local")
	t.Setenv("COCOONBOX_TOKEN", string(a.PersonalToken(a.User.ID)))
	t.Setenv("COCOONBOX_ENDPOINT", a.URL)
	out, err := runCLI(t, "", "share", "create", "main", "--view-only", "--days", "2")
	link := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(a.URL) + `/cb/share#cbs_[0-9a-f]{64}$`)
	id := regexp.MustCompile(`sh-[0-9a-f]{16}`).FindString(out)
	if err != nil || !link.MatchString(out) || id == "" || !strings.Contains(out, "view-only") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "", "share", "list"); err != nil || !regexp.MustCompile(id+`\s+main\s+view-only\s+.*\slive\s+0`).MatchString(out) || strings.Contains(out, "cbs_") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "", "share", "revoke", id); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "", "share", "list"); err != nil || !strings.Contains(out, "revoked ") {
		t.Fatalf("list after the revoke: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "", "share", "log", id); err != nil || !strings.HasPrefix(out, "AT") {
		t.Fatalf("log: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"share", "create", "Main"}, "NAME"},
		{[]string{"share", "create", "main", "--days", "31"}, "days is 1 to 30"},
		{[]string{"share", "revoke", "cbs_" + strings.Repeat("0", 64)}, "secret, not a share's id"},
		{[]string{"share", "revoke", "42"}, "is not a share's id"},
		{[]string{"share", "revoke"}, "needs one share ID"},
		{[]string{"share", "create", "nobox"}, "no box"},
		{[]string{"share", "log", "sh-0000000000000000"}, "no share"},
	} {
		if out, err := runCLI(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v\n%s, want an error with %q", c.args, err, out, c.want)
		}
	}
}
