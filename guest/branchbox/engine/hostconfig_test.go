package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
)

// TestCheckProjectEveryHostConfig (Allow-list Compose: the final
// inspection reads every container's HostConfig): a project's primary
// container with the signed mounts and another container as the facade
// writes it pass; each setting the facade never writes, on the other
// container, fails by rule final-inspection naming it; so do (issue 38,
// Deliver 2) BranchBox's own volume on the other container, a volume or
// tmpfs the facade did not write for its service, its volume elsewhere. A privileged
// container cannot start on this host, so it is only created: the
// inspection reads created containers too.
func TestCheckProjectEveryHostConfig(t *testing.T) {
	image := enginetest.ShellImage(t)
	c := connect(t)
	ctx := context.Background()
	project := fmt.Sprintf("bbtest-%d", os.Getpid())
	netName := project + "_default"
	if _, err := c.NetworkCreate(ctx, netName, client.NetworkCreateOptions{Labels: map[string]string{composeProject: project}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.NetworkRemove(context.Background(), netName, client.NetworkRemoveOptions{}) })
	opts := project + "-opts"
	if _, err := c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: opts, Driver: "local", DriverOpts: map[string]string{"type": "tmpfs", "device": "tmpfs"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.VolumeRemove(context.Background(), opts, client.VolumeRemoveOptions{Force: true}) })
	src := filepath.Join(t.TempDir(), "exchange")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	const target = "/run/branchbox/leases/shared/exchange"
	// BranchBox's volume (the primary's) and a volume of the project the
	// facade wrote for service other.
	ws, data, extra := project+"-workspace", project+"_data", project+"_extra"
	for _, v := range []string{ws, data, extra} {
		if _, err := c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: v, Driver: "local"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.VolumeRemove(context.Background(), v, client.VolumeRemoveOptions{Force: true}) })
	}
	want := Mounts{Binds: []Bind{{Source: src, Target: target}}, Volumes: []Volume{{Name: ws, Target: "/ws"}}}
	others := map[string]Mounts{"other": {Volumes: []Volume{{Name: data, Target: "/data"}, {Name: opts, Target: "/v"}}, Tmpfs: []string{"/scratch"}}}
	primaryMounts := []mount.Mount{{Type: mount.TypeBind, Source: src, Target: target, ReadOnly: true}, {Type: mount.TypeVolume, Source: ws, Target: "/ws"}}
	create := func(t *testing.T, hc container.HostConfig, start bool) string {
		t.Helper()
		if hc.NetworkMode == "" {
			hc.NetworkMode = container.NetworkMode(netName)
		}
		res, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config:     &container.Config{Image: image, Cmd: []string{"sleep", "1000"}, Labels: map[string]string{composeProject: project, composeService: "other"}},
			HostConfig: &hc,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		})
		if start {
			if _, err := c.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return res.ID
	}
	primary := create(t, container.HostConfig{Mounts: primaryMounts}, true)
	port, _ := network.ParsePort("3000/tcp")
	cases := []struct {
		name  string
		hc    container.HostConfig
		start bool
		why   string // "" passes
	}{
		{"as the facade writes it", container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeTmpfs, Target: "/scratch"}, {Type: mount.TypeVolume, Source: data, Target: "/data"}}}, true, ""},
		{"BranchBox's volume on another container", container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: ws, Target: "/data"}}}, true, "mounts BranchBox's volume " + ws},
		{"a volume the facade did not write", container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: extra, Target: "/extra"}}}, true, "which the facade did not write for service other"},
		{"its volume at another target", container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: data, Target: "/elsewhere"}}}, true, "which the facade did not write for service other"},
		{"a tmpfs the facade did not write", container.HostConfig{Tmpfs: map[string]string{"/run/x": ""}}, true, "has a tmpfs at /run/x"},
		{"cap_add", container.HostConfig{CapAdd: []string{"SYS_ADMIN"}}, true, "adds capabilities [CAP_SYS_ADMIN]"},
		{"privileged", container.HostConfig{Privileged: true}, false, "is privileged"},
		{"pid host", container.HostConfig{PidMode: "host"}, true, `PID mode "host"`},
		{"network host", container.HostConfig{NetworkMode: "host"}, true, `network mode "host"`},
		{"ipc host", container.HostConfig{IpcMode: "host"}, true, `IPC mode "host"`},
		{"uts host", container.HostConfig{UTSMode: "host"}, true, `UTS mode "host"`},
		{"userns host", container.HostConfig{UsernsMode: "host"}, true, `user namespace mode "host"`},
		{"a device", container.HostConfig{Resources: container.Resources{Devices: []container.DeviceMapping{{PathOnHost: "/dev/null", PathInContainer: "/dev/bbnull", CgroupPermissions: "rwm"}}}}, true, "has devices"},
		{"a port on every address", container.HostConfig{PortBindings: network.PortMap{port: {{HostIP: netip.MustParseAddr("0.0.0.0")}}}}, true, "publishes 3000/tcp on 0.0.0.0"},
		{"seccomp unconfined", container.HostConfig{SecurityOpt: []string{"seccomp=unconfined"}}, true, "security options [seccomp=unconfined]"},
		{"a volume with driver options", container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: opts, Target: "/v"}}}, true, "driver options"},
		{"a bind on another container", container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeBind, Source: src, Target: "/x", ReadOnly: true}}}, true, "only the primary container mounts signed binds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			other := create(t, tc.hc, tc.start)
			defer c.ContainerRemove(context.Background(), other, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			_, err := CheckProject(ctx, c, project, primary, want, others, nil)
			if tc.why == "" {
				if err != nil {
					t.Fatalf("control case: %v", err)
				}
				return
			}
			in, ierr := c.ContainerInspect(ctx, other, client.ContainerInspectOptions{})
			if ierr != nil {
				t.Fatal(ierr)
			}
			var re *branchbox.RuleError
			if !errors.As(err, &re) || re.Rule != branchbox.RuleFinalInspection || !strings.Contains(err.Error(), tc.why) || re.Where != "container "+strings.TrimPrefix(in.Container.Name, "/") {
				t.Fatalf("got %v, want rule %s on %s saying %q", err, branchbox.RuleFinalInspection, in.Container.Name, tc.why)
			}
		})
	}
	// And the primary itself is held to the same.
	t.Run("the primary with cap_add", func(t *testing.T) {
		c.ContainerRemove(ctx, primary, client.ContainerRemoveOptions{Force: true})
		p := create(t, container.HostConfig{CapAdd: []string{"SYS_PTRACE"}, Mounts: primaryMounts}, true)
		if _, err := CheckProject(ctx, c, project, p, want, others, nil); branchbox.RuleOf(err) != branchbox.RuleFinalInspection || !strings.Contains(err.Error(), "SYS_PTRACE") {
			t.Fatalf("got %v", err)
		}
	})
}
