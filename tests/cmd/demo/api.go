package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Issue 10's story (Contract: Browser sign-in and device tokens): the api on
// its embedded database, a user made by the admin command, the CLI signed in
// through headless Chromium clicking Allow, the device listed, revoked, and
// the CLI's next call refused. The box is not needed; the binaries are
// make build's, in out/.
func init() {
	register(80, "the api: browser sign-in of the CLI, its device listed and revoked", apiStep)
}

func apiStep(ctx context.Context, _ *box.Box, r *report) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("/var/tmp", "cocoonbox-demo-api-")
	if err != nil {
		r.bad("api", "%v", err)
		return
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // the embedded cluster's user (postgres) enters it

	start := time.Now()
	api, err := e2e.Start(ctx, "out/cocoonbox-api", e2e.Options{StateDir: filepath.Join(dir, "state")})
	if err != nil {
		r.bad("api serve", "%v", err)
		return
	}
	defer api.Stop()
	r.ok("api serve", "%s healthy %.2f s after start on an empty state directory (embedded PostgreSQL)", api.URL, time.Since(start).Seconds())

	const user, password = "demo", "demo password 1"
	r.check("users add", api.AddUser(ctx, user, password), "account %q made by cocoonbox-api users add", user)

	b, err := webdriver.Start(ctx)
	if err != nil {
		r.bad("chromium", "%v", err)
		return
	}
	defer b.Close()
	cli := e2e.CLI{Bin: "out/cocoonbox", ConfigDir: filepath.Join(dir, "config")}
	out, err := cli.Login(ctx, b, api.URL, user, password, "--device-name", "demo laptop")
	if err != nil {
		r.bad("cocoonbox login", "%v\n%s", err, out)
		return
	}
	r.ok("cocoonbox login", "headless Chromium signed in to the console and clicked Allow: %s", lastLine(out))

	out, err = cli.Run(ctx, "", "devices", "--endpoint", api.URL)
	id := regexp.MustCompile(`(?m)^\* (dev_[0-9a-f]{16})\s+cocoonbox-cli\s+demo laptop`).FindStringSubmatch(out)
	if err != nil || id == nil {
		r.bad("cocoonbox devices", "%v\n%s", err, out)
		return
	}
	r.ok("cocoonbox devices", "lists %s (\"demo laptop\", * this CLI)", id[1])
	printIndented(out)

	out, err = cli.Run(ctx, "", "devices", "revoke", id[1], "--endpoint", api.URL)
	r.check("devices revoke", err, "%s", lastLine(out))
	out, err = cli.Run(ctx, "", "devices", "--endpoint", api.URL)
	if err == nil || !strings.Contains(out, "refused") {
		r.bad("next call refused", "the CLI's call after the revoke: %v\n%s", err, out)
		return
	}
	r.ok("next call refused", "%s", lastLine(out))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func printIndented(s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Println("        " + l)
	}
}
