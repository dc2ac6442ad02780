package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// eventJSON is one JSON line of a mutating command with --json: the call's
// answer first (no seq), then each event of the box from the operation's
// first on, the operation's own and the box's state changes, until the
// operation's done or failed, last.
type eventJSON struct {
	Seq         uint64     `json:"seq,omitempty"`
	BoxID       string     `json:"box_id"`
	Name        string     `json:"name,omitempty"`
	At          *time.Time `json:"at,omitempty"`
	State       string     `json:"state,omitempty"`
	OperationID string     `json:"operation_id,omitempty"`
	Kind        string     `json:"kind,omitempty"`
	Phase       string     `json:"phase,omitempty"`
	Error       string     `json:"error,omitempty"`
	TotalBytes  int64      `json:"total_bytes,omitempty"`
}

func operationJSON(op *controlv1.Operation) eventJSON {
	return eventJSON{BoxID: op.BoxId, OperationID: op.OperationId, Kind: op.Kind,
		Phase: phaseName(op.Phase), Error: op.Error, TotalBytes: op.TotalBytes}
}

// progress shows an operation as it goes: JSON lines, or on a terminal one
// line rewritten in place (redrawn every 250 ms for the time taken), or
// else a line per phase and state.
type progress struct {
	w         io.Writer
	json, tty bool
	box       *controlv1.Box
	start     time.Time

	mu        sync.Mutex
	lastPhase string // the phase before done or failed, for the error
	phase     string
	state     string
	note      string
	begun     bool // an event of the operation came: state changes are its
	over      bool // the outcome is printed: no more redraws
	stop      chan struct{}
	done      sync.WaitGroup
}

// progressTo is where a mutating command's progress goes: with --json its
// lines are the command's answer, on stdout; else it is progress, said on
// stderr (stdout stays for answers) and drawn in place only when stderr is
// a terminal (issue 45, Deliver 3).
func progressTo(stdout, stderr io.Writer, asJSON bool) (w io.Writer, tty bool) {
	if asJSON {
		return stdout, false
	}
	return stderr, isTerminal(stderr)
}

func newProgress(w io.Writer, asJSON, tty bool, box *controlv1.Box) *progress {
	p := &progress{w: w, json: asJSON, tty: tty && !asJSON, box: box, start: time.Now(),
		state: stateName(box.State), stop: make(chan struct{})}
	if p.tty {
		p.done.Add(1)
		go p.tick()
	}
	return p
}

func (p *progress) tick() {
	defer p.done.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.draw()
			p.mu.Unlock()
		}
	}
}

// draw rewrites the terminal's line; p.mu held.
func (p *progress) draw() {
	if p.over {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K%s: %s, state %s, %.1f s%s", p.label(), p.phase, p.state, time.Since(p.start).Seconds(), p.note)
}

func (p *progress) label() string {
	return fmt.Sprintf("box %s (%s)", p.box.Name, p.box.BoxId)
}

// operation shows one state of the operation; ev is nil for the call's
// own answer.
func (p *progress) operation(ev *controlv1.BoxEvent, op *controlv1.Operation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	phase := phaseName(op.Phase)
	if !ended(op) {
		p.lastPhase = phase
	}
	if ev != nil {
		p.begun = true
	}
	changed := phase != p.phase
	p.phase, p.note = phase, ""
	switch {
	case p.json:
		line := operationJSON(op)
		if ev == nil {
			line.Name, line.State = p.box.Name, p.state
		} else {
			line.Seq, line.At = ev.Seq, at(ev)
		}
		p.jsonLine(line)
	case p.tty:
		p.draw()
	case changed:
		fmt.Fprintf(p.w, "%s: %s %s (%s)\n", p.label(), op.Kind, phase, op.OperationId)
	}
	if ended(op) && !p.json {
		p.endLine(op)
	}
}

// endLine closes the display with the outcome; p.mu held.
func (p *progress) endLine(op *controlv1.Operation) {
	if p.tty {
		fmt.Fprintln(p.w)
	}
	p.over = true
	took := time.Since(p.start).Seconds()
	if op.Phase == controlv1.Phase_PHASE_DONE {
		extra := ""
		if op.TotalBytes > 0 {
			extra = fmt.Sprintf(", %d bytes saved", op.TotalBytes)
		}
		fmt.Fprintf(p.w, "%s: %s done in %.1f s, state %s%s\n", p.label(), op.Kind, took, p.state, extra)
		return
	}
	fmt.Fprintf(p.w, "%s: %s failed in phase %s after %.1f s: %s\n", p.label(), op.Kind, p.lastPhase, took, op.Error)
}

// stateChange shows a state change of the box once the operation has begun
// (earlier ones, replayed from the log, are history).
func (p *progress) stateChange(ev *controlv1.BoxEvent) {
	s, ok := ev.Event.(*controlv1.BoxEvent_State)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.begun {
		return
	}
	p.state = stateName(s.State)
	switch {
	case p.json:
		p.jsonLine(eventJSON{Seq: ev.Seq, BoxID: ev.BoxId, At: at(ev), State: p.state})
	case p.tty:
		p.draw()
	default:
		fmt.Fprintf(p.w, "%s: state %s\n", p.label(), p.state)
	}
}

// reconnecting says the event stream dropped and is opened again after
// seq: on the terminal's line, else on stderr (stdout keeps its shape).
func (p *progress) reconnecting(seq uint64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	why := "it ended"
	if err != nil {
		why = err.Error()
	}
	if p.tty {
		p.note = fmt.Sprintf(" (event stream dropped: resuming after seq %d)", seq)
		p.draw()
		return
	}
	fmt.Fprintf(os.Stderr, "cocoonbox: %s: event stream dropped (%s): resuming after seq %d\n", p.label(), why, seq)
}

// nothingToDo is Ensure's answer without an operation: running already.
func (p *progress) nothingToDo() {
	p.finish()
	if p.json {
		p.jsonLine(eventJSON{BoxID: p.box.BoxId, Name: p.box.Name, State: p.state})
		return
	}
	fmt.Fprintf(p.w, "%s is %s already: nothing to do.\n", p.label(), p.state)
}

// finish stops the terminal's redraws.
func (p *progress) finish() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.done.Wait()
}

// jsonLine prints one compact JSON line; p.mu held.
func (p *progress) jsonLine(v eventJSON) {
	data, _ := json.Marshal(v) // plain strings and numbers: cannot fail
	fmt.Fprintf(p.w, "%s\n", data)
}

func at(ev *controlv1.BoxEvent) *time.Time {
	if ev.At == nil {
		return nil
	}
	t := ev.At.AsTime()
	return &t
}
