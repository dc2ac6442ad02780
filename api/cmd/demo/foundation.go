package main

import (
	"context"
	"fmt"
	"strings"
)

func init() { register(10, "the box (foundation)", foundation) }

// foundation reports the image, the boot and every cocoonbox unit's state.
func foundation(ctx context.Context, d *demo, r *report) {
	b := d.box
	img, err := b.ReadFile("/etc/cocoonbox/image")
	r.check("image", err, "%s", strings.ReplaceAll(strings.TrimSpace(string(img)), "\n", ", "))
	t, _ := b.Run("systemd-analyze", "time")
	r.ok("boot", "box create to running %.2f s through the api; %s", d.created.Seconds(), firstLine(t))
	failed, err := b.FailedUnits()
	switch {
	case err != nil:
		r.bad("failed units", "%v", err)
	case len(failed) > 0:
		r.bad("failed units", "%s", strings.Join(failed, " "))
	default:
		r.ok("failed units", "none")
	}
	out, err := b.Run("systemctl", "list-unit-files", "cocoonbox-*", "--no-legend", "--no-pager")
	if strings.TrimSpace(out) == "" {
		r.bad("units", "no cocoonbox unit is installed (%v)", err)
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		// A transient unit is a command through the box's door (this
		// listing's own, docs/boxes.md), not a unit of the image.
		if len(f) < 2 || f[1] == "transient" {
			continue
		}
		active, _ := b.Run("systemctl", "show", "-P", "ActiveState", f[0])
		if state := strings.TrimSpace(active); state == "failed" || state == "" {
			r.bad("unit", "%-34s %-9s %q", f[0], f[1], state)
		} else {
			r.ok("unit", "%-34s %-9s %s", f[0], f[1], state)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return fmt.Sprint(line)
}
