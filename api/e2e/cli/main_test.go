// Package cli tests sign-in, devices, tokens and agents as their users
// meet them: the cocoonbox-api and cocoonbox binaries (api/e2e/harness), a
// server on a fresh test database, the CLI signing in through headless
// Chromium. No box boots here.
//
// Contract: Browser sign-in and device tokens.
package cli

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// bins are the binaries of this tree, built once for the package.
var bins harness.Binaries

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	var err error
	bins, err = harness.Build(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		harness.RemoveBuilt()
		os.Exit(1)
	}
	code := dbtest.Run(m)
	harness.RemoveBuilt()
	os.Exit(code)
}

const password = "correct horse battery"

// env is one test's api on its own fresh database, with a user alice.
type env struct {
	t   testing.TB
	ctx context.Context
	db  *dbtest.DB
	api *harness.API
	// more is api.yaml text every api of the env is given.
	more string
}

func newEnv(t testing.TB) *env { return newEnvWith(t, "") }

// newEnvWith is newEnv with more of api.yaml (Options.More).
func newEnvWith(t testing.TB, more string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	db := dbtest.New(t)
	e := &env{t: t, ctx: ctx, db: db, more: more}
	e.api = e.start()
	e.user("alice")
	return e
}

// start runs another api on the test's database.
func (e *env) start() *harness.API {
	e.t.Helper()
	a, err := harness.Start(e.ctx, bins.API, harness.Options{StateDir: e.t.TempDir(), DatabaseURL: e.db.URL, More: e.more})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		a.Stop()
		if e.t.Failed() {
			e.t.Logf("api %s log:\n%s", a.URL, a.Log())
		}
	})
	return a
}

func (e *env) user(name string) {
	e.t.Helper()
	if err := e.api.AddUser(e.ctx, name, password); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) console(name string) *harness.Console {
	e.t.Helper()
	c, err := harness.SignIn(e.ctx, e.api.URL, name, password)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) device(c *harness.Console, name string) string {
	e.t.Helper()
	tok, err := c.Device(e.ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func (e *env) browser() *webdriver.Browser {
	e.t.Helper()
	b, err := webdriver.Start(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(b.Close)
	return b
}

// waitFor polls cond until it holds or the test's context ends, then fails
// with what cond said last.
func (e *env) waitFor(what string, cond func() (bool, string)) time.Duration {
	e.t.Helper()
	start := time.Now()
	for {
		ok, saw := cond()
		if ok {
			return time.Since(start)
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("waiting for %s: %s", what, saw)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
