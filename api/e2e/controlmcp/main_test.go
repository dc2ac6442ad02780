//go:build booted

// Package controlmcp tests the control MCP of the real api: the
// cocoonbox-api and cocoonbox binaries built from this tree, an api
// process booting real boxes (the local supervisor under systemd-nspawn,
// root and the base image `make image` builds in $COCOONBOX_IMAGE), real
// PostgreSQL, device tokens from the browser sign-in's approve call, and
// the go-sdk's own client; the snippet `cocoonbox mcp` prints is read by
// the real claude and codex CLIs.
//
// Contract: Control MCP (box lifecycle for native agents, M4.7).
package controlmcp

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
)

// bins are the binaries of this tree, built once for the package;
// images is the image catalog (the base image as v1 and v2, so an
// upgrade has somewhere to go).
var (
	bins   harness.Binaries
	images string
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/e2e/controlmcp", SetUp: setUp, Run: dbtest.Run, TearDown: tearDown})
}

// testDir is the package's directory, beside the image roots' file
// system: the catalog hard-links its v2.
var testDir string

// setUp makes the image catalog and builds the binaries.
func setUp(ctx context.Context, image string) error {
	var err error
	if testDir, err = os.MkdirTemp("/var/tmp", "cocoonbox-controlmcp-"); err != nil {
		return err
	}
	images = filepath.Join(testDir, "images")
	if _, err := localtest.Catalog(images, image, ""); err != nil {
		return err
	}
	bins, err = harness.Build(ctx)
	return err
}

func tearDown() error {
	if testDir != "" {
		os.RemoveAll(testDir)
	}
	return nil
}

const password = "correct horse battery"

// env is one api process on a fresh database with users alice and
// bob, each with a device token, OAuth for agents on (its own URL the
// issuer).
type env struct {
	api        *harness.API
	mcpURL     string
	alice, bob string
}

func start(t testing.TB) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := dbtest.New(t)
	// The in-process supervisor on a bridge of this package's own, so it
	// runs beside the other packages' boxes; one api at a time holds it.
	sandbox := harness.LocalSandbox(images, t.TempDir(), "cbmcp0", "10.209.0.1/16")
	a, err := harness.Start(ctx, bins.API, harness.Options{StateDir: t.TempDir(), DatabaseURL: db.URL, Sandbox: sandbox, OAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("api %s log:\n%s", a.URL, a.Log())
		}
	})
	h := &env{api: a, mcpURL: a.URL + client.MCPPath}
	h.alice, h.bob = h.user(t, "alice"), h.user(t, "bob")
	return h
}

// user adds a user name to the api and answers a device token of theirs.
func (h *env) user(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok, err := h.api.UserToken(ctx, name, password, "agent")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// device signs name in and answers a new device token of theirs.
func (h *env) device(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := harness.SignIn(ctx, h.api.URL, name, password)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.Device(ctx, "agent")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// steps are operation opID's steps, in order, to its end, from alice's
// event log (Boxes.Events over gRPC).
func (h *env) steps(t testing.TB, opID string) []*controlv1.Operation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stream, err := harness.Boxes(h.api.URL, h.alice).Events(ctx, connect.NewRequest(&controlv1.BoxEventsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var out []*controlv1.Operation
	for stream.Receive() {
		op := stream.Msg().GetOperation()
		if op.GetOperationId() != opID {
			continue
		}
		out = append(out, op)
		if op.Phase == controlv1.Phase_PHASE_DONE || op.Phase == controlv1.Phase_PHASE_FAILED {
			return out
		}
	}
	t.Fatalf("the event log ended before operation %s did (%d steps): %v", opID, len(out), stream.Err())
	return nil
}
