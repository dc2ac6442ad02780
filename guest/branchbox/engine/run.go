package engine

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// RunLabel marks what BranchBox itself creates in the engine for a run
// (its volumes and the port proxy), so teardown finds them from the signed
// run id alone.
const RunLabel = "io.branchbox.run"

// composeProject is the label Compose puts on a project's containers and
// networks.
const composeProject = "com.docker.compose.project"

// CreateVolume creates the local named volume name for run runID and
// returns its directory on the host (Mountpoint). The volume must be new
// (Contract: request-spool leases: the spool is a run-and-lease-derived
// volume BranchBox initializes; the workspace copy starts empty), but the
// engine's VolumeCreate answers with an existing local volume of that name
// as if it had made it. So a volume that exists already is refused (rule
// request-spool), whoever's it is: another run's, or one nobody labelled,
// is never reused (nor removed); this run's is what an unfinished launch
// left, which the launch clears before it creates any (feature.Up), so one
// found here appeared meanwhile.
func CreateVolume(ctx context.Context, c *client.Client, name, runID string) (string, error) {
	res, err := c.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err == nil {
		return "", branchbox.Refuse(branchbox.RuleRequestSpool, "volume "+name, "exists already (driver %q, label %s=%q); a launch of run %s uses only a volume it created", res.Volume.Driver, RunLabel, res.Volume.Labels[RunLabel], runID)
	}
	if !errdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspecting volume %s: %w", name, err)
	}
	if _, err := c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Driver: "local", Labels: map[string]string{RunLabel: runID}}); err != nil {
		return "", fmt.Errorf("creating volume %s: %w", name, err)
	}
	return VolumeDir(ctx, c, name, runID)
}

// VolumeDir inspects the named volume of run runID and returns its
// Mountpoint (engine-private: the dispatcher works there, the container
// sees the volume by name only).
func VolumeDir(ctx context.Context, c *client.Client, name, runID string) (string, error) {
	res, err := c.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspecting volume %s: %w", name, err)
	}
	v := res.Volume
	if v.Driver != "local" || v.Labels[RunLabel] != runID || !strings.HasPrefix(v.Mountpoint, "/") {
		return "", branchbox.Refuse(branchbox.RuleRequestSpool, "volume "+name, "is not run %s's local volume (driver %q, label %q)", runID, v.Driver, v.Labels[RunLabel])
	}
	return v.Mountpoint, nil
}

// proxyName is the port proxy container of a run.
func proxyName(runID string) string { return "branchbox-" + runID + "-port-proxy" }

// Port is one published port: Host on the guest's loopback to Runtime in
// the primary container.
type Port struct{ Host, Runtime int }

// StartProxy starts the loopback port proxy of run runID outside Compose
// (Contract: Preloaded service images, "passes it as an argument to the
// out-of-Compose loopback proxy launch with Docker --pull=never"): a
// container of image (already inspected locally; the Engine API never
// pulls on create, which is what --pull=never asks of the CLI) named
// proxyName, on the project's network netName, publishing each Host port
// on 127.0.0.1 only, with one argument per port,
// "HOST:TARGET:RUNTIME" (TARGET the primary service's name on that
// network). It returns the container's id.
func StartProxy(ctx context.Context, c *client.Client, runID, image, netName, target string, ports []Port) (string, error) {
	cfg := &container.Config{Image: image, Labels: map[string]string{RunLabel: runID}, ExposedPorts: network.PortSet{}}
	hc := &container.HostConfig{NetworkMode: container.NetworkMode(netName), PortBindings: network.PortMap{}}
	for _, p := range ports {
		cp, err := network.ParsePort(strconv.Itoa(p.Host) + "/tcp")
		if err != nil {
			return "", err
		}
		cfg.ExposedPorts[cp] = struct{}{}
		hc.PortBindings[cp] = []network.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(p.Host)}}
		cfg.Cmd = append(cfg.Cmd, fmt.Sprintf("%d:%s:%d", p.Host, target, p.Runtime))
	}
	res, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: proxyName(runID), Config: cfg, HostConfig: hc})
	if err != nil {
		return "", fmt.Errorf("creating the port proxy: %w", err)
	}
	if _, err := c.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("starting the port proxy: %w", err)
	}
	return res.ID, nil
}

// Removed is one engine object a teardown removed ("container NAME",
// "network NAME", "volume NAME"), or could not (Err set).
type Removed struct {
	Object string
	Err    error
}

// RemoveRun removes everything of run runID from the engine: the
// containers of Compose project project and the port proxy (forced, with
// their anonymous volumes), the project's networks, every volume
// labelled with the run (Contract: Teardown removes "every exact request
// volume") and every volume of the project (the named volumes the
// repository's Compose file declares). It reports each object, removed or
// not (Err); a list failure is an error.
func RemoveRun(ctx context.Context, c *client.Client, runID, project string) ([]Removed, error) {
	var out []Removed
	for _, f := range []client.Filters{make(client.Filters).Add("label", composeProject+"="+project), make(client.Filters).Add("label", RunLabel+"="+runID)} {
		cs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			return out, fmt.Errorf("listing run %s's containers: %w", runID, err)
		}
		for _, ct := range cs.Items {
			_, err := c.ContainerRemove(ctx, ct.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			out = append(out, Removed{"container " + strings.TrimPrefix(strings.Join(ct.Names, ","), "/"), err})
		}
	}
	ns, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", composeProject+"="+project)})
	if err != nil {
		return out, fmt.Errorf("listing run %s's networks: %w", runID, err)
	}
	for _, n := range ns.Items {
		_, err := c.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		out = append(out, Removed{"network " + n.Name, err})
	}
	// BranchBox's own volumes (labelled with the run) and the named
	// volumes the repository's Compose file declares (Compose labels them
	// with the project): both are the run's, and a teardown that left the
	// second kind said residue-free over a database's data.
	seen := map[string]bool{}
	for _, f := range []client.Filters{make(client.Filters).Add("label", RunLabel+"="+runID), make(client.Filters).Add("label", composeProject+"="+project)} {
		vs, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: f})
		if err != nil {
			return out, fmt.Errorf("listing run %s's volumes: %w", runID, err)
		}
		for _, v := range vs.Items {
			if seen[v.Name] {
				continue
			}
			seen[v.Name] = true
			_, err := c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
			out = append(out, Removed{"volume " + v.Name, err})
		}
	}
	return out, nil
}
