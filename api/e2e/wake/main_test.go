//go:build booted

// Package wake shows scheduled wake in a booted box (issue 46, Must show;
// Contract: Scheduled wake, Idle user boxes; docs/wake.md): two apis built
// as the binary builds them (apitest.New) on one PostgreSQL, as replicas
// run, driving one local supervisor in process on a bridge of the
// package's own (cbwake0), on one injected clock (the time a schedule is
// due at and its SleepAt are read on it; the scheduler's passes and the
// idle checks still run every second of real time).
package wake

import (
	"context"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness/localsup"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
)

const testRoot = "/var/tmp/cocoonbox-wakee2e-test"

var sup *local.Supervisor

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/e2e/wake", SetUp: func(ctx context.Context, image string) (err error) {
		sup, err = localsup.Start(ctx, localsup.Config{Root: testRoot, Image: image, Bridge: "cbwake0", Gateway: "10.220.0.1/16"})
		return err
	}, Run: dbtest.Run, TearDown: func() error { return localsup.Stop(sup, testRoot) }})
}
