package engine

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// composeService is the label Compose puts on a container naming its
// service.
const composeService = "com.docker.compose.service"

// anonymousVolume is the name the engine gives a volume it creates for
// an image's VOLUME or a Compose volume without a source.
var anonymousVolume = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkOtherMounts holds the mounts of ct, a container of the project
// other than the primary, to what the facade wrote for its service
// (others, by the container's Compose service label): no bind; none of
// BranchBox's own volumes (the primary's signed volumes, which want
// names), whatever the name it is mounted by; each named volume the
// facade wrote for the service at its target; an anonymous volume only at
// a target the facade or the image declares; a tmpfs only at a target the
// facade wrote; every volume the local driver without options.
func checkOtherMounts(ctx context.Context, c *client.Client, ct *container.InspectResponse, want Mounts, others map[string]Mounts, where string) error {
	refuse := func(detail string, args ...any) error {
		return branchbox.Refuse(branchbox.RuleFinalInspection, where, detail, args...)
	}
	service := ""
	if ct.Config != nil {
		service = ct.Config.Labels[composeService]
	}
	wrote, ok := others[service]
	if !ok {
		return refuse("is of service %q, which is not a service the facade wrote besides the primary", service)
	}
	for _, m := range ct.Mounts {
		switch m.Type {
		case mount.TypeBind:
			return refuse("mounts %s from the guest's %s; only the primary container mounts signed binds", m.Destination, m.Source)
		case mount.TypeVolume:
			if slices.ContainsFunc(want.Volumes, func(v Volume) bool { return v.Name == m.Name }) {
				return refuse("mounts BranchBox's volume %s at %s; only the primary container mounts the run's volumes", m.Name, m.Destination)
			}
			if !wroteVolume(ct, wrote, m) {
				return refuse("mounts the volume %s at %s, which the facade did not write for service %s", m.Name, m.Destination, service)
			}
			if err := checkVolume(ctx, c, m.Name, where); err != nil {
				return err
			}
		case mount.TypeTmpfs:
			if !slices.Contains(wrote.Tmpfs, m.Destination) {
				return refuse("has a tmpfs at %s, which the facade did not write for service %s", m.Destination, service)
			}
		default:
			return refuse("has a %s mount at %s, which the facade did not write", m.Type, m.Destination)
		}
	}
	if ct.HostConfig != nil {
		for dst := range ct.HostConfig.Tmpfs {
			if !slices.Contains(wrote.Tmpfs, dst) {
				return refuse("has a tmpfs at %s, which the facade did not write for service %s", dst, service)
			}
		}
	}
	return nil
}

// wroteVolume reports whether volume mount m of ct is one the facade
// wrote for its service: a named volume at its target, or an anonymous
// one at a target of the facade's or of the image's VOLUME (Compose
// creates those).
func wroteVolume(ct *container.InspectResponse, wrote Mounts, m container.MountPoint) bool {
	anonymous := anonymousVolume.MatchString(m.Name)
	for _, v := range wrote.Volumes {
		if v.Target == m.Destination && (v.Name == m.Name || v.Name == "" && anonymous) {
			return true
		}
	}
	if anonymous && ct.Config != nil {
		_, declared := ct.Config.Volumes[m.Destination]
		return declared
	}
	return false
}

// TmpfsTarget is the target of a Compose tmpfs entry ("/run" or
// "/run:size=64m").
func TmpfsTarget(entry string) string {
	target, _, _ := strings.Cut(entry, ":")
	return target
}
