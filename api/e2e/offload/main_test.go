//go:build booted

// Package offload runs `cocoonbox offload` and `cocoonbox back` as a
// user does (issue 13; Contract: Offload, "Offload, Mac side" and "Back,
// Mac side"), the whole way through the product: the real cocoonbox and
// cocoonbox-api binaries built here (api/e2e/harness), `cocoonbox-api
// serve` on its embedded PostgreSQL with its in-process supervisor on a
// bridge of this package's own (cboffload0), the user added with
// `cocoonbox-api users add`, a device token of theirs from the console
// pasted into `cocoonbox login --token-stdin`, and their box made with
// Boxes.Create through the api. Every Exec of the packer goes through
// `cocoonbox rsh` and the api's Session.Exec, rsync's and git's included;
// only the tests' own looks into the box go around the api (nsenter). The
// box runs the stand-in CLI (tests/offload/standin) as claude.
package offload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/tests/offload/offloadbox"
)

const (
	testRoot = "/var/tmp/cocoonbox-offloade2e-test"
	bridge   = "cboffload0"
	password = "correct horse battery"
	// image is the ref the catalog names the test image by: the offload's
	// preflight blocks anything older than cbdesk:v22.
	image = "cbdesk:v22-base"
	// boxName is the user's one box, which every test and the benchmark
	// share (each offload ends before the next begins, so the box's
	// three-session limit is never reached).
	boxName = "offloader"
)

var (
	api  *harness.API
	bins harness.Binaries
	// configDir is the CLI's XDG_CONFIG_HOME, its cli.json signed in.
	configDir = filepath.Join(testRoot, "config")
	// boxID is the user's box's id, also its machine's.
	boxID string
	// userToken is the user's device token, for the tests' own Boxes calls.
	userToken string
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/e2e/offload", SetUp: func(ctx context.Context, img string) (err error) {
		userToken, err = setUp(ctx, img)
		return err
	}, TearDown: func() error { tearDown(userToken); return nil }, Log: func() string { return api.Log() }})
}

// setUp builds the binaries, starts the api, adds the user, signs the CLI
// in with their device token, makes their box and puts the stand-in in it
// as claude. It answers the token (for tearDown's delete).
func setUp(ctx context.Context, img string) (string, error) {
	images := filepath.Join(testRoot, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		return "", err
	}
	link := filepath.Join(images, "cbdesk-v22-base")
	os.Remove(link)
	if err := os.Symlink(img, link); err != nil {
		return "", err
	}
	var err error
	if bins, err = harness.Build(ctx); err != nil {
		return "", err
	}
	if api, err = harness.Start(ctx, bins.API, harness.Options{StateDir: filepath.Join(testRoot, "api"),
		Sandbox: harness.LocalSandbox(images, filepath.Join(testRoot, "machines"), bridge, "10.214.0.1/16")}); err != nil {
		return "", err
	}
	_, token, err := api.SignInCLI(ctx, bins.CLI, configDir, "offloader", password, "offloade2e")
	if err != nil {
		return "", err
	}
	if boxID, err = api.CreateBox(ctx, token, boxName, image); err != nil {
		return token, err
	}
	standin, err := offloadbox.BuildStandin()
	if err != nil {
		return token, err
	}
	bin, err := os.ReadFile(standin)
	if err != nil {
		return token, err
	}
	_, err = harness.InBox(bridge, boxID, bin, "install -d -o user -g user /home/user/.local /home/user/.local/bin && "+
		"cat >/home/user/.local/bin/claude && chown user:user /home/user/.local/bin/claude && chmod 755 /home/user/.local/bin/claude")
	return token, err
}

func tearDown(token string) {
	if api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if boxID != "" {
			if err := api.DeleteBox(ctx, token, boxName); err != nil {
				fmt.Fprintln(os.Stderr, "api/e2e/offload:", err)
			}
		}
		_ = api.Stop()
	}
	os.RemoveAll(testRoot)
}
