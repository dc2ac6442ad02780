//go:build booted

package boxes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// secondSandboxd starts another cocoonbox-sandboxd, a second host, on its
// own socket, state and box network (10.215/16), stopped when the test
// ends; it answers its socket and a wire client of it.
func secondSandboxd(t *testing.T) (string, *wire.Client) {
	t.Helper()
	dir := filepath.Join(root, "host2")
	sock := filepath.Join(dir, "sandboxd.sock")
	os.MkdirAll(dir, 0o755)
	d := exec.Command(bins.Sandboxd, "--listen", "unix:"+sock,
		"--state-dir", filepath.Join(dir, "state"), "--images", filepath.Join(root, "images"),
		"--bridge", "cbboxes5", "--gateway", "10.215.0.1/16")
	d.Stdout, d.Stderr = os.Stderr, os.Stderr
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	c := wire.NewClient(wire.H2CClient(sock, "", 0), "http://sandboxd")
	t.Cleanup(func() {
		d.Process.Signal(os.Interrupt)
		d.Wait()
		os.RemoveAll(dir)
	})
	wait.Eventually(t, time.Minute, "the second cocoonbox-sandboxd answers", func() (bool, string) {
		_, err := c.Images(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	return sock, c
}

// Must show (boxes issue, the local supervisor: "one api can drive boxes
// on several hosts: the api records which host holds each box"): an api
// on two cocoonbox-sandboxd hosts puts a user's two boxes one on each (the
// host holding fewest), records the host, and every later call reaches
// the box's own host: rsh, hibernate and wake, delete. An api whose
// sandbox.hosts lacks a host that holds a box answers that box's calls
// unavailable naming the host, changing nothing, and still serves the
// other box.
func TestOneAPIDrivesBoxesOnTwoHosts(t *testing.T) {
	e := newEnv(t)
	sock2, host2 := secondSandboxd(t)
	hosts := fmt.Sprintf("sandbox:\n  hosts: {sbx: %q, sbx2: %q}\n", "unix:"+socket, "unix:"+sock2)
	a := e.startWith(hosts)
	tok := e.user(a, "wide", 2)
	var uid string
	if err := e.db.Pool.QueryRow(e.ctx, "SELECT id::text FROM users WHERE name = 'wide'").Scan(&uid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the second host's machines, as deleteMachines does the first's
		ms, _ := host2.List(context.Background(), uid)
		for _, m := range ms {
			host2.Delete(context.Background(), m.ID)
		}
	})
	c := harness.Boxes(a.URL, tok)
	onHost := map[string]string{} // box name → host in its row
	for _, name := range []string{"left", "right"} {
		r, err := c.Create(e.ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: rid(), Name: name, Image: v1}))
		if err != nil {
			t.Fatal(err)
		}
		e.done(c, r.Msg)
		var host string
		if err := e.db.Pool.QueryRow(e.ctx, "SELECT host FROM boxes WHERE name = $1", name).Scan(&host); err != nil {
			t.Fatal(err)
		}
		onHost[name] = host
	}
	if onHost["left"] != "sbx" || onHost["right"] != "sbx2" {
		t.Fatalf("the two boxes' hosts: %v; want left on sbx and right on sbx2 (fewest boxes, by name on a tie)", onHost)
	}
	// Each host holds exactly its own box.
	for host, client := range map[string]*wire.Client{"sbx": sandboxd, "sbx2": host2} {
		ms, err := client.List(e.ctx, uid)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range ms {
			var name string
			e.db.Pool.QueryRow(e.ctx, "SELECT name FROM boxes WHERE id = $1", m.ID).Scan(&name)
			names = append(names, name)
		}
		if want := map[string]string{"sbx": "left", "sbx2": "right"}[host]; strings.Join(names, ",") != want {
			t.Fatalf("host %s holds %v; want only %s", host, names, want)
		}
	}
	cli := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir(), Env: []string{"COCOONBOX_ENDPOINT=" + a.URL, "COCOONBOX_TOKEN=" + tok}}
	// The box's own helper sets the hostname from the identity the api
	// wrote, a moment after the boot: rsh reaches the box until it shows.
	hostname := func(box string) {
		t.Helper()
		wait.Eventually(t, 30*time.Second, "rsh --box "+box+" -- hostname answering "+box, func() (bool, string) {
			out, err := cli.Run(e.ctx, "", "rsh", "--box", box, "--", "hostname")
			return err == nil && strings.TrimSpace(out) == box, fmt.Sprintf("%q, %v", out, err)
		})
	}
	for _, name := range []string{"left", "right"} {
		hostname(name)
	}
	// Hibernate and wake the second host's box through the api.
	h, err := c.Hibernate(e.ctx, connect.NewRequest(&controlv1.BoxOperationRequest{RequestId: rid(), Box: "right"}))
	if err != nil {
		t.Fatal(err)
	}
	e.done(c, h.Msg)
	if m, err := host2.Get(e.ctx, boxID(t, e, "right")); err != nil || m.State != sandbox.Hibernated {
		t.Fatalf("the right box's machine on sbx2 after the hibernate: %v, %v", m.State, err)
	}
	r, err := c.Ensure(e.ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: rid(), Box: "right"}))
	if err != nil {
		t.Fatal(err)
	}
	if r.Msg.Operation != nil {
		e.done(c, r.Msg)
	}
	hostname("right")
	// An api that knows only sbx: the box sbx2 holds is unavailable, naming
	// the host; the other is served.
	narrow := e.start()
	nc := harness.Boxes(narrow.URL, tok)
	e.accepted(nc)
	_, err = nc.Hibernate(e.ctx, connect.NewRequest(&controlv1.BoxOperationRequest{RequestId: rid(), Box: "right"}))
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), `host "sbx2" holds the box but is not in this api's sandbox.hosts`) {
		t.Fatalf("a call on a box of a host this api lacks: %v", err)
	}
	if st, err := nc.Status(e.ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: "left"})); err != nil || st.Msg.Box.GetState() != controlv1.BoxState_BOX_STATE_RUNNING {
		t.Fatalf("the other box through that api: %v, %v", st, err)
	}
	narrow.Stop()
	if st, err := c.Status(e.ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: "right"})); err != nil ||
		st.Msg.Box.GetState() != controlv1.BoxState_BOX_STATE_RUNNING || st.Msg.Operation != nil {
		t.Fatalf("the refused box after the refusal: %v, %v; want running with no operation (nothing changed)", st, err)
	}
	// Delete both through the api of both hosts: each host is left empty.
	for _, name := range []string{"left", "right"} {
		r, err := c.Delete(e.ctx, connect.NewRequest(&controlv1.ConfirmedBoxRequest{RequestId: rid(), Box: name, Confirm: true}))
		if err != nil {
			t.Fatal(err)
		}
		e.done(c, r.Msg)
	}
	for host, client := range map[string]*wire.Client{"sbx": sandboxd, "sbx2": host2} {
		if ms, err := client.List(e.ctx, uid); err != nil || len(ms) != 0 {
			t.Fatalf("host %s after the deletes: %v, %v", host, ms, err)
		}
	}
}

func boxID(t *testing.T, e *env, name string) string {
	t.Helper()
	var id string
	if err := e.db.Pool.QueryRow(e.ctx, "SELECT id::text FROM boxes WHERE name = $1", name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
