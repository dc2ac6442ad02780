// A launch (prepare.go, up.go, cli.go, clear.go, record.go) runs a managed Dev Containers launch (Contract: BranchBox
// managed runtime manifest, "Preloaded service images"). Prepare is the
// part before anything starts.

package feature

import (
	"context"
	"path/filepath"

	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/devcontainer"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
)

// Prepare checks everything a managed launch of assignment a needs before
// the Dev Containers CLI may run, then writes the facade into dir
// (absolute, BranchBox's own), in this order, each step failing closed:
// branchbox.ManagedLaunchError; devcontainer.Load of the repository at
// repo (the run's checked-out workspace); devcontainer.CheckServiceImages;
// engine.CheckLocalImages of every assigned image and the port proxy
// image; devcontainer.Generate and devcontainer.Write. Nothing is written unless every
// check passed, so a missing image fails the assignment with no file for
// the CLI to read. It returns the input read and the facade written.
// Errors are *branchbox.RuleError, or I/O and engine errors.
func Prepare(ctx context.Context, c *client.Client, a *branchbox.Assignment, repo, dir string) (*devcontainer.Input, *devcontainer.Facade, error) {
	if err := branchbox.ManagedLaunchError(a); err != nil {
		return nil, nil, err
	}
	in, err := devcontainer.LoadFor(ctx, repo, filepath.Join(dir, devcontainer.ConfigFile))
	if err != nil {
		return nil, nil, err
	}
	if err := devcontainer.CheckServiceImages(a.ServiceImages, in.Project); err != nil {
		return nil, nil, err
	}
	images := map[string]string{}
	for name, ref := range a.ServiceImages {
		images["service_images."+name] = ref
	}
	if a.PortProxyImage != "" {
		images["port_proxy_image"] = a.PortProxyImage
	}
	if err := engine.CheckLocalImages(ctx, c, images); err != nil {
		return nil, nil, err
	}
	f, err := devcontainer.Generate(a, in, dir)
	if err != nil {
		return nil, nil, err
	}
	if err := devcontainer.Write(f); err != nil {
		return nil, nil, err
	}
	return in, f, nil
}
