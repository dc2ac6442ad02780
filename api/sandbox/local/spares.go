package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/nspawn"
	"github.com/cocoonbox/cocoonbox/internal/steps"
	"golang.org/x/sys/unix"
)

// Spares (issue 24, Deliver 9: a create to running under 1 s). Nearly all
// of a create is the box's own systemd booting, and nothing in that boot
// depends on whose box it is: the claim env, the identity and the hostname
// that follows it reach a running box the same way at a wake. So the
// supervisor keeps Config.Spares machines of each tier's newest image
// booted, owned by no one, under StateDir/spares; a Boot of a machine
// whose disk is fresh (made by Create, never booted) on that image takes
// one over instead of booting: the spare's directory is exchanged with the
// machine's (one rename, so the machine's record is never missing), its
// address is leased to the machine, and the box gets its claim env and its
// first commands as at any boot's start. The pool then boots a
// replacement, one at a time, beside the boxes.
//
// What differs from a box booted for itself, and why it does not matter:
// its journal begins with the spare's boot under the spare's machine name
// (spare-…), before the identity's hostname; its cgroups and network
// links keep the spare's names (cgroup2 cannot rename a populated cgroup);
// its machine id is the one the spare's systemd took, which Boot reports as
// for any boot.

// spare is one booted machine waiting to be taken.
type spare struct {
	m *machine
	r *running
}

// spareIDPrefix starts every spare's machine name; a machine id cannot
// begin with it ("spare-" is refused by newMachine), so a spare's network
// namespace, crash record and readiness socket never meet a box's.
const spareIDPrefix = "spare-"

// takeSpare hands m a booted spare of its image when m's disk is fresh
// (false when it took none and m must boot itself). On a failure after
// the exchange m is left as a failed boot leaves it.
func (s *Supervisor) takeSpare(ctx context.Context, m *machine, first []sandbox.Command) (bool, error) {
	if s.cfg.Spares <= 0 {
		return false, nil
	}
	if _, err := os.Lstat(filepath.Join(m.dir, "upper")); !errors.Is(err, os.ErrNotExist) {
		return false, nil // restored, cloned or booted before: its own disk
	}
	if ctx.Err() != nil {
		return false, nil // the boot that follows answers it; no spare spent
	}
	sp := s.popSpare(m.Image)
	if sp == nil {
		return false, nil
	}
	// The pool is woken by the take, or by the boot that follows a take
	// that fell through (not before it: the pool yields to that boot).
	done := steps.Begin(ctx, "boot.spare")
	r := sp.r
	select {
	case <-r.exited:
		s.teardown(sp.m, r)
		os.RemoveAll(sp.m.dir)
		return false, nil
	default:
	}
	// Before the exchange the spare is whole: it goes back to the pool
	// (a state directory whose machines cannot be exchanged with its
	// spares, another file system say, would otherwise cost a spare's boot
	// at every create).
	giveUp := func(err error) (bool, error) {
		s.cfg.Log.Warn("spares: a spare could not be taken over; the machine boots itself", "machine", m.ID, "spare", sp.m.ID, "err", err)
		os.Remove(filepath.Join(s.runDir, m.ID+".json"))
		os.Remove(filepath.Join(sp.m.dir, "machine.json"))
		s.unpopSpare(sp)
		return false, nil
	}
	// The record first: a crash at any point below leaves a crash record
	// naming each path the root mount can be at, and both are cleared.
	rec := crashRecord{ID: m.ID, NSpawn: r.nspawn.Process.Pid, Root: filepath.Join(m.dir, "root"), Link: r.link, Cgroups: r.cg.Dirs, Unified: r.cg.Unified}
	if err := s.writeCrashRecord(rec); err != nil {
		return giveUp(err)
	}
	if err := (&machine{record: m.record, dir: sp.m.dir}).save(); err != nil {
		return giveUp(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, sp.m.dir, unix.AT_FDCWD, m.dir, unix.RENAME_EXCHANGE); err != nil {
		return giveUp(fmt.Errorf("exchange %s and %s: %w", sp.m.dir, m.dir, err))
	}
	// sp.m.dir holds the machine's directory of before, its record alone.
	os.RemoveAll(sp.m.dir)
	os.Remove(filepath.Join(s.runDir, sp.m.ID+".json"))
	s.mu.Lock()
	s.addrs[r.addrOff] = m.ID
	s.mu.Unlock()
	done()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BootTimeout)
	defer cancel()
	defer s.kickSpares()
	if err := s.early(ctx, m, r, first); err != nil {
		// Ended before the teardown: a next Boot must not mount the disk
		// while the old overlay lives in the dying box's mounts.
		r.stopping = true
		_ = unix.Kill(-r.nspawn.Process.Pid, unix.SIGKILL)
		r.cg.Kill()
		<-r.exited
		s.teardown(m, r)
		return true, fmt.Errorf("machine %s (a spare taken over): %w", m.ID, err)
	}
	s.adopt(m, r)
	return true, nil
}

// popSpare takes a live spare of image out of the pool, or nil.
func (s *Supervisor) popSpare(image string) *spare {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.spares[image]
	if len(list) == 0 {
		return nil
	}
	s.spares[image] = list[1:]
	return list[0]
}

// unpopSpare puts a spare popSpare took, still whole, back in the pool
// (first: it is the oldest), or kills it when the pool is closed or it
// went down meanwhile.
func (s *Supervisor) unpopSpare(sp *spare) {
	s.mu.Lock()
	select {
	case <-sp.r.exited:
	default:
		if !s.closed {
			s.spares[sp.m.Image] = append([]*spare{sp}, s.spares[sp.m.Image]...)
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	s.killSpare(sp)
}

// kickSpares asks the pool to look at what it holds now.
func (s *Supervisor) kickSpares() {
	select {
	case s.spareKick <- struct{}{}:
	default:
	}
}

// keepSpares runs until Close: it boots spares one at a time until each
// tier's newest image has Config.Spares of them, and stops those of any
// other image; it looks at start, when kicked (a spare taken, a box's boot
// ended), and once a minute (a new image built, a back-off over).
func (s *Supervisor) keepSpares() {
	defer close(s.sparesDone)
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		s.fillSpares()
		select {
		case <-s.closing:
			s.dropSpares(func(string) bool { return true })
			return
		case <-s.spareKick:
		case <-tick.C:
		}
	}
}

// fillSpares boots what the pool lacks, one spare at a time.
func (s *Supervisor) fillSpares() {
	images, err := listImages(s.cfg.Images)
	if err != nil {
		s.cfg.Log.Warn("spares: the images cannot be listed", "err", err)
		return
	}
	newest := map[string]string{} // tier → ref; listImages sorts by version
	for _, img := range images {
		newest[img.Tier] = img.Ref
	}
	wanted := map[string]bool{}
	for _, ref := range newest {
		wanted[ref] = true
	}
	s.dropSpares(func(ref string) bool { return !wanted[ref] })
	for _, img := range images {
		if newest[img.Tier] != img.Ref || s.backingOff(img.Ref) {
			continue
		}
		for {
			lack, yield := s.lacks(img.Ref)
			if !lack {
				break
			}
			if yield {
				return
			}
			if err := s.bootSpare(img.Ref); err != nil {
				if errors.Is(err, errSpareYielded) {
					return // the box's boot, or the quiet, kicks the pool at its end
				}
				select {
				case <-s.closing:
					return
				default:
				}
				s.cfg.Log.Warn("spares: a spare did not boot; this image's next try is in a minute", "image", img.Ref, "err", err)
				s.backOff(img.Ref)
				break // the other tiers' spares still boot
			}
		}
	}
}

// spareRetry is how long the pool leaves an image alone after one of its
// spares failed to boot or went down by itself, whatever wakes it: a
// broken image, or an idle spare the OOM killer picks, would otherwise be
// booted again at every create, a boot's CPU each time.
const spareRetry = time.Minute

// backOff leaves image's spares alone for spareRetry.
func (s *Supervisor) backOff(image string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spareRetryAt[image] = time.Now().Add(spareRetry)
}

// backingOff says whether image is left alone for now (backOff).
func (s *Supervisor) backingOff(image string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.spareRetryAt[image])
}

// bootSpare boots one spare of image into the pool and watches it;
// errSpareYielded when a machine boots itself (yieldSpare).
func (s *Supervisor) bootSpare(image string) error {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	id := spareIDPrefix + hex.EncodeToString(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Its disk directory first: a crash from here on leaves it, and the
	// next start clears what its name finds (clearSpareDisks).
	m := &machine{record: record{ID: id, Image: image, Created: time.Now().UTC()}, dir: filepath.Join(s.cfg.StateDir, "spares", id)}
	if err := os.Mkdir(m.dir, 0o700); err != nil {
		return err
	}
	// Its cgroups now (start finds and reuses them), for a wake to freeze
	// its boot by (quiet).
	cg, err := nspawn.MakeCgroups(cgroupName(id))
	if err != nil {
		os.RemoveAll(m.dir)
		return err
	}
	boot := &spareBoot{id: id, image: image, cancel: cancel, cg: cg}
	s.mu.Lock()
	if s.yielding() {
		s.mu.Unlock()
		cg.Remove()
		os.RemoveAll(m.dir)
		return errSpareYielded
	}
	s.spareBoot = boot
	s.mu.Unlock()
	// yielded ends the boot's registration, thawing it should a wake have
	// frozen it (a spare whose READY came just before the freeze), and
	// says whether a machine booting itself stopped it.
	yielded := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.spareBoot == boot {
			s.spareBoot = nil
		}
		boot.setFrozen(false)
		return boot.yielded
	}
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	r, err := s.start(ctx, m, nil)
	if y := yielded(); err != nil {
		os.RemoveAll(m.dir)
		cg.Remove() // start's own undo removed them, unless it failed first
		if y {
			s.cfg.Log.Debug("spares: a spare's boot stopped for a machine booting itself", "spare", id)
			return errSpareYielded
		}
		return err
	}
	sp := &spare{m: m, r: r}
	s.mu.Lock()
	if boot.frozen { // its thaw failed: a take's first commands would hang
		s.mu.Unlock()
		s.killSpare(sp)
		return errors.New("the spare's cgroup could not be thawed")
	}
	if s.closed {
		s.mu.Unlock()
		s.killSpare(sp)
		return errors.New("supervisor closed")
	}
	s.spares[image] = append(s.spares[image], sp)
	s.spareWatch.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.spareWatch.Done()
		s.watchSpare(sp)
	}()
	return nil
}

// watchSpare clears a spare that went down while still in the pool (one
// taken over is its machine's to watch) and asks for a replacement.
func (s *Supervisor) watchSpare(sp *spare) {
	<-sp.r.exited
	s.mu.Lock()
	pooled := false
	list := s.spares[sp.m.Image]
	for i, o := range list {
		if o == sp {
			s.spares[sp.m.Image] = append(list[:i:i], list[i+1:]...)
			pooled = true
			break
		}
	}
	s.mu.Unlock()
	if !pooled {
		return
	}
	s.cfg.Log.Warn("spares: a spare went down by itself; this image's next spare is in a minute", "spare", sp.m.ID, "err", sp.r.exitErr)
	s.teardown(sp.m, sp.r)
	os.RemoveAll(sp.m.dir)
	s.backOff(sp.m.Image)
}

// dropSpares stops the pooled spares whose image drop answers true.
func (s *Supervisor) dropSpares(drop func(ref string) bool) {
	var gone []*spare
	s.mu.Lock()
	for ref, list := range s.spares {
		if drop(ref) {
			gone = append(gone, list...)
			delete(s.spares, ref)
		}
	}
	s.mu.Unlock()
	for _, sp := range gone {
		s.killSpare(sp)
	}
}

// killSpare ends a spare no longer in the pool and removes its disk.
func (s *Supervisor) killSpare(sp *spare) {
	sp.r.stopping = true
	_ = unix.Kill(-sp.r.nspawn.Process.Pid, unix.SIGKILL)
	sp.r.cg.Kill()
	<-sp.r.exited
	s.teardown(sp.m, sp.r)
	os.RemoveAll(sp.m.dir)
}

// clearSpareDisks removes what a crashed supervisor's spares left after
// clearLeftovers: a spare killed while it booted, before its crash record
// was written, left its network namespace, veth and cgroups, which its
// name finds (a box's next boot of the same id clears its own, but a
// spare's name never comes again), and every spare left its disk.
func (s *Supervisor) clearSpareDisks() error {
	dir := filepath.Join(s.cfg.StateDir, "spares")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), spareIDPrefix) {
			ns, veth, _ := linkNames(s.cfg.Network.Bridge, e.Name())
			s.cfg.Network.unplug(boxLink{NetNS: ns, Veth: veth})
			if cg, err := nspawn.MakeCgroups(cgroupName(e.Name())); err == nil {
				clearCgroups(cg)
			}
		}
		_ = unix.Unmount(filepath.Join(dir, e.Name(), "root"), unix.MNT_DETACH)
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("spares: remove a crashed run's %s: %w", e.Name(), err)
		}
	}
	return os.MkdirAll(dir, 0o700)
}

// SparesOf answers how many booted spares of image the pool holds now: 0
// for an image it keeps none of (only each tier's newest is kept).
func (s *Supervisor) SparesOf(image string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spares[image])
}
