package local

import (
	"context"
	"errors"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/nspawn"
)

// The pool's spares boot on the cores the boxes use (spares.go). Two
// things come before them (issue 24, Deliver 9):
//
//   - a machine booting itself (the second create of a burst, a restore):
//     the pool starts no spare while one boots, and a spare already
//     booting is stopped (yieldSpare) and booted again after; a box's
//     boot is about 0.7 s of both cores, so sharing them cost it about
//     0.6 s;
//   - a wake: the spare booting is frozen (cgroup.freeze, as a hibernate
//     freezes a box) and the pool starts none until
//     spareQuiet after the last wake (quiet), so the wake's steps after
//     Wake (the identity's exec, the claim env) have the cores: beside a
//     desk spare's boot a wake took 230 ms p99 instead of about 100. A
//     frozen boot keeps its progress. One boot is frozen for at most
//     spareMaxFrozen in all, so wakes coming more often than spareQuiet
//     neither hold it until the boot timeout (which would back its image
//     off for a minute) nor near any unit's start timeout.

// spareQuiet is how long after a wake the pool's spare boot stays frozen
// and no other starts: a wake's own steps after Wake take about 60 ms
// here, 200 on a loaded host.
// A variable: a test on a loaded host lengthens it.
var spareQuiet = time.Second

// spareMaxFrozen bounds how long one spare's boot stays frozen in all.
const spareMaxFrozen = 5 * time.Second

// spareBoot is a spare's boot under way (Supervisor.spareBoot).
type spareBoot struct {
	id     string
	image  string
	cancel context.CancelFunc
	cg     nspawn.Cgroups
	// Under s.mu:
	yielded  bool          // cancelled for a machine booting itself
	frozen   bool          // frozen for a wake
	frozenAt time.Time     // when it was frozen last
	wasted   time.Duration // frozen before that, in all
}

// errSpareYielded is bootSpare's answer when a machine started to boot
// itself before or while the spare booted, or a wake came before it
// began (one that comes while it boots freezes it).
var errSpareYielded = errors.New("a machine is booting itself or waking: the spare's boot waits")

// yielding says whether the pool must not start a spare's boot now: a
// machine is booting itself, or a wake was under spareQuiet ago. The
// caller holds s.mu.
func (s *Supervisor) yielding() bool {
	return s.booting > 0 || time.Now().Before(s.quietUntil)
}

// lacks answers whether the pool holds fewer spares of image than
// Config.Spares, and whether it must yield for now (yielding); the end of
// the boot or of the quiet kicks the pool.
func (s *Supervisor) lacks(image string) (lack, yield bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spares[image]) < s.cfg.Spares, s.yielding()
}

// yieldSpare stops the spare the pool is booting, if any, for a machine
// that starts to boot itself. The caller holds s.mu.
func (s *Supervisor) yieldSpare() {
	if b := s.spareBoot; b != nil {
		b.yielded = true
		b.setFrozen(false) // its teardown finds it as any boot's
		b.cancel()
		s.spareBoot = nil
	}
}

// quiet is called at each wake: the spare booting freezes (unless it was
// frozen spareMaxFrozen already), and neither it nor another spare's boot
// goes on until spareQuiet after the last wake.
func (s *Supervisor) quiet() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Spares <= 0 || s.closed {
		return
	}
	s.quietUntil = time.Now().Add(spareQuiet)
	if b := s.spareBoot; b != nil {
		b.setFrozen(b.frozenFor() < spareMaxFrozen)
	}
	if s.quietEnd == nil {
		s.quietEnd = time.AfterFunc(spareQuiet, s.endQuiet)
	} else {
		s.quietEnd.Reset(spareQuiet)
	}
}

// endQuiet thaws the spare's boot once spareQuiet has passed since the
// last wake, and wakes the pool.
func (s *Supervisor) endQuiet() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if left := time.Until(s.quietUntil); left > 0 {
		s.quietEnd.Reset(left)
		s.mu.Unlock()
		return
	}
	if b := s.spareBoot; b != nil {
		b.setFrozen(false)
	}
	s.mu.Unlock()
	s.kickSpares()
}

// setFrozen freezes or thaws the boot's whole cgroup (SetTreeFrozen). The
// whole, not the payload a hibernate freezes: a wake that comes right
// after a take finds the replacement's nspawn still setting up, with no
// payload yet (a payload-only freeze missed those boots: a wake beside
// one took 160 to 300 ms p99). A failed write leaves the state as it was.
// The caller holds s.mu.
func (b *spareBoot) setFrozen(frozen bool) {
	if b.frozen == frozen || b.cg.SetTreeFrozen(frozen) != nil {
		return
	}
	if frozen {
		b.frozenAt = time.Now()
	} else {
		b.wasted += time.Since(b.frozenAt)
	}
	b.frozen = frozen
}

// frozenFor is how long the boot has been frozen in all. The caller holds
// s.mu.
func (b *spareBoot) frozenFor() time.Duration {
	if b.frozen {
		return b.wasted + time.Since(b.frozenAt)
	}
	return b.wasted
}
