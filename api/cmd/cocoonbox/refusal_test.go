package main

import (
	"bytes"
	"context"
	"errors"

	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// Issue 45, Deliver 2: an api without a box supervisor answers
// UNAVAILABLE. That is the api's answer, not an outage: box create makes
// its call once and shows the api's words, never "cannot reach the api".
func TestRefusalIsNotRetriedAndShowsTheAPIsWords(t *testing.T) {
	var creates atomic.Int32
	a := apitest.New(t, apitest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, ".Boxes/Create") {
				creates.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}))
	t.Setenv("COCOONBOX_TOKEN", string(a.PersonalToken(a.User.ID)))
	_, err := runCLI(t, "", "box", "create", "demo", "--endpoint", a.URL)
	if err == nil || !strings.Contains(err.Error(), "no box supervisor") || strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("box create on an api without a supervisor: %v, want the api's words and not an outage", err)
	}
	if n := creates.Load(); n != 1 {
		t.Errorf("box create was sent %d times, want once", n)
	}
}

// Issue 45, Deliver 2: a dead api is retried with backoff, and that is
// said once on stderr, not before every try.
func TestDeadAPIIsRetriedAndSaidOnce(t *testing.T) {
	endpoint := closedEndpoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "box", "create", "demo", "--endpoint", endpoint)
	cmd.Env = append(os.Environ(), asCLI+"=1", "COCOONBOX_TOKEN=cb_"+strings.Repeat("0", 64))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("box create on a closed port: %v, want a failure\nstderr:\n%s", err, stderr.String())
	}
	said := strings.Count(stderr.String(), "cannot reach the api at "+endpoint)
	if said != 2 || !strings.Contains(stderr.String(), "trying again") {
		// once when it starts trying again, once in the final error
		t.Errorf("stderr names the unreachable api %d times, want once while retrying and once at the end:\n%s", said, stderr.String())
	}
}

// Issue 45, Deliver 2: names and request ids are checked before any call,
// with the rule in the message (the endpoint here answers nothing, so a
// call would fail as unreachable instead).
func TestArgumentsAreCheckedBeforeAnyCall(t *testing.T) {
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("0", 64))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"box", "create", "Bad_Name"}, `"Bad_Name" must be 1 to 63 of [a-z0-9-]`},
		{[]string{"box", "create", strings.Repeat("a", 5000)}, "must be 1 to 63 of [a-z0-9-]"},
		{[]string{"box", "ensure", "x-"}, `"x-" must be 1 to 63`},
		{[]string{"box", "create", "demo", "--request-id", "bad id!"}, `--request-id "bad id!" must be 1 to 64 of [A-Za-z0-9_.:-]`},
		{[]string{"box", "delete", "Demo", "--confirm"}, `"Demo" must be`},
		{[]string{"box", "status", "Demo"}, `"Demo" must be`},
	} {
		_, err := runCLI(t, "", append(c.args, "--endpoint", "http://127.0.0.1:1")...)
		var ue command.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cocoonbox %.80v: %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}
