//go:build booted

// Package connect shows Connect's box door from inside booted boxes
// (issue 44, Deliver 3; Contract: Connect, "Box door (mode A)"; agent.env
// CONNECT_URL; docs/connect.md): an api built as the binary builds it
// (apitest.New) starting the local supervisor in process from its
// configuration as the binary does (WithConfiguredSupervisor), with its
// box door on the package's own bridge (cbconnect0, 10.221.0.1), the
// boxes made through the api, and the door called by curl inside them as
// root.
package connect

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
)

const (
	testRoot = "/var/tmp/cocoonbox-connecte2e-test"
	bridge   = "cbconnect0"
	// gateway is the bridge's address: the api's box door listens on its
	// port 18091 (the image's CONNECT_URL names the default network's,
	// 10.203.0.1; the door and the key are the same).
	gateway = "10.221.0.1"
)

// images is the catalog the tests' apis boot from (localtest.Catalog: the
// base image as cbdesk:v1-base and cbdesk:v2-base).
var images = filepath.Join(testRoot, "images")

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/e2e/connect", SetUp: func(ctx context.Context, image string) error {
		_, err := localtest.Catalog(images, image, "")
		return err
	}, Run: dbtest.Run, TearDown: func() error { return os.RemoveAll(testRoot) }})
}
