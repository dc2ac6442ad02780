package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// CheckProject is the final inspection of every container of Compose
// project project (Contract: Security contract; the facade writes each
// service from an allow-list, and this is where what the engine runs is
// held to what BranchBox wrote, whatever the Dev Containers CLI, an
// image's metadata or a racing writer added): the primary container
// (primary, its id) by CheckContainer against want, and every container
// by checkHostConfig and its mounts: every other container's held to
// others[its Compose service] (checkOtherMounts: no bind, none of the
// primary's volumes, only what the facade wrote for the service), every
// volume mounted anywhere the local driver with no driver options. At
// least the primary must be found. Refusals are rule final-inspection.
func CheckProject(ctx context.Context, c *client.Client, project, primary string, want Mounts, others map[string]Mounts, shares map[string]string) (*container.InspectResponse, error) {
	cs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", composeProject+"="+project)})
	if err != nil {
		return nil, fmt.Errorf("listing project %s's containers: %w", project, err)
	}
	// Each service's container, for network_mode service:<other>, which
	// the engine shows as container:<other's id>.
	ids := map[string]string{}
	for _, item := range cs.Items {
		ids[item.ID] = item.Labels[composeService]
	}
	var found *container.InspectResponse
	for _, item := range cs.Items {
		if item.ID == primary {
			if found, err = CheckContainer(ctx, c, primary, want); err != nil {
				return nil, err
			}
		}
		res, err := c.ContainerInspect(ctx, item.ID, client.ContainerInspectOptions{})
		if err != nil {
			return nil, fmt.Errorf("inspecting container %s: %w", item.ID, err)
		}
		ct := res.Container
		where := "container " + strings.TrimPrefix(ct.Name, "/")
		if err := checkHostConfig(ct.HostConfig, project, where); err != nil {
			return nil, err
		}
		if err := checkNetwork(ct.HostConfig.NetworkMode, project, where, shares[item.Labels[composeService]], ids); err != nil {
			return nil, err
		}
		if item.ID == primary {
			for _, m := range ct.Mounts {
				if m.Type == mount.TypeVolume {
					if err := checkVolume(ctx, c, m.Name, where); err != nil {
						return nil, err
					}
				}
			}
		} else if err := checkOtherMounts(ctx, c, &ct, want, others, where); err != nil {
			return nil, err
		}
	}
	if found == nil {
		return nil, branchbox.Refuse(branchbox.RuleFinalInspection, "container "+primary, "is not a container of project %s", project)
	}
	return found, nil
}

// checkHostConfig holds one container's HostConfig to what the facade
// writes (none of these keys: the engine's defaults): no added
// capability, not privileged, its own PID, IPC, UTS and user namespaces,
// no device, no published port (the port proxy
// outside Compose publishes on loopback), no security option (Docker's
// default seccomp profile), no volumes from another container, no sysctl.
func checkHostConfig(hc *container.HostConfig, project, where string) error {
	refuse := func(detail string, args ...any) error {
		return branchbox.Refuse(branchbox.RuleFinalInspection, where, detail, args...)
	}
	switch {
	case hc == nil:
		return refuse("has no HostConfig")
	case len(hc.CapAdd) > 0:
		return refuse("adds capabilities %v; BranchBox adds none", hc.CapAdd)
	case hc.Privileged:
		return refuse("is privileged")
	case hc.PidMode != "":
		return refuse("has PID mode %q; BranchBox gives each container its own PID namespace", hc.PidMode)
	case hc.IpcMode != "" && hc.IpcMode != "private" && hc.IpcMode != "shareable":
		return refuse("has IPC mode %q; BranchBox gives each container its own IPC namespace", hc.IpcMode)
	case hc.UTSMode != "":
		return refuse("has UTS mode %q", hc.UTSMode)
	case hc.UsernsMode != "":
		return refuse("has user namespace mode %q", hc.UsernsMode)
	case len(hc.Devices) > 0 || len(hc.DeviceRequests) > 0 || len(hc.DeviceCgroupRules) > 0:
		return refuse("has devices %v (requests %v, cgroup rules %v); BranchBox maps none", hc.Devices, hc.DeviceRequests, hc.DeviceCgroupRules)
	case len(hc.SecurityOpt) > 0:
		return refuse("has security options %v; BranchBox sets none (Docker's default seccomp profile)", hc.SecurityOpt)
	case len(hc.VolumesFrom) > 0:
		return refuse("takes the volumes of %v", hc.VolumesFrom)
	case len(hc.Sysctls) > 0:
		return refuse("sets sysctls %v", hc.Sysctls)
	case hc.VolumeDriver != "" && hc.VolumeDriver != "local":
		return refuse("has volume driver %q", hc.VolumeDriver)
	}
	for port, bindings := range hc.PortBindings {
		for _, b := range bindings {
			return refuse("publishes %s on %s:%s; a managed launch publishes only through the loopback port proxy", port, b.HostIP, b.HostPort)
		}
	}
	return nil
}

// checkVolume refuses a mounted volume that is not the local driver with
// no options (a local volume with {type: none, o: bind, device: /} is a
// bind of the guest's root by another name).
func checkVolume(ctx context.Context, c *client.Client, name, where string) error {
	res, err := c.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err != nil {
		return fmt.Errorf("%s: inspecting volume %s: %w", where, name, err)
	}
	if v := res.Volume; v.Driver != "local" || len(v.Options) > 0 {
		return branchbox.Refuse(branchbox.RuleFinalInspection, where, "mounts volume %s (driver %q, options %v); BranchBox allows local volumes without driver options", name, v.Driver, v.Options)
	}
	return nil
}

// checkNetwork holds a container's network mode to what the facade wrote
// for its service: a network of the project, or, when the service was
// written network_mode service:<share>, container:<the id of share's
// container in the project> (ids maps the project's container ids to
// their services).
func checkNetwork(mode container.NetworkMode, project, where, share string, ids map[string]string) error {
	id, joins := strings.CutPrefix(string(mode), "container:")
	switch {
	case share == "" && !strings.HasPrefix(string(mode), project+"_"):
		return branchbox.Refuse(branchbox.RuleFinalInspection, where, "has network mode %q, not a network of project %s", mode, project)
	case share != "" && (!joins || ids[id] != share):
		return branchbox.Refuse(branchbox.RuleFinalInspection, where, "has network mode %q, not the network namespace of service %s of project %s (network_mode service:%s)", mode, share, project, share)
	}
	return nil
}
