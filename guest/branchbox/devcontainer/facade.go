// The facade (facade.go) generates what the Dev Containers CLI reads for a managed
// launch (Contract: BranchBox managed runtime manifest, "Preloaded service
// images" and the Security contract): a Compose file and a devcontainer.json
// made from the repository's, loaded literally by package devcontainer,
// with every image path closed and only signed mounts. They are written
// owner-only and durably into a directory of BranchBox's own, so the CLI
// never reads a file the consumer can write.

package devcontainer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// The generated files' names in the facade directory.
const (
	ComposeFile = "compose.yaml"
	ConfigFile  = "devcontainer.json"
)

// Facade is the generated pair, ready to write.
type Facade struct {
	// Dir is the absolute directory the files go to (the config names the
	// Compose file by its absolute path there).
	Dir     string
	Compose []byte
	Config  []byte
	// Others is what the facade wrote for each service but the primary,
	// by service: the final inspection holds that service's containers
	// to it (engine.CheckProject).
	Others map[string]engine.Mounts
	// Shares maps each service written with network_mode
	// service:<other> to other: its container joins that container's
	// network namespace, and nothing else does (engine.CheckProject).
	Shares map[string]string
}

// ProjectName is the Compose project of a run, derived from the signed
// run id so teardown can find it: "branchbox-<run_id>".
func ProjectName(runID string) string { return "branchbox-" + runID }

// VolumeName is the Docker volume of a tool-request lease's spool, derived
// from the signed run and lease ("Shared directory, tool endpoint, and
// request-spool leases": a run-and-lease-derived Docker volume).
func VolumeName(runID, leaseID string) string {
	return "branchbox-" + runID + "-" + leaseID
}

// WorkspaceVolume is the named volume that carries the run's workspace
// into the primary container at its workspaceFolder. The contract allows
// no writable bind, so the checked-out workspace is copied into this
// volume before the CLI runs (docs/branchbox.md, "Managed launches (`feature launch`)").
func WorkspaceVolume(runID string) string { return "branchbox-" + runID + "-workspace" }

// Generate builds the facade of a checked input for assignment a (which
// must pass branchbox.ManagedLaunchError and whose service_images
// CheckServiceImages accepted), for writing into dir
// (absolute). In the Compose file each bound service gets its assigned
// image, no build and pull_policy: never, and loses every bind mount; the
// primary service's volumes are exactly the signed read-only source/target
// pairs of the bind-capable leases plus one named writable volume per
// tool-request lease at its request_spool_target and the workspace volume
// at workspaceFolder (required: absolute, clean, outside /run/branchbox;
// rule devcontainer-config), those volumes external (BranchBox makes
// them), and it has no security_opt (Docker's default seccomp profile)
// and is not privileged. The config names the
// facade Compose file, keeps the rest of the repository's keys but
// what configKeys passes, and turns updateRemoteUserUID off. Values are copied as
// loaded, so "$$" escapes, quotes and newlines reach the files unchanged.
func Generate(a *branchbox.Assignment, in *Input, dir string) (*Facade, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("facade directory %q is not absolute", dir)
	}
	if err := CheckServiceImages(a.ServiceImages, in.Project); err != nil {
		return nil, err
	}
	// Built from the allow-list (package devcontainer refused the rest):
	// nothing of the repository's project is copied whole.
	p := types.Project{Name: ProjectName(a.RunID), Services: types.Services{}, Volumes: types.Volumes{}, Networks: types.Networks{}}
	for name, v := range in.Project.Volumes {
		p.Volumes[name] = types.VolumeConfig{Driver: v.Driver, Labels: v.Labels}
	}
	for name, n := range in.Project.Networks {
		p.Networks[name] = types.NetworkConfig{Driver: n.Driver, Labels: n.Labels, Internal: n.Internal}
	}
	for name, s := range in.Project.Services {
		p.Services[name] = allowedService(name, s, a.ServiceImages[name])
		// A dependency on a disabled service (an outer tunnel connector)
		// is dropped: it never runs.
		for dep := range s.DependsOn {
			if _, ok := in.Project.Services[dep]; !ok {
				delete(p.Services[name].DependsOn, dep)
			}
		}
	}
	ws := in.Config.WorkspaceFolder
	if !path.IsAbs(ws) || path.Clean(ws) != ws || ws == "/" || strings.HasPrefix(ws+"/", "/run/branchbox/") {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, in.Config.Path+": workspaceFolder",
			"is %q; a managed launch needs an absolute, clean workspaceFolder outside /run/branchbox, where the workspace volume goes", ws)
	}
	primary := p.Services[in.Config.Service]
	primary.Volumes = []types.ServiceVolumeConfig{{Type: types.VolumeTypeVolume, Source: workspaceKey, Target: ws}}
	primary.Tmpfs = nil
	// BranchBox creates the volumes (labelled with the run) before the
	// CLI runs: Compose neither makes nor removes them.
	p.Volumes[workspaceKey] = types.VolumeConfig{Name: WorkspaceVolume(a.RunID), External: true}
	for _, l := range a.Leases {
		primary.Volumes = append(primary.Volumes, leaseMounts(a, &l)...)
		if l.Scope == branchbox.ScopeToolRequest {
			p.Volumes[volumeKey(l.LeaseID)] = types.VolumeConfig{Name: VolumeName(a.RunID, l.LeaseID), External: true}
		}
	}
	p.Services[in.Config.Service] = primary
	compose, err := p.MarshalYAML()
	if err != nil {
		return nil, fmt.Errorf("facade compose file: %w", err)
	}
	compose = append([]byte(versionHead), compose...)
	config, err := generateConfig(in.Config, filepath.Join(dir, ComposeFile))
	if err != nil {
		return nil, err
	}
	return &Facade{Dir: dir, Compose: compose, Config: config, Others: others(&p, in.Config.Service), Shares: shares(&p)}, nil
}

// shares maps each service of p with network_mode service:<other> to
// other.
func shares(p *types.Project) map[string]string {
	out := map[string]string{}
	for name, s := range p.Services {
		if other, ok := strings.CutPrefix(s.NetworkMode, "service:"); ok {
			out[name] = other
		}
	}
	return out
}

// others is what project p mounts in each service but primary, as the
// engine names it: a named volume key k of the project is the volume
// "<project>_<k>" (Compose's name: the facade writes no name), a volume
// without a source an anonymous one, a tmpfs its target.
func others(p *types.Project, primary string) map[string]engine.Mounts {
	out := map[string]engine.Mounts{}
	for name, s := range p.Services {
		if name == primary {
			continue
		}
		var m engine.Mounts
		for _, v := range s.Volumes {
			switch {
			case v.Type == types.VolumeTypeTmpfs:
				m.Tmpfs = append(m.Tmpfs, v.Target)
			case v.Source == "":
				m.Volumes = append(m.Volumes, engine.Volume{Target: v.Target})
			default:
				m.Volumes = append(m.Volumes, engine.Volume{Name: p.Name + "_" + v.Source, Target: v.Target})
			}
		}
		for _, t := range s.Tmpfs {
			m.Tmpfs = append(m.Tmpfs, engine.TmpfsTarget(t))
		}
		out[name] = m
	}
	return out
}

// versionHead opens the facade Compose file. The Dev Containers CLI
// copies the first line of the first Compose file that matches
// /^\s*(version:.*)$/m to the head of its own override (its wp
// function); without this line that was whatever line of the project
// came first, an environment or label key "version" of the repository's
// with its value ("version: '[x'" left a flow sequence open in the CLI's
// file). With it, the line copied is always this one.
const versionHead = "x-branchbox:\n  version: branchbox\n"

// allowedService is service s as the facade writes it: only the fields of the
// Compose allow-list (devcontainer's serviceKeys), the signed image, no
// build, pull_policy never, no bind mount, each network entry's aliases
// only. A field not copied here is not started, whatever the repository
// wrote (privileged, cap_add, devices, pid, network_mode, ports,
// security_opt, use_api_socket, ...).
func allowedService(name string, s types.ServiceConfig, image string) types.ServiceConfig {
	out := types.ServiceConfig{Name: name, Profiles: s.Profiles, Restart: s.Restart}
	out.Image, out.PullPolicy = image, types.PullPolicyNever
	out.Command, out.Entrypoint, out.Environment = s.Command, s.Entrypoint, s.Environment
	out.WorkingDir, out.User, out.Labels = s.WorkingDir, s.User, s.Labels
	out.DependsOn, out.HealthCheck, out.Init = s.DependsOn, s.HealthCheck, s.Init
	out.Tty, out.StdinOpen = s.Tty, s.StdinOpen
	out.Hostname, out.DomainName, out.Expose, out.ExtraHosts = s.Hostname, s.DomainName, s.Expose, s.ExtraHosts
	out.StopSignal, out.StopGracePeriod = s.StopSignal, s.StopGracePeriod
	out.ReadOnly, out.CapDrop = s.ReadOnly, s.CapDrop
	// Only service:<a runnable service of the project> (devcontainer's
	// allow-list); the final inspection holds it to that container.
	out.NetworkMode = s.NetworkMode
	out.PidsLimit, out.MemLimit, out.CPUS, out.ShmSize = s.PidsLimit, s.MemLimit, s.CPUS, s.ShmSize
	out.Tmpfs = s.Tmpfs
	for _, v := range s.Volumes {
		switch v.Type {
		case types.VolumeTypeVolume:
			out.Volumes = append(out.Volumes, types.ServiceVolumeConfig{Type: v.Type, Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly, Volume: v.Volume})
		case types.VolumeTypeTmpfs:
			out.Volumes = append(out.Volumes, types.ServiceVolumeConfig{Type: v.Type, Target: v.Target, ReadOnly: v.ReadOnly, Tmpfs: v.Tmpfs})
		}
	}
	if s.Networks != nil {
		out.Networks = map[string]*types.ServiceNetworkConfig{}
		for n, c := range s.Networks {
			if c == nil {
				out.Networks[n] = nil
			} else {
				out.Networks[n] = &types.ServiceNetworkConfig{Aliases: c.Aliases}
			}
		}
	}
	return out
}

// workspaceKey is the workspace volume's key in the facade's volumes; no
// tool-request key (volumeKey) can equal it.
const workspaceKey = "branchbox-workspace"

// volumeKey is a tool-request volume's key in the facade's volumes.
func volumeKey(leaseID string) string { return "branchbox-spool-" + leaseID }

// leaseMounts are lease l's entries in the primary service: a read-only
// bind per materialization of a shared-directory lease or of a
// tool-endpoint lease no tool-request links (a linked endpoint is never
// mounted), and the tool-request's spool volume.
func leaseMounts(a *branchbox.Assignment, l *branchbox.Lease) []types.ServiceVolumeConfig {
	switch l.Scope {
	case branchbox.ScopeSharedDirectory, branchbox.ScopeToolEndpoint:
		if l.Scope == branchbox.ScopeToolEndpoint && linked(a, l.LeaseID) {
			return nil
		}
		var out []types.ServiceVolumeConfig
		for _, m := range l.Materializations {
			out = append(out, types.ServiceVolumeConfig{
				Type: types.VolumeTypeBind, Source: m.SourcePath, Target: m.TargetPath, ReadOnly: true,
				// A source gone missing fails the start instead of
				// being created as an empty directory.
				Bind: &types.ServiceVolumeBind{CreateHostPath: false},
			})
		}
		return out
	case branchbox.ScopeToolRequest:
		return []types.ServiceVolumeConfig{{Type: types.VolumeTypeVolume, Source: volumeKey(l.LeaseID), Target: l.RequestSpoolTarget}}
	}
	return nil
}

// linked reports whether a tool-request lease links the endpoint lease id.
func linked(a *branchbox.Assignment, id string) bool {
	for _, l := range a.Leases {
		if l.Scope == branchbox.ScopeToolRequest && l.EndpointLeaseID == id {
			return true
		}
	}
	return false
}

// generateConfig is the facade devcontainer.json: the repository's keys
// that configKeys passes, naming only the facade Compose file, with remote
// user UID rewriting off (it would build a "-uid" image).
func generateConfig(c *Config, composePath string) ([]byte, error) {
	out := make(map[string]any, len(c.Raw))
	for k, v := range c.Raw {
		if _, ok := configKeys[k]; ok {
			out[k] = v
		}
	}
	out["dockerComposeFile"] = []string{composePath}
	out["updateRemoteUserUID"] = false
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// No \u003c for '<': the bytes a value had are the bytes written.
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("facade devcontainer.json: %w", err)
	}
	return buf.Bytes(), nil
}

// Write stores the facade durably and owner-only (rundir.WriteFile: temp
// file, fsync, rename, directory fsync; dir created 0700): the Compose
// file first, so a config on disk never names a missing one.
func Write(f *Facade) error {
	if err := rundir.WriteFile(f.Dir, ComposeFile, f.Compose); err != nil {
		return fmt.Errorf("facade: %w", err)
	}
	if err := rundir.WriteFile(f.Dir, ConfigFile, f.Config); err != nil {
		return fmt.Errorf("facade: %w", err)
	}
	return nil
}

// Expected is what the final inspection must find on the primary
// container of a's launch with workspaceFolder ws: exactly the mounts
// Generate gives it (engine.CheckContainer).
func Expected(a *branchbox.Assignment, ws string) engine.Mounts {
	want := engine.Mounts{Volumes: []engine.Volume{{Name: WorkspaceVolume(a.RunID), Target: ws}}}
	for _, l := range a.Leases {
		for _, m := range leaseMounts(a, &l) {
			if m.Type == types.VolumeTypeBind {
				want.Binds = append(want.Binds, engine.Bind{Source: m.Source, Target: m.Target})
			} else {
				want.Volumes = append(want.Volumes, engine.Volume{Name: VolumeName(a.RunID, l.LeaseID), Target: m.Target})
			}
		}
	}
	return want
}
