package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

func init() {
	register(75, "hibernate, then box ensure wakes it (memory kept, a new wake id and machine-id)", wakeStep)
	register(76, "save, then upgrade onto the newer image (/home/user and /workspace kept)", upgradeStep)
	register(90, "delete", deleteStep)
}

// msgJournaldRestarted is cocoonbox-machine-id's MESSAGE_ID of a restart
// under a new machine id.
const msgJournaldRestarted = "0f09b4b77dc74d89998f8df597479bfa"

// wakeStep: a process and a file from before the hibernate are there after
// the wake; the api wrote a new identity (same box and key, a new wake id)
// and a new /etc/machine-id, journald moved under it, and journalctl -m
// shows the entries of both (Contract: Box identity; Journal).
func wakeStep(ctx context.Context, d *demo, r *report) {
	b := d.box
	before, err := readIdentity(b)
	if err != nil {
		r.bad("identity", "%v", err)
		return
	}
	mid, _ := b.Run("cat", "/etc/machine-id")
	pid, err := b.Sh("systemd-run --quiet --unit=cbdemo-memory sleep infinity && systemctl show -P MainPID cbdemo-memory")
	mark := fmt.Sprintf("written just before the hibernate at %d", time.Now().UnixNano())
	if err == nil {
		err = b.WriteFile("/home/user/before-hibernate", []byte(mark), 0o644, "user:user")
	}
	if err == nil {
		_, err = b.Sh("logger -t cbdemo-wake 'before the wake' && journalctl --sync")
	}
	if err != nil {
		r.bad("before", "%v", err)
		return
	}
	pid, mid = strings.TrimSpace(pid), strings.TrimSpace(mid)
	r.ok("before", "process %s (cbdemo-memory), a file in /home/user, machine-id %s, wake_id %s", pid, mid, before.WakeID)

	out, err := d.boxCLI(ctx, "hibernate", d.name, "--json")
	r.check("box hibernate --json", err, "a JSON line per event:")
	printIndented(out)
	if err != nil {
		return
	}
	st, err := d.status(ctx)
	if err == nil {
		err = expect(st.State, "hibernated")
	}
	r.check("box status", err, "%s: hibernated (its cgroup frozen, memory kept)", d.name)

	start := time.Now()
	out, err = d.boxCLI(ctx, "ensure", d.name)
	took := time.Since(start)
	if err != nil {
		r.bad("box ensure", "%v\n%s", err, out)
		return
	}
	r.ok("box ensure", "woken in %.0f ms (the whole CLI call): %s", took.Seconds()*1000, lastLine(out))

	after, err := readIdentity(b)
	switch {
	case err != nil:
		r.bad("new identity", "%v", err)
	case after.BoxID != before.BoxID || after.KeyID != before.KeyID:
		r.bad("new identity", "box %s key %s after, %s %s before", after.BoxID, after.KeyID, before.BoxID, before.KeyID)
	case after.WakeID == before.WakeID:
		r.bad("new identity", "the wake id %s did not change", after.WakeID)
	default:
		r.ok("new identity", "wake_id %s → %s, same box %s and key_id %s", before.WakeID, after.WakeID, d.id, before.KeyID)
	}
	newMid, _ := b.Run("cat", "/etc/machine-id")
	newMid = strings.TrimSpace(newMid)
	if newMid == mid || len(newMid) != 32 {
		r.bad("new machine-id", "%q before, %q after", mid, newMid)
		return
	}
	r.ok("new machine-id", "%s → %s", mid, newMid)
	now, _ := b.Run("systemctl", "show", "-P", "MainPID", "cbdemo-memory")
	alive, _ := b.Sh("kill -0 " + pid + " && echo alive")
	if strings.TrimSpace(now) == pid && strings.TrimSpace(alive) == "alive" {
		r.ok("memory kept", "process %s still running after the wake", pid)
	} else {
		r.bad("memory kept", "cbdemo-memory's PID %q after, %s before (%q)", strings.TrimSpace(now), pid, alive)
	}
	got, err := b.ReadFile("/home/user/before-hibernate")
	if err == nil {
		err = expect(string(got), mark)
	}
	r.check("file kept", err, "/home/user/before-hibernate: %q", mark)

	err = box.Until(20*time.Second, "journald restarted under "+newMid, func() (bool, string) {
		e, err := b.Journal(msgJournaldRestarted, "COCOONBOX_MACHINE_ID="+newMid)
		return err == nil && len(e) > 0, fmt.Sprintf("%d entries (%v)", len(e), err)
	})
	if err == nil {
		_, err = b.Sh("logger -t cbdemo-wake 'after the wake' && journalctl --sync")
	}
	all, _ := b.Run("journalctl", "-m", "--no-pager", "-q", "-o", "cat", "-t", "cbdemo-wake")
	cur, _ := b.Run("journalctl", "--no-pager", "-q", "-o", "cat", "-t", "cbdemo-wake")
	dirs, _ := b.Sh("ls -d /var/log/journal/" + mid + " /var/log/journal/" + newMid)
	switch {
	case err != nil:
	case !strings.Contains(all, "before the wake") || !strings.Contains(all, "after the wake"):
		err = fmt.Errorf("journalctl -m shows %q, want the entries of both machine ids", all)
	case strings.Contains(cur, "before"):
		err = fmt.Errorf("plain journalctl shows %q: the old machine id's entry too", cur)
	case strings.Count(dirs, "/var/log/journal/") != 2:
		err = fmt.Errorf("journal directories %q, want one per machine id", dirs)
	}
	r.check("journalctl -m", err, "both machine ids' entries (before and after the wake); plain journalctl only the new one's")
	// The wake set the api's claim env entries again: the key the vault
	// step removed has no record, and vault.sh unsets its name.
	_, err = waitVault(b, "vault.sh", "unset DEMO_API_KEY")
	r.check("api's claim env", err, "set again at the wake: vault.sh unsets the names no record carries now")
	out, err = d.boxCLI(ctx, "ensure", d.name)
	r.check("box ensure again", err, "%s", lastLine(out))
}

// upgradeStep saves the box, then moves it onto the newer image: what
// /home/user and /workspace hold stays, a change elsewhere goes, and
// /etc/cocoonbox/image names the new image.
func upgradeStep(ctx context.Context, d *demo, r *report) {
	b := d.box
	err := b.WriteFile("/home/user/kept-by-upgrade", []byte("home\n"), 0o644, "user:user")
	if err == nil {
		err = b.WriteFile("/workspace/kept-by-upgrade", []byte("workspace\n"), 0o644, "user:user")
	}
	if err == nil {
		err = b.WriteFile("/etc/cbdemo-dropped-by-upgrade", []byte("etc\n"), 0o644, "root")
	}
	if err != nil {
		r.bad("files", "%v", err)
		return
	}
	out, err := d.boxCLI(ctx, "save", d.name)
	r.check("box save", err, "%s", lastLine(out))
	st, err := d.status(ctx)
	if err == nil && (st.LastSavedAtMs == 0 || !st.UpgradeAvailable || st.LatestImage != d.newer) {
		err = fmt.Errorf("last_saved_at_ms %d, upgrade_available %v, latest_image %s (want %s)", st.LastSavedAtMs, st.UpgradeAvailable, st.LatestImage, d.newer)
	}
	r.check("box status", err, "saved at %s; on %s, upgrade available to %s", time.UnixMilli(st.LastSavedAtMs).Format(time.TimeOnly), st.Image, st.LatestImage)

	out, err = d.boxCLI(ctx, "upgrade", d.name)
	if err != nil && strings.Contains(out, "--confirm") {
		r.ok("upgrade unconfirmed", "refused: %s", firstLine(out))
	} else {
		r.bad("upgrade unconfirmed", "%v: %s", err, out)
	}
	out, err = d.boxCLI(ctx, "upgrade", d.name, "--confirm")
	if err != nil {
		r.bad("box upgrade", "%v\n%s", err, out)
		return
	}
	r.ok("box upgrade", "%s", lastLine(out))
	stamp, err := b.ReadFile("/etc/cocoonbox/image")
	if err == nil && !strings.HasPrefix(d.newer, firstLine(string(stamp))+"-") {
		err = fmt.Errorf("/etc/cocoonbox/image says %q, want %s", firstLine(string(stamp)), d.newer)
	}
	r.check("new image", err, "/etc/cocoonbox/image: %s", strings.ReplaceAll(strings.TrimSpace(string(stamp)), "\n", ", "))
	kept, err := b.Sh("cat /home/user/kept-by-upgrade /workspace/kept-by-upgrade")
	if err == nil {
		err = expect(kept, "home\nworkspace\n")
	}
	r.check("kept", err, "/home/user/kept-by-upgrade and /workspace/kept-by-upgrade")
	if _, err := b.Run("test", "-e", "/etc/cbdemo-dropped-by-upgrade"); err == nil {
		r.bad("dropped", "/etc/cbdemo-dropped-by-upgrade outlived the upgrade")
	} else {
		r.ok("dropped", "/etc/cbdemo-dropped-by-upgrade is gone with the old image's layer")
	}
	rec, err := readIdentity(b)
	if err != nil {
		r.bad("identity", "%v", err)
		return
	}
	r.check("identity", b.WaitHostname(d.name, 10*time.Second), "written again at the new boot: wake_id %s, hostname %s", rec.WakeID, d.name)
}

// deleteStep: without --confirm the box stays; with it, it goes.
func deleteStep(ctx context.Context, d *demo, r *report) {
	if r.failed > 0 {
		fmt.Println(d.box.Diagnostics(60))
	}
	out, err := d.boxCLI(ctx, "delete", d.name)
	if err != nil && strings.Contains(out, "--confirm") {
		r.ok("delete unconfirmed", "refused: %s", firstLine(out))
	} else {
		r.bad("delete unconfirmed", "%v: %s", err, out)
	}
	out, err = d.boxCLI(ctx, "delete", d.name, "--confirm")
	r.check("box delete", err, "%s", lastLine(out))
	out, err = d.cli.Run(ctx, "", "boxes", "--endpoint", d.api.URL)
	if err == nil && !strings.Contains(out, "No boxes") {
		err = fmt.Errorf("still listed:\n%s", out)
	}
	r.check("cocoonbox boxes", err, "%s", lastLine(out))
}
