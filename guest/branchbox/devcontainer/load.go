package devcontainer

import (
	"context"
	"fmt"

	"github.com/compose-spec/compose-go/v2/types"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// Input is what a managed launch reads from the repository: its
// devcontainer.json and the Compose project it names.
type Input struct {
	// Repository is the absolute path the files were read below.
	Repository string
	Config     *Config
	// Project is the merged Compose model, literal: nothing interpolated,
	// included or resolved (values keep Compose's "$$" escapes).
	Project *types.Project
}

// Load reads the Dev Container configuration of the repository at repo
// (an absolute path, opened without following any symlink): the
// devcontainer.json, then each Compose file it names, each refused as the
// contract says (see the package comment). The primary service and every
// runServices entry must be runnable services of the project. Errors are
// *branchbox.RuleError naming the file, or an I/O error opening repo.
func Load(ctx context.Context, repo string) (*Input, error) {
	return LoadFor(ctx, repo, "")
}

// LoadFor is Load for a launch whose facade devcontainer.json is
// configFile: the Dev Containers variables of devcontainer.json that
// BranchBox knows are substituted (${localWorkspaceFolder} is repo,
// ${localWorkspaceFolderBasename} its base name, ${containerWorkspaceFolder}
// the workspaceFolder, ${devcontainerId} the CLI's id of repo and
// configFile, refused when configFile is ""); any other is refused.
func LoadFor(ctx context.Context, repo, configFile string) (*Input, error) {
	dfd, err := rundir.OpenPath(repo, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, branchbox.Refuse(branchbox.RuleDevcontainer, repo, "cannot be opened as a directory without symlinks: %v", err)
	}
	defer unix.Close(dfd)
	c, err := readConfig(dfd, vars{local: repo, configFile: configFile})
	if err != nil {
		return nil, err
	}
	p, err := loadCompose(ctx, dfd, repo, c.ComposeFiles, c.Service)
	if err != nil {
		return nil, err
	}
	for i, s := range append([]string{c.Service}, c.RunServices...) {
		where := c.Path + ": service"
		if i > 0 {
			where = fmt.Sprintf("%s: runServices[%d]", c.Path, i-1)
		}
		if _, ok := p.Services[s]; !ok {
			return nil, branchbox.Refuse(branchbox.RuleDevcontainer, where, "names %q, not a runnable service of the Compose project", s)
		}
	}
	return &Input{Repository: repo, Config: c, Project: p}, nil
}

// CheckServiceImages checks the assignment's service_images against the
// project (Contract: Preloaded service images): it must bind every
// runnable service, name no unknown or disabled one, and bind each to an
// immutable image reference. Errors are *branchbox.RuleError.
func CheckServiceImages(images map[string]string, p *types.Project) error {
	if len(images) == 0 {
		return branchbox.Refuse(branchbox.RuleServiceBinding, "service_images", "is empty; a managed launch binds every runnable service")
	}
	for _, name := range sortedKeys(images) {
		where := "service_images." + name
		_, runnable := p.Services[name]
		_, disabled := p.DisabledServices[name]
		switch {
		case disabled:
			return branchbox.Refuse(branchbox.RuleServiceBinding, where, "binds a disabled service (profiles); only runnable services are bound")
		case !runnable:
			return branchbox.Refuse(branchbox.RuleServiceBinding, where, "binds a service the Compose project does not declare")
		}
		if why := branchbox.CheckImageReference(images[name]); why != "" {
			return branchbox.Refuse(branchbox.RuleServiceImage, where, "%q %s", images[name], why)
		}
	}
	for _, name := range sortedKeys(p.Services) {
		if _, ok := images[name]; !ok {
			return branchbox.Refuse(branchbox.RuleServiceBinding, "service_images", "does not bind the runnable service %q; every runnable service needs an assigned image", name)
		}
	}
	return nil
}

// tunnelConnectorRole is the Compose extension value that marks a service
// as an outer tunnel connector: `x-branchbox-role: outer-tunnel-connector`.
const tunnelConnectorRole = "outer-tunnel-connector"

// disableTunnelConnectors disables every service the repository marks as
// an outer tunnel connector (Contract: Preloaded service images,
// "Services that BranchBox disables as outer tunnel connectors are
// excluded"): a service that carries the repository's own tunnel out (a
// connector of a tunnel vendor, say) is the outer runtime's job in a
// managed launch (the box's loopback port proxy and the outer runtime's
// own tunnel), so it never runs, may not be bound in service_images, and
// other services' depends_on on it is dropped (facade.go). The mark
// is an x- extension, which Compose itself ignores, so BranchBox learns
// no vendor's image names; it is not held to the allow-list, since the
// service never starts.
func disableTunnelConnectors(p *types.Project) {
	for name, s := range p.Services {
		if role, _ := s.Extensions["x-branchbox-role"].(string); role == tunnelConnectorRole {
			if p.DisabledServices == nil {
				p.DisabledServices = types.Services{}
			}
			p.DisabledServices[name] = s
			delete(p.Services, name)
		}
	}
}
