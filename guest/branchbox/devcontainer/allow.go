package devcontainer

import (
	"fmt"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// The allow-list of a repository's Compose files (Security contract: the
// generated configuration mounts only manifest-declared pairs, the
// primary container runs under Docker's default seccomp profile; the
// contract promises a container the repository cannot widen). Every key a
// file sets must be listed here, for every service that runs; anything
// else is refused by rule compose-key naming the file, the service and the
// key. A deny-list misses the key nobody thought of (use_api_socket mounts
// the engine's socket; gpus, models and provider reach the host too).
//
// Each entry says why the key cannot reach beyond the container's own
// namespaces. facade.go builds the generated project from these
// fields only.
var serviceKeys = map[string]string{
	"image":             "replaced by the signed service_images reference",
	"build":             "removed: images come from service_images only",
	"pull_policy":       "replaced by never",
	"command":           "the process inside the container",
	"entrypoint":        "the process inside the container",
	"environment":       "the container's own environment, literal (interpolation is refused)",
	"env_file":          "read by BranchBox below the repository (dotenv, literal values only) into environment; the facade hands Compose no env_file",
	"working_dir":       "a directory inside the container",
	"user":              "a user inside the container (the primary's provider user is checked against the kernel)",
	"labels":            "metadata; the engine's, Compose's, BranchBox's and the Dev Containers CLI's prefixes are refused",
	"depends_on":        "start order among the project's own services",
	"healthcheck":       "a command inside the container",
	"init":              "Docker's init as the container's PID 1",
	"tty":               "a terminal inside the container",
	"stdin_open":        "the container's own standard input",
	"hostname":          "the container's own UTS namespace",
	"domainname":        "the container's own UTS namespace",
	"expose":            "metadata: publishes nothing on the guest",
	"extra_hosts":       "lines of the container's own /etc/hosts",
	"stop_signal":       "the signal Compose stops the container with",
	"stop_grace_period": "how long Compose waits for it",
	"restart":           "the engine restarts the same container; teardown removes it",
	"read_only":         "only narrows: a read-only root file system",
	"cap_drop":          "only narrows: capabilities removed",
	"pids_limit":        "only narrows: a cgroup limit",
	"mem_limit":         "only narrows: a cgroup limit",
	"cpus":              "only narrows: a cgroup limit",
	"shm_size":          "the size of the container's own /dev/shm",
	"profiles":          "gates the service off; a gated service never runs",
	"networks":          "the project's own networks (their entries: aliases only; see networkKeys)",
	"network_mode":      "only service:<another runnable service of the project>: that container's network namespace, inside the project (checked at the final inspection as container:<its id>)",
	"volumes":           "named volumes of the project and tmpfs (not on the primary); binds are dropped (only signed pairs are mounted)",
	"tmpfs":             "a memory file system inside the container (not on the primary, which mounts only what is signed)",
}

// topLevelKeys are the top-level keys a Compose file may set: services
// (each held to serviceKeys), the project's own volumes and networks
// (volumeKeys, networkKeys), name and version (ignored: the project is
// named from the signed run) and x-* extensions (dropped, inert).
var topLevelKeys = map[string]bool{"services": true, "volumes": true, "networks": true, "name": true, "version": true}

// volumeKeys and networkKeys are what a top-level volume or network may
// set: the default local driver (bridge for a network) and labels, a
// network also internal (only narrows). name and external (another run's
// spool, any volume or network of the engine), driver_opts (a local
// volume with {type: none, o: bind, device: /} binds the guest's root),
// ipam and other drivers are refused.
var (
	volumeKeys  = map[string]bool{"driver": true, "labels": true}
	networkKeys = map[string]bool{"driver": true, "labels": true, "internal": true}
)

// reservedLabels are label prefixes a repository may not set: Compose's
// and the engine's own, BranchBox's run label (teardown finds a run's
// objects by it) and the Dev Containers CLI's (its devcontainer.metadata
// label carries privileged, capAdd and mounts).
var reservedLabels = []string{"com.docker.", "io.branchbox.", "devcontainer."}

// reservedName begins every key BranchBox writes into the facade's
// project (branchbox-workspace, branchbox-spool-<lease_id>): a
// repository's volume, network or service of such a key would be
// overwritten by, or stand for, BranchBox's own (a repository's database
// service mounting branchbox-workspace mounted the run's workspace and
// spool volumes). Compared without case.
const reservedName = "branchbox-"

// refuseKey is the one refusal of the allow-list.
func refuseKey(where, detail string, args ...any) error {
	return branchbox.Refuse(branchbox.RuleComposeKey, where, detail, args...)
}

// checkAllowedKeys holds one Compose file's model (as written, file rel)
// to the allow-list, for the services that run (runnable) and the primary
// one, in one walk in file order (o): the first offending key is the one
// named.
func checkAllowedKeys(rel string, model map[string]any, runnable map[string]bool, primary string, o order) error {
	for _, kind := range keys(o, model, "") {
		if !topLevelKeys[kind] && !strings.HasPrefix(kind, "x-") {
			return refuseKey(rel+": "+kind, "is not a top-level Compose key a managed launch allows (services, volumes, networks)")
		}
		entries, _ := model[kind].(map[string]any)
		for _, name := range keys(o, entries, kind) {
			where := fmt.Sprintf("%s: %s.%s", rel, kind, name)
			if kind != "services" && kind != "volumes" && kind != "networks" {
				break
			}
			if strings.HasPrefix(strings.ToLower(name), reservedName) {
				return refuseKey(where, "begins %s, which BranchBox's own names in the project do (the facade's workspace and spool volumes)", reservedName)
			}
			e, _ := entries[name].(map[string]any)
			if err := checkEntryKeys(where, kind, name, e, runnable, primary, o); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEntryKeys holds the keys of one service, volume or network entry
// e (kind.name, at where) to the allow-list, in file order.
func checkEntryKeys(where, kind, name string, e map[string]any, runnable map[string]bool, primary string, o order) error {
	allowed := map[string]bool{}
	switch kind {
	case "services":
		if !runnable[name] {
			return nil
		}
		for k := range serviceKeys {
			allowed[k] = true
		}
	case "volumes":
		allowed = volumeKeys
	case "networks":
		allowed = networkKeys
	}
	for _, k := range keys(o, e, kind+"."+name) {
		switch {
		case !allowed[k] && !strings.HasPrefix(k, "x-") && kind == "services":
			return refuseKey(where+"."+k, "is not a key a managed launch allows for service %s", name)
		case !allowed[k] && !strings.HasPrefix(k, "x-"):
			return refuseKey(where+"."+k, "is not a key a managed launch allows for a %s (only %s)", strings.TrimSuffix(kind, "s"), strings.Join(sortedKeys(allowed), ", "))
		case kind == "services" && name == primary && k == "tmpfs":
			return refuseKey(where+"."+k, "the primary service %s mounts only the signed pairs and the workspace volume", name)
		case kind == "services" && k == "network_mode":
			mode, _ := e[k].(string)
			other, ok := strings.CutPrefix(mode, "service:")
			if !ok || other == name || !runnable[other] {
				return refuseKey(where+"."+k, "is %q; a managed launch allows only service:<another runnable service of the project>", mode)
			}
		}
	}
	return nil
}

// checkProject holds the merged project's values to the allow-list where
// a key alone does not say enough: each runnable service's volumes (named
// project volumes or tmpfs; a bind is dropped by the facade; the primary
// gets none of the repository's), networks (the project's own, aliases
// only), labels (no reserved prefix); each volume's and network's driver.
func checkProject(p *types.Project, primary string, o order) error {
	for _, name := range keys(o, p.Services, "services") {
		s := p.Services[name]
		where := "services." + name
		if err := checkLabels(where, s.Labels, o); err != nil {
			return err
		}
		for i, v := range s.Volumes {
			at := fmt.Sprintf("%s.volumes[%d]", where, i)
			switch {
			case v.Type == types.VolumeTypeBind:
				continue // dropped: only signed pairs are mounted
			case name == primary:
				return refuseKey(at, "is a %s mount of the primary service %s, which mounts only the signed pairs and the workspace volume", v.Type, name)
			case v.Type == types.VolumeTypeTmpfs:
			case v.Type == types.VolumeTypeVolume:
				if _, ok := p.Volumes[v.Source]; v.Source != "" && !ok {
					return refuseKey(at, "mounts %q, which is not a volume of the project", v.Source)
				}
			default:
				return refuseKey(at, "is a %s mount; a managed launch allows named project volumes and tmpfs", v.Type)
			}
		}
		for _, net := range keys(o, s.Networks, where+".networks") {
			if _, ok := p.Networks[net]; !ok && net != "default" {
				return refuseKey(where+".networks."+net, "is not a network of the project")
			}
			if n := s.Networks[net]; n != nil && !onlyAliases(*n) {
				return refuseKey(where+".networks."+net, "sets more than aliases (addresses, driver options, interface names are refused)")
			}
		}
	}
	for _, name := range keys(o, p.Volumes, "volumes") {
		v := p.Volumes[name]
		if v.Driver != "" && v.Driver != "local" {
			return refuseKey("volumes."+name+".driver", "is %q; a managed launch allows the local driver only", v.Driver)
		}
		if err := checkLabels("volumes."+name, v.Labels, o); err != nil {
			return err
		}
	}
	for _, name := range keys(o, p.Networks, "networks") {
		n := p.Networks[name]
		if n.Driver != "" && n.Driver != "bridge" {
			return refuseKey("networks."+name+".driver", "is %q; a managed launch allows the bridge driver only", n.Driver)
		}
		if err := checkLabels("networks."+name, n.Labels, o); err != nil {
			return err
		}
	}
	return nil
}

func onlyAliases(n types.ServiceNetworkConfig) bool {
	n.Aliases = nil
	return n.DriverOpts == nil && n.GatewayPriority == 0 && n.InterfaceName == "" && n.Ipv4Address == "" && n.Ipv6Address == "" &&
		n.LinkLocalIPs == nil && n.MacAddress == "" && n.Priority == 0 && n.UseServiceNameAlias == nil
}

func checkLabels(where string, labels types.Labels, o order) error {
	for _, k := range keys(o, labels, where+".labels") {
		for _, r := range reservedLabels {
			if strings.HasPrefix(k, r) {
				return refuseKey(where+".labels."+k, "uses the reserved prefix %s*", r)
			}
		}
	}
	return nil
}

// configKeys are the devcontainer.json keys a managed launch passes to the
// Dev Containers CLI, each with why it is safe; facade.go writes
// the generated configuration from these only. configDropped are removed
// as the contract says (builds and features: images come from
// service_images; mounts: only signed pairs; initializeCommand runs on the
// guest; privileged, securityOpt and capAdd would weaken the container).
// Any other key is refused (rule devcontainer-config): runArgs, appPort,
// workspaceMount, hostRequirements (GPUs) and whatever the CLI learns next.
var configKeys = map[string]string{
	"name":                 "a display name",
	"dockerComposeFile":    "replaced by the facade's Compose file",
	"service":              "the primary service, checked to be runnable",
	"runServices":          "which of the project's services start, checked to be runnable",
	"workspaceFolder":      "where the workspace volume goes, checked",
	"remoteUser":           "the provider user, checked against the kernel",
	"containerUser":        "the provider user, checked against the kernel",
	"containerEnv":         "the container's own environment, literal",
	"remoteEnv":            "the environment of the CLI's processes in the container, literal",
	"overrideCommand":      "whether the CLI keeps the container alive with its own command",
	"shutdownAction":       "what the CLI does when its client leaves",
	"init":                 "Docker's init as PID 1",
	"onCreateCommand":      "runs inside the container",
	"updateContentCommand": "runs inside the container",
	"postCreateCommand":    "runs inside the container",
	"postStartCommand":     "runs inside the container",
	"postAttachCommand":    "runs inside the container",
	"waitFor":              "which lifecycle command the CLI waits for",
	"userEnvProbe":         "how the CLI reads the user's environment in the container",
	"customizations":       "tool settings, read by editors, not by the CLI's up",
	"forwardPorts":         "metadata for a client; up forwards nothing",
	"portsAttributes":      "metadata for a client",
	"otherPortsAttributes": "metadata for a client",
	"updateRemoteUserUID":  "replaced by false (it would build a -uid image)",
	"$schema":              "a schema URL for editors",
}

var configDropped = map[string]bool{"build": true, "dockerFile": true, "image": true, "features": true,
	"overrideFeatureInstallOrder": true, "mounts": true, "initializeCommand": true,
	"privileged": true, "securityOpt": true, "capAdd": true}

// checkConfigKeys refuses a devcontainer.json key that is neither passed
// (configKeys) nor dropped (configDropped).
func checkConfigKeys(place string, raw map[string]any, o order) error {
	for _, k := range keys(o, raw, "") {
		if _, ok := configKeys[k]; !ok && !configDropped[k] {
			return branchbox.Refuse(branchbox.RuleDevcontainer, place+": "+k, "is not a devcontainer.json key a managed launch allows")
		}
	}
	return nil
}
