package gate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// saver is a supervisor whose Save and Delete answer at once.
type saver struct {
	sandbox.Supervisor
	saved chan string
}

func (f saver) Save(_ context.Context, id, _ string) (sandbox.SaveInfo, error) {
	f.saved <- id
	return sandbox.SaveInfo{ID: "save-" + id}, nil
}

func (f saver) Delete(context.Context, string) error { return nil }

func TestStepHoldsTheArmedCallUntilReleaseAndPassesTheOthers(t *testing.T) {
	sup := saver{saved: make(chan string, 1)}
	s := NewStep(sup)
	arrived := s.Arm("Save", "m1")
	if _, err := s.Save(context.Background(), "m2", ""); err != nil {
		t.Fatalf("Save of another machine, not armed: %v", err)
	}
	<-sup.saved
	if err := s.Delete(context.Background(), "m1"); err != nil {
		t.Fatalf("Delete, not armed: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Save(context.Background(), "m1", "")
		done <- err
	}()
	select {
	case id := <-arrived:
		if id != "m1" {
			t.Errorf("the held call's machine is %q, want m1", id)
		}
	case <-time.After(time.Minute):
		t.Fatal("the armed Save never arrived at the gate")
	}
	select {
	case err := <-done:
		t.Fatalf("Save passed the armed gate before Release (%v)", err)
	default:
	}
	if n := s.Held(); n != 1 {
		t.Errorf("Held() = %d with one Save at the gate", n)
	}
	s.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Save after Release: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Save still held a minute after Release")
	}
}

func TestStepEndsAHeldCallWhoseCallerWentAway(t *testing.T) {
	sup := saver{saved: make(chan string, 1)}
	s := NewStep(sup)
	arrived := s.Arm("Save", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Save(ctx, "m1", "")
		done <- err
	}()
	<-arrived
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a held Save whose caller went away answered %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a held Save whose caller went away was still held a minute later")
	}
	select {
	case id := <-sup.saved:
		t.Errorf("the Save of %s reached the supervisor after its caller went away", id)
	default:
	}
}
