//go:build booted

// Package boxes runs the boxes as a deployment does: real
// `cocoonbox-api serve` processes on one PostgreSQL, driving one
// cocoonbox-sandboxd over its unix socket, killed with SIGKILL and
// started again. The test reads the daemon's machines with its own
// wire client.
package boxes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

var (
	bins harness.Binaries
	// root is this run's own: two runs at once (two work trees on one
	// host) must not remove each other's binaries and daemon socket; their
	// daemons take turns on the bridge.
	root     = fmt.Sprintf("/var/tmp/cocoonbox-boxese2e-%d", os.Getpid())
	socket   = filepath.Join(root, "sandboxd.sock")
	sandboxd *wire.Client
	v1       = "cbdesk:v1-base"
	// v2 is the catalog's newest base image (localtest.Catalog), the one
	// an in-process supervisor keeps spares of.
	v2 = "cbdesk:v2-base"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/e2e/boxes", SetUp: setUp, Run: dbtest.Run, TearDown: tearDown})
}

// daemon is the cocoonbox-sandboxd setUp started.
var daemon *exec.Cmd

// setUp makes the image catalog, builds the binaries, starts
// cocoonbox-sandboxd and deletes the machines a crashed earlier run left.
func setUp(ctx context.Context, image string) error {
	images := filepath.Join(root, "images")
	if _, err := localtest.Catalog(images, image, ""); err != nil {
		return err
	}
	var err error
	if bins, err = harness.Build(ctx); err != nil {
		return err
	}
	// Its own box network, so it runs beside the supervisor's own tests.
	daemon = exec.Command(bins.Sandboxd, "--listen", "unix:"+socket,
		"--state-dir", filepath.Join(root, "state"), "--images", images, "--bridge", "cbboxes1", "--gateway", "10.205.0.1/16")
	daemon.Stdout, daemon.Stderr = os.Stderr, os.Stderr
	if err := daemon.Start(); err != nil {
		daemon = nil
		return err
	}
	sandboxd = wire.NewClient(wire.H2CClient(socket, "", 0), "http://sandboxd")
	if err := box.Until(time.Minute, "cocoonbox-sandboxd answers", func() (bool, string) {
		_, err := sandboxd.Images(ctx)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return err
	}
	old, _ := sandboxd.List(ctx, "")
	for _, mm := range old {
		_ = sandboxd.Delete(ctx, mm.ID)
	}
	return nil
}

// tearDown stops the daemon and removes the test's root.
func tearDown() error {
	if daemon != nil {
		daemon.Process.Signal(os.Interrupt)
		daemon.Wait()
	}
	os.RemoveAll(root)
	return nil
}
