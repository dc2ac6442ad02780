package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	want := Mounts{Binds: []Bind{{src, target}}, Volumes: []Volume{{vol, spoolTarget}}}
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
		{"a duplicate mount", container.HostConfig{Mounts: []mount.Mount{bind, spool, {Type: mount.TypeBind, Source: src, Target: "/run/branchbox/leases/shared/again", ReadOnly: true}}}, "not at its signed target"},
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

// TestProviderUser (Security contract: "runs id -u in the container, and
// rejects root or any mismatch with the signed consumer_uid"): remoteUser
// wins over containerUser over Config.User; root and another UID fail.
func TestProviderUser(t *testing.T) {
	image := enginetest.ShellImage(t)
	c := connect(t)
	id := run(t, c, image, "other", container.HostConfig{})
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, uid, err := ProviderUser(context.Background(), c, id, tc.remote, tc.container, "other", tc.uids)
			if tc.ok && (err != nil || uid != tc.uids[0]) {
				t.Fatalf("got %d %v", uid, err)
			}
			if !tc.ok && branchbox.RuleOf(err) != branchbox.RuleProviderUser {
				t.Fatalf("got %d %v, want rule %s", uid, err, branchbox.RuleProviderUser)
			}
		})
	}
}
