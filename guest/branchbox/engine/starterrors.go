package engine

import (
	"context"
	"strings"

	"github.com/moby/moby/client"
)

// StartErrors are the engine's own start errors (State.Error) of the
// containers of Compose project project, one "container NAME: error"
// each: what `docker compose up` printed when a container failed to
// start, which the Dev Containers CLI does not pass on. A list or
// inspect failure gives what was read so far.
func StartErrors(ctx context.Context, c *client.Client, project string) []string {
	cs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", composeProject+"="+project)})
	if err != nil {
		return nil
	}
	var out []string
	for _, item := range cs.Items {
		res, err := c.ContainerInspect(ctx, item.ID, client.ContainerInspectOptions{})
		if err != nil || res.Container.State == nil || res.Container.State.Error == "" {
			continue
		}
		out = append(out, "container "+strings.TrimPrefix(res.Container.Name, "/")+": "+res.Container.State.Error)
	}
	return out
}
