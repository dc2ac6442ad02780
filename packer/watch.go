package packer

import (
	"context"
	"fmt"
	"time"
)

// BoxStopped is a step cut short because its box left running under it
// (hibernating, hibernated, failed): the step's command was waiting on a
// frozen box and would have waited silently (issue 39, Deliver 5).
type BoxStopped struct {
	// Box is the box's name; State its state as BoxState read it.
	Box, State string
}

func (e *BoxStopped) Error() string {
	return fmt.Sprintf("box %s is %s, so this step could not finish: wake it with cocoonbox box ensure %s, then run the command again", e.Box, e.State, e.Box)
}

// watchEvery is how often a step that talks to the box reads its state.
const watchEvery = 2 * time.Second

// watchBox watches the box while a step talks to it: the context it
// returns is cancelled (the step's commands killed) once p.BoxState reads
// a state other than running, and stop ends the watch and returns a
// *BoxStopped when the watch cut the step short. Without BoxState there is
// no watch. A state that cannot be read is no reason to stop.
func (p *Packer) watchBox(ctx context.Context) (context.Context, func() error) {
	if p.BoxState == nil {
		return ctx, func() error { return nil }
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var stopped error
	go func() {
		defer close(done)
		tick := time.NewTicker(watchEvery)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			if st, err := p.BoxState(wctx); err == nil && st != "running" {
				stopped = &BoxStopped{Box: p.Box.Name, State: st}
				cancel()
				return
			}
		}
	}()
	return wctx, func() error { cancel(); <-done; return stopped }
}
