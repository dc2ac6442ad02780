package gate

import (
	"context"
	"sync"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// Step is a box supervisor that passes every call to the one it wraps,
// except the calls of the one method armed (Arm), which it holds until
// Release. A kill-at-a-step test arms the call that starts the step,
// waits for the api's call to arrive, and kills the api there: the api
// is in that step however fast or slow the machine is, with no guess of
// how long the step takes.
type Step struct {
	sandbox.Supervisor

	mu      sync.Mutex
	method  string      // the armed method, "" when none
	id      string      // the armed machine, "" for every one
	arrived chan string // each held call's machine id
	open    chan struct{}
	held    int // calls waiting at the gate now
}

// NewStep wraps sup with nothing armed.
func NewStep(sup sandbox.Supervisor) *Step { return &Step{Supervisor: sup} }

// Arm holds every later call of method (a sandbox.Supervisor method's
// name: "Create", "Boot", "Save", "Rebase", "Exec", "Hibernate", "Wake"
// or "Delete") on machine id ("" for every machine; Create's is its
// image) until Release, and answers a channel that gets each held call's
// machine id as it arrives. A held call whose caller goes away (the api
// killed) ends with its context's error, never reaching the wrapped
// supervisor.
func (s *Step) Arm(method, id string) <-chan string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.method, s.id, s.arrived, s.open = method, id, make(chan string, 16), make(chan struct{})
	return s.arrived
}

// Held answers how many calls wait at the gate now: after killing the api
// a test waits for 0 (every held call ended with its caller) before
// Release, so none of them reaches the supervisor late.
func (s *Step) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// Release lets the held calls through and disarms the gate.
func (s *Step) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open != nil {
		close(s.open)
	}
	s.method, s.id, s.open = "", "", nil
}

// hold waits at the gate when method is armed.
func (s *Step) hold(ctx context.Context, method, id string) error {
	s.mu.Lock()
	if s.method != method || (s.id != "" && s.id != id) {
		s.mu.Unlock()
		return nil
	}
	arrived, open := s.arrived, s.open
	s.held++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
	}()
	select {
	case arrived <- id:
	default:
	}
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Create holds when armed, then creates on the wrapped supervisor.
func (s *Step) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Machine, error) {
	if err := s.hold(ctx, "Create", spec.Image); err != nil {
		return sandbox.Machine{}, err
	}
	return s.Supervisor.Create(ctx, spec)
}

// Boot holds when armed, then boots on the wrapped supervisor.
func (s *Step) Boot(ctx context.Context, id string, first ...sandbox.Command) (sandbox.Machine, error) {
	if err := s.hold(ctx, "Boot", id); err != nil {
		return sandbox.Machine{}, err
	}
	return s.Supervisor.Boot(ctx, id, first...)
}

// Save holds when armed, then saves on the wrapped supervisor.
func (s *Step) Save(ctx context.Context, id, saveID string) (sandbox.SaveInfo, error) {
	if err := s.hold(ctx, "Save", id); err != nil {
		return sandbox.SaveInfo{}, err
	}
	return s.Supervisor.Save(ctx, id, saveID)
}

// Rebase holds when armed, then rebases on the wrapped supervisor.
func (s *Step) Rebase(ctx context.Context, id, image string) (sandbox.Machine, error) {
	if err := s.hold(ctx, "Rebase", id); err != nil {
		return sandbox.Machine{}, err
	}
	return s.Supervisor.Rebase(ctx, id, image)
}

// Exec holds when armed, then starts the command on the wrapped supervisor.
func (s *Step) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := s.hold(ctx, "Exec", id); err != nil {
		return nil, err
	}
	return s.Supervisor.Exec(ctx, id, req)
}

// Hibernate holds when armed, then hibernates on the wrapped supervisor.
func (s *Step) Hibernate(ctx context.Context, id string) (sandbox.Machine, error) {
	if err := s.hold(ctx, "Hibernate", id); err != nil {
		return sandbox.Machine{}, err
	}
	return s.Supervisor.Hibernate(ctx, id)
}

// Wake holds when armed, then wakes on the wrapped supervisor.
func (s *Step) Wake(ctx context.Context, id string) (sandbox.Machine, error) {
	if err := s.hold(ctx, "Wake", id); err != nil {
		return sandbox.Machine{}, err
	}
	return s.Supervisor.Wake(ctx, id)
}

// Delete holds when armed, then deletes on the wrapped supervisor.
func (s *Step) Delete(ctx context.Context, id string) error {
	if err := s.hold(ctx, "Delete", id); err != nil {
		return err
	}
	return s.Supervisor.Delete(ctx, id)
}
