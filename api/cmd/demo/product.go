package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

const (
	demoUser, demoPassword = "demo", "demo password 1"
	// demoBox is the box's name, so its hostname (Contract: Box identity).
	demoBox = "demo"
)

// startProduct brings the product up as a user meets it: the api on an
// empty state directory (its embedded PostgreSQL, the local supervisor on
// an image catalog of the demo's own), a user made with `users add`, the
// CLI signed in through headless Chromium clicking Allow, and the box
// created with `cocoonbox box create`. stop deletes the box if it is still
// there, stops the api (and with it the supervisor) and removes the
// demo's directory; it is safe to call when startProduct failed.
func startProduct(ctx context.Context, image string, r *report) (*demo, func(), error) {
	var undo []func()
	stop := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	fmt.Printf("cocoonbox demo: the api, the CLI, and a box of %s created through them\n\n== the product: the api serves, the CLI signs in, the box is created\n", image)
	dir, err := os.MkdirTemp("/var/tmp", "cocoonbox-demo-")
	if err != nil {
		return nil, stop, err
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // the embedded cluster's user (postgres) enters it

	ref, newer, err := catalog(filepath.Join(dir, "images"), image)
	if err != nil {
		return nil, stop, err
	}
	start := time.Now()
	sandbox := fmt.Sprintf("sandbox:\n  local:\n    images: %s\n    state_dir: %s\n", filepath.Join(dir, "images"), filepath.Join(dir, "machines"))
	// apt in the box goes through the egress proxy, which refuses a
	// mirror on a non-public address (here deb.debian.org is a
	// documentation one): admit exactly those addresses, as an operator
	// admits an internal mirror.
	admit, mirrors, err := harness.MirrorAdmit(ctx, image)
	if err != nil {
		return nil, stop, err
	}
	if len(admit) > 0 {
		var list []string
		for _, n := range admit {
			list = append(list, n.String())
		}
		sandbox += fmt.Sprintf("    egress:\n      admit: [%s]\n", strings.Join(list, ", "))
		r.ok("mirror admit", "the image's apt mirrors %s resolve here to %v, which the egress proxy refuses as not public: api.yaml sandbox.local.egress.admit lists them", strings.Join(mirrors, ", "), admit)
	} else {
		r.ok("mirror admit", "the image's apt mirrors %s resolve here to public addresses: nothing admitted", strings.Join(mirrors, ", "))
	}
	// The key vault's host (vault.go) is the demo's own upstream.
	up, err := startUpstream(dir)
	if err != nil {
		return nil, stop, err
	}
	undo = append(undo, up.close)
	if !strings.Contains(sandbox, "\n    egress:\n") {
		sandbox += "    egress:\n"
	}
	sandbox += up.yaml()
	api, err := harness.Start(ctx, "out/cocoonbox-api", harness.Options{StateDir: filepath.Join(dir, "state"), Sandbox: sandbox})
	if err != nil {
		return nil, stop, fmt.Errorf("api serve: %w", err)
	}
	undo = append(undo, func() {
		if err := api.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		}
	})
	r.ok("api serve", "%s healthy %.2f s after start on an empty state directory (embedded PostgreSQL, local supervisor)", api.URL, time.Since(start).Seconds())
	if err := api.AddUser(ctx, demoUser, demoPassword); err != nil {
		return nil, stop, err
	}
	r.ok("users add", "account %q made by cocoonbox-api users add", demoUser)

	bctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	b, err := webdriver.Start(bctx)
	if err != nil {
		return nil, stop, fmt.Errorf("chromium: %w", err)
	}
	defer b.Close()
	bin, err := filepath.Abs("out/cocoonbox")
	if err != nil {
		return nil, stop, err
	}
	cli := harness.CLI{Bin: bin, ConfigDir: filepath.Join(dir, "config")}
	out, err := cli.Login(bctx, b, api.URL, demoUser, demoPassword, "--device-name", "demo laptop")
	if err != nil {
		return nil, stop, fmt.Errorf("cocoonbox login: %w\n%s", err, out)
	}
	r.ok("cocoonbox login", "headless Chromium signed in to the console and clicked Allow: %s", lastLine(out))
	// The programs the demo starts that run the CLI themselves (the
	// offload packer's rsync -e and git's GIT_SSH_COMMAND) find its
	// cli.json and endpoint in the environment, as a user's shell has them.
	os.Setenv("XDG_CONFIG_HOME", cli.ConfigDir)
	os.Setenv("COCOONBOX_ENDPOINT", api.URL)

	out, err = cli.Run(ctx, "", "images", "--endpoint", api.URL)
	r.check("cocoonbox images", err, "the api boots %s and %s (the upgrade's target, the latest)", ref, newer)
	printIndented(out)
	d := &demo{api: api, cli: cli, name: demoBox, image: ref, newer: newer, machines: filepath.Join(dir, "machines"), upstream: up}
	start = time.Now()
	out, err = cli.Run(ctx, "", "box", "create", demoBox, "--image", ref, "--endpoint", api.URL)
	d.created = time.Since(start)
	if err != nil {
		return nil, stop, fmt.Errorf("cocoonbox box create: %w\n%s", err, out)
	}
	undo = append(undo, func() {
		if st, err := d.status(ctx); err == nil && st.State != "" && st.State != "absent" {
			cli.Run(ctx, "", "box", "delete", demoBox, "--confirm", "--endpoint", api.URL)
		}
	})
	st, err := d.status(ctx)
	if err != nil {
		return nil, stop, err
	}
	d.id = st.BoxID
	r.ok("box create", "%s (%s) %s in %.2f s through the api: %s", d.name, d.id, st.State, d.created.Seconds(), lastLine(out))
	d.box = box.Attach(demoBox, rshDoor(cli, api.URL, demoBox))
	return d, stop, nil
}

// boxStatus is the part of `cocoonbox box status --json` the demo reads.
type boxStatus struct {
	BoxID            string `json:"box_id"`
	Name             string `json:"name"`
	State            string `json:"state"`
	Image            string `json:"image"`
	LatestImage      string `json:"latest_image"`
	UpgradeAvailable bool   `json:"upgrade_available"`
	LastSavedAtMs    int64  `json:"last_saved_at_ms"`
}

func (d *demo) status(ctx context.Context) (boxStatus, error) {
	var st boxStatus
	out, err := d.cli.Run(ctx, "", "box", "status", d.name, "--json", "--endpoint", d.api.URL)
	if err != nil {
		return st, fmt.Errorf("cocoonbox box status: %w\n%s", err, out)
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// boxCLI runs `cocoonbox box ARGS... --endpoint URL`.
func (d *demo) boxCLI(ctx context.Context, args ...string) (string, error) {
	return d.cli.Run(ctx, "", append(append([]string{"box"}, args...), "--endpoint", d.api.URL)...)
}

var imageName = regexp.MustCompile(`^cbdesk-v([1-9][0-9]*)-([a-z]+)$`)

// catalog makes the api's image directory: the image root (cbdesk-vN-TIER)
// linked under its own name, and the next version, N+1, made from the
// same recipe as a hard-linked copy with its own stamp, so the upgrade has
// somewhere to go. It answers both refs.
func catalog(dir, image string) (ref, newer string, err error) {
	image, err = filepath.Abs(image)
	if err != nil {
		return "", "", err
	}
	m := imageName.FindStringSubmatch(filepath.Base(image))
	if m == nil {
		return "", "", fmt.Errorf("--image %s: the directory's name must be cbdesk-vN-TIER, as make image names it", image)
	}
	n, _ := strconv.Atoi(m[1])
	next := fmt.Sprintf("cbdesk-v%d-%s", n+1, m[2])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := os.Symlink(image, filepath.Join(dir, filepath.Base(image))); err != nil {
		return "", "", err
	}
	if out, err := exec.Command("cp", "-al", image, filepath.Join(dir, next)).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("copy %s as %s: %v: %s", image, next, err, out)
	}
	stamp := filepath.Join(dir, next, "etc/cocoonbox/image")
	os.Remove(stamp) // a hard link to the image's own stamp: write a new file
	data := fmt.Sprintf("cbdesk:v%d\ntier=%s\nrevision=demo (the same recipe as v%d)\n", n+1, m[2], n)
	if err := os.WriteFile(stamp, []byte(data), 0o644); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("cbdesk:v%d-%s", n, m[2]), fmt.Sprintf("cbdesk:v%d-%s", n+1, m[2]), nil
}
