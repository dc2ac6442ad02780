//go:build booted

// Package usage shows model usage with each user's gw key and daily cap in
// booted boxes (issue 46, Must show; Contract: Model usage, Box API keys,
// OAuth for agents; docs/usage.md): apis built as the binary builds them
// (apitest.New) against the gw stand-in (gwtest), the local supervisor in
// process on a bridge of the package's own (cbgw0) with its gw door
// forwarding to the stand-in, the boxes made through the api (a user's own
// with Boxes.Create, an agent's with the control MCP under its grant), and
// the model calls made by curl inside the boxes.
package usage

import (
	"context"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness/localsup"
	"github.com/cocoonbox/cocoonbox/api/gw/gwtest"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
)

const (
	testRoot = "/var/tmp/cocoonbox-usagee2e-test"
	bridge   = "cbgw0"
	// gateway is the bridge's address: the boxes reach the gw door on its
	// port 18090 (the image's GW_BASE_URL names the default network's,
	// 10.203.0.1, which api/sandbox/local's test calls as it stands).
	gateway = "10.219.0.1"
)

var (
	sup *local.Supervisor
	// gwUp is the gw stand-in every test's api and the supervisor's gw
	// door share (keys are per user, and every test's users are its own).
	gwUp *gwtest.Server
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/e2e/usage", SetUp: func(ctx context.Context, image string) (err error) {
		gwUp = gwtest.New()
		sup, err = localsup.Start(ctx, localsup.Config{Root: testRoot, Image: image, Bridge: bridge, Gateway: gateway + "/16", GWURL: gwUp.URL})
		return err
	}, Run: dbtest.Run, TearDown: func() error {
		if gwUp != nil {
			gwUp.Close()
		}
		return localsup.Stop(sup, testRoot)
	}})
}
