// Package localsup starts the local box supervisor in process for a
// booted test package that builds its apis with apitest (the supervisor
// given to each with apitest.WithSupervisor, as apiserver's own local
// supervisor would be): the image catalog from the base image root, a
// bridge and gateway of the package's own so it runs beside other
// packages' tests, and the gw door when asked. Apart from package harness:
// the local supervisor's own tests use harness, and this uses the
// supervisor.
package localsup

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
)

// Config is where the supervisor keeps its state and which network and gw
// it serves.
type Config struct {
	// Root holds the catalog (Root/images) and the machines (Root/state);
	// the test's TearDown removes it.
	Root string
	// Image is the base image root (COCOONBOX_IMAGE).
	Image string
	// Bridge and Gateway are the package's own box network
	// ("cbgw0", "10.219.0.1/16").
	Bridge, Gateway string
	// GWURL is gw's origin behind the gw door on the gateway's port
	// 18090 ("": no door).
	GWURL string
}

// Start makes the catalog (localtest.Catalog: the base image as
// cbdesk:v1-base and cbdesk:v2-base), starts the supervisor with warnings
// on stderr, and deletes the machines a crashed earlier run left.
func Start(ctx context.Context, c Config) (*local.Supervisor, error) {
	images := filepath.Join(c.Root, "images")
	if _, err := localtest.Catalog(images, c.Image, ""); err != nil {
		return nil, err
	}
	gateway, err := netip.ParsePrefix(c.Gateway)
	if err != nil {
		return nil, err
	}
	n := local.DefaultNetwork()
	n.Bridge, n.Gateway = c.Bridge, gateway
	sup, err := local.New(ctx, local.Config{StateDir: filepath.Join(c.Root, "state"), Images: images, Network: n, GWURL: c.GWURL,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	old, _ := sup.List(ctx, "")
	for _, m := range old {
		_ = sup.Delete(ctx, m.ID)
	}
	return sup, nil
}

// Stop closes sup (nil: not started) and removes root.
func Stop(sup *local.Supervisor, root string) error {
	var err error
	if sup != nil {
		err = sup.Close()
	}
	os.RemoveAll(root)
	return err
}
