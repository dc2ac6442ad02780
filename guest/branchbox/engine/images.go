// Package engine is BranchBox's side of the Docker engine of a managed
// launch, through the Engine API's Go client (github.com/moby/moby/client,
// API version negotiated: Debian 12's docker.io speaks 1.41), never by
// parsing CLI output.
package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// Connect returns a client of the local engine (DOCKER_HOST or the default
// socket); this client negotiates the API version down to the engine's by
// default.
func Connect() (*client.Client, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker engine client: %w", err)
	}
	return c, nil
}

// CheckLocalImages inspects each image, locally, before anything starts
// (Contract: Preloaded service images, "verifies every assigned reference
// with a local Docker image inspection before running the Dev Containers
// CLI"): images maps where (e.g. "service_images.app", "port_proxy_image")
// to an immutable reference branchbox.CheckImageReference accepts. The
// engine must hold exactly that image: a local content digest is its Id; a
// registry reference is among its RepoDigests. Nothing is pulled. A
// missing or different image is a *branchbox.RuleError (rule
// local-image-inspect); an engine failure is an error wrapping the
// client's.
func CheckLocalImages(ctx context.Context, c *client.Client, images map[string]string) error {
	wheres := make([]string, 0, len(images))
	for w := range images {
		wheres = append(wheres, w)
	}
	sort.Strings(wheres)
	for _, where := range wheres {
		ref := images[where]
		if why := branchbox.CheckImageReference(ref); why != "" {
			return branchbox.Refuse(branchbox.RuleServiceImage, where, "%q %s", ref, why)
		}
		res, err := c.ImageInspect(ctx, ref)
		if errdefs.IsNotFound(err) {
			return branchbox.Refuse(branchbox.RuleLocalImage, where, "%q is not in the local engine; preloaded images are never built or pulled", ref)
		}
		if err != nil {
			return fmt.Errorf("%s: inspecting %q: %w", where, ref, err)
		}
		if !holds(res.ID, res.RepoDigests, ref) {
			return branchbox.Refuse(branchbox.RuleLocalImage, where, "%q resolves to the local image %s, which is not that exact reference", ref, res.ID)
		}
	}
	return nil
}

// holds reports whether the inspected image (its Id and RepoDigests) is
// exactly ref: the engine resolves a short Id prefix or a name too, so
// the answer is checked, not trusted.
func holds(id string, repoDigests []string, ref string) bool {
	if id == ref {
		return true
	}
	parsed, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return false
	}
	canonical, ok := parsed.(reference.Canonical)
	if !ok {
		return false
	}
	// RepoDigests carry name@digest, without the tag.
	want, err := reference.WithDigest(reference.TrimNamed(canonical), canonical.Digest())
	if err != nil {
		return false
	}
	return slices.Contains(repoDigests, reference.FamiliarString(want)) || slices.Contains(repoDigests, want.String())
}
