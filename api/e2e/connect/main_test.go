//go:build booted

// Package connect shows Connect's box door from inside booted boxes
// (issue 44, Deliver 3; Contract: Connect, "Box door (mode A)"; agent.env
// CONNECT_URL; docs/connect.md): an api built as the binary builds it
// (apitest.New) with its box door on the package's own bridge (cbconnect0,
// 10.221.0.1), the local supervisor in process, the boxes made through the
// api, and the door called by curl inside them as root.
package connect

import (
	"context"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness/localsup"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
)

const (
	testRoot = "/var/tmp/cocoonbox-connecte2e-test"
	bridge   = "cbconnect0"
	// gateway is the bridge's address: the api's box door listens on its
	// port 18091 (the image's CONNECT_URL names the default network's,
	// 10.203.0.1; the door and the key are the same).
	gateway = "10.221.0.1"
)

var sup *local.Supervisor

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/e2e/connect", SetUp: func(ctx context.Context, image string) (err error) {
		sup, err = localsup.Start(ctx, localsup.Config{Root: testRoot, Image: image, Bridge: bridge, Gateway: gateway + "/16"})
		return err
	}, Run: dbtest.Run, TearDown: func() error { return localsup.Stop(sup, testRoot) }})
}
