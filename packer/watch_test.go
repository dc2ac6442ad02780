package packer

import (
	"context"
	"errors"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"
)

// hangingBox is a transport whose every command waits as one into a
// frozen box does.
type hangingBox struct{}

func (hangingBox) Command(ctx context.Context, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "sleep", "600")
}

func (hangingBox) Shell() string { return "false" }

// Issue 39, Deliver 5: a verb waiting on a box that left running (here
// its state reads hibernated from the second look on) ends with a
// *BoxStopped naming the box and its state, not after the command's own
// wait. The booted case through the api is api/e2e/offload's
// TestOffloadWhoseBoxHibernatesMidSendSaysSo.
func TestAStepOnABoxThatHibernatesSaysSo(t *testing.T) {
	var looks atomic.Int32
	p := &Packer{Transport: hangingBox{}, Box: BoxInfo{Name: "dev"}, BoxState: func(context.Context) (string, error) {
		if looks.Add(1) == 1 {
			return "running", nil
		}
		return "hibernated", nil
	}}
	done := make(chan error, 1)
	go func() { _, err := p.verb(context.Background(), nil, "send"); done <- err }()
	select {
	case err := <-done:
		var bs *BoxStopped
		if !errors.As(err, &bs) || bs.Box != "dev" || bs.State != "hibernated" {
			t.Fatalf("the step's error: %v, want a *BoxStopped naming dev hibernated", err)
		}
		if looks.Load() < 2 {
			t.Errorf("the step stopped after %d looks at the box's state", looks.Load())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the step still waits on the hibernated box after 2 minutes")
	}
}
