package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
)

// run starts a container of image running sleep with hc, as the user
// given; it is removed at cleanup.
func run(t *testing.T, c *client.Client, image, user string, hc container.HostConfig) string {
	t.Helper()
	ctx := context.Background()
	res, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Cmd: []string{"sleep", "1000"}, User: user},
		HostConfig: &hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	})
	if _, err := c.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func connect(t *testing.T) *client.Client {
	t.Helper()
	c, err := Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFinalInspection (Security contract, the final inspection): the
// signed mounts pass; each rule's violation, made on a real container,
// fails by rule final-inspection.
func TestFinalInspection(t *testing.T) {
	image := enginetest.ShellImage(t)
	c := connect(t)
	src := filepath.Join(t.TempDir(), "exchange")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	vol := fmt.Sprintf("bbtest-%d-spool", os.Getpid())
	t.Cleanup(func() {
		for _, v := range []string{vol, vol + "-other"} {
			c.VolumeRemove(context.Background(), v, client.VolumeRemoveOptions{Force: true})
		}
	})
	const target, spoolTarget = "/run/branchbox/leases/shared/exchange", "/run/branchbox/leases/tool-requests/delivery"
	var st syscall.Stat_t
	if err := syscall.Stat(src, &st); err != nil {
		t.Fatal(err)
	}
	want := Mounts{Binds: []Bind{{Source: src, Target: target, Dev: st.Dev, Ino: st.Ino}}, Volumes: []Volume{{vol, spoolTarget}}}
	bind := mount.Mount{Type: mount.TypeBind, Source: src, Target: target, ReadOnly: true}
	spool := mount.Mount{Type: mount.TypeVolume, Source: vol, Target: spoolTarget}
	signed := []mount.Mount{bind, spool}
	cases := []struct {
		name string
		hc   container.HostConfig
		why  string // "" passes
	}{
		{"the signed mounts", container.HostConfig{Mounts: signed}, ""},
		{"a writable bind", container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeBind, Source: src, Target: target}, spool}}, "writable"},
		// The signed pair, then the same source again elsewhere: the
		// duplicate is what fails, whichever order the engine lists them.
		{"a duplicate mount", container.HostConfig{Mounts: []mount.Mount{bind, spool, {Type: mount.TypeBind, Source: src, Target: "/run/branchbox/leases/shared/again", ReadOnly: true}}}, "twice"},
		{"a mistargeted mount", container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeBind, Source: src, Target: "/run/branchbox/leases/shared/elsewhere", ReadOnly: true}, spool}}, "not at its signed target"},
		{"a missing lease mount", container.HostConfig{Mounts: []mount.Mount{spool}}, "does not mount the lease source"},
		{"a wrong volume name", container.HostConfig{Mounts: []mount.Mount{bind, {Type: mount.TypeVolume, Source: vol + "-other", Target: spoolTarget}}}, "not a signed volume name"},
		{"a read-only request volume", container.HostConfig{Mounts: []mount.Mount{bind, {Type: mount.TypeVolume, Source: vol, Target: spoolTarget, ReadOnly: true}}}, "read-only"},
		{"an unsigned bind", container.HostConfig{Mounts: []mount.Mount{bind, spool, {Type: mount.TypeBind, Source: "/tmp", Target: "/host-tmp", ReadOnly: true}}}, "no lease signs"},
		{"a tmpfs", container.HostConfig{Mounts: []mount.Mount{bind, spool, {Type: mount.TypeTmpfs, Target: "/run/branchbox/leases/x"}}}, "no lease signs"},
		{"seccomp unconfined", container.HostConfig{Mounts: signed, SecurityOpt: []string{"seccomp=unconfined"}}, "seccomp=unconfined"},
		{"a HostConfig tmpfs", container.HostConfig{Mounts: signed, Tmpfs: map[string]string{"/scratch": ""}}, "tmpfs at /scratch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := run(t, c, image, "", tc.hc)
			_, err := CheckContainer(context.Background(), c, id, want)
			if tc.why == "" {
				if err != nil {
					t.Fatalf("control case: %v", err)
				}
				return
			}
			if branchbox.RuleOf(err) != branchbox.RuleFinalInspection || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("got %v, want rule %s saying %q", err, branchbox.RuleFinalInspection, tc.why)
			}
		})
	}
}

// TestFinalInspectionPropagation: a bind must have the engine's default
// propagation, rprivate, which the facade leaves (a shared or slave bind
// carries mounts across; the engine refuses one here, whose / is not
// shared, so the inspected mount is given as the engine would list it).
func TestFinalInspectionPropagation(t *testing.T) {
	want := Mounts{Binds: []Bind{{Source: "/s", Target: "/t"}}}
	refuse := func(d string, a ...any) error { return branchbox.Refuse(branchbox.RuleFinalInspection, "c", d, a...) }
	for p, ok := range map[mount.Propagation]bool{mount.PropagationRPrivate: true, mount.PropagationRShared: false, mount.PropagationRSlave: false, "": false} {
		err := checkMounts([]container.MountPoint{{Type: mount.TypeBind, Source: "/s", Destination: "/t", Propagation: p}}, want, refuse)
		if ok != (err == nil) || !ok && !strings.Contains(err.Error(), "propagation") {
			t.Errorf("propagation %q: %v", p, err)
		}
	}
}

// TestFinalInspectionSourceInode (no time of check to time of use): what
// the container shows at a bind's target must be the inode BranchBox
// opened and recorded for the source; a source the engine resolved to
// another inode (a symlink swapped in before the mount) fails.
func TestFinalInspectionSourceInode(t *testing.T) {
	image := enginetest.ShellImage(t)
	c := connect(t)
	src := filepath.Join(t.TempDir(), "exchange")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(src, &st); err != nil {
		t.Fatal(err)
	}
	const target = "/run/branchbox/leases/shared/exchange"
	id := run(t, c, image, "", container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeBind, Source: src, Target: target, ReadOnly: true}}})
	if _, err := CheckContainer(context.Background(), c, id, Mounts{Binds: []Bind{{Source: src, Target: target, Dev: st.Dev, Ino: st.Ino}}}); err != nil {
		t.Fatalf("control case: %v", err)
	}
	_, err := CheckContainer(context.Background(), c, id, Mounts{Binds: []Bind{{Source: src, Target: target, Dev: st.Dev, Ino: st.Ino + 1}}})
	if branchbox.RuleOf(err) != branchbox.RuleFinalInspection || !strings.Contains(err.Error(), "swapped") {
		t.Fatalf("got %v, want the swapped source refused", err)
	}
}

// TestProviderUser (Security contract: "rejects root or any mismatch with
// the signed consumer_uid"): remoteUser wins over containerUser over
// Config.User; root and another UID fail; the UID is the kernel's, so
// root with a fake /bin/id that prints 1000 is root.
func TestProviderUser(t *testing.T) {
	image := enginetest.ShellImage(t)
	c := connect(t)
	id := run(t, c, image, "other", container.HostConfig{})
	// What a repository's start command can do: an id that says 1000
	// (the check once ran id -u and believed it).
	if _, err := Exec(context.Background(), c, id, "root", "sh", "-c", `rm /bin/id && printf '#!/bin/sh\necho 1000\n' >/bin/id && chmod 755 /bin/id && id -u`); err != nil {
		t.Fatal(err)
	}
	if out, err := Exec(context.Background(), c, id, "root", "id", "-u"); err != nil || strings.TrimSpace(string(out)) != "1000" {
		t.Fatalf("the fake id says %q %v", out, err)
	}
	for _, tc := range []struct {
		name, remote, container string
		uids                    []uint32
		ok                      bool
	}{
		{"remoteUser", "dev", "root", []uint32{1000}, true},
		{"containerUser", "", "dev", []uint32{1000, 1000}, true},
		{"Config.User", "", "", []uint32{1001}, true},
		{"root", "root", "", nil, false},
		{"mismatch", "", "", []uint32{1000}, false},
		{"no such user", "nobody-here", "", []uint32{1000}, false},
		{"root with a fake id", "root", "", []uint32{1000}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, uid, _, err := ProviderUser(context.Background(), c, id, tc.remote, tc.container, "other", tc.uids)
			if tc.ok && (err != nil || uid != tc.uids[0]) {
				t.Fatalf("got %d %v", uid, err)
			}
			if !tc.ok && branchbox.RuleOf(err) != branchbox.RuleProviderUser {
				t.Fatalf("got %d %v, want rule %s", uid, err, branchbox.RuleProviderUser)
			}
		})
	}
}
