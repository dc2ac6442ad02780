package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Issue 10's story (Contract: Browser sign-in and device tokens), after
// the CLI's browser sign-in at the start: the device listed, then, once the
// box is gone, revoked, and the CLI's next call refused.
func init() {
	register(80, "the api: the CLI's device listed", devicesStep)
	register(95, "the api: the CLI's device revoked", revokeStep)
}

var deviceLine = regexp.MustCompile(`(?m)^\* (dev_[0-9a-f]{16})\s+cocoonbox-cli\s+demo laptop`)

// thisDevice lists the devices (cocoonbox devices) and answers the CLI's
// own, the line * marks, with the listing.
func thisDevice(ctx context.Context, d *demo) (string, string, error) {
	out, err := d.cli.Run(ctx, "", "devices", "--endpoint", d.api.URL)
	id := deviceLine.FindStringSubmatch(out)
	if err == nil && id == nil {
		err = fmt.Errorf("no line * dev_… cocoonbox-cli demo laptop")
	}
	if err != nil {
		return "", out, fmt.Errorf("%v\n%s", err, out)
	}
	return id[1], out, nil
}

func devicesStep(ctx context.Context, d *demo, r *report) {
	id, out, err := thisDevice(ctx, d)
	if err != nil {
		r.bad("cocoonbox devices", "%v", err)
		return
	}
	r.ok("cocoonbox devices", "lists %s (\"demo laptop\", * this CLI)", id)
	printIndented(out)
}

func revokeStep(ctx context.Context, d *demo, r *report) {
	id, _, err := thisDevice(ctx, d)
	if err != nil {
		r.bad("cocoonbox devices", "%v", err)
		return
	}
	out, err := d.cli.Run(ctx, "", "devices", "revoke", id, "--endpoint", d.api.URL)
	r.check("devices revoke", err, "%s", lastLine(out))
	out, err = d.cli.Run(ctx, "", "boxes", "--endpoint", d.api.URL)
	if err == nil || !strings.Contains(out, "refused") {
		r.bad("next call refused", "the CLI's call after the revoke: %v\n%s", err, out)
		return
	}
	r.ok("next call refused", "cocoonbox boxes: %s", lastLine(out))
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
