package boxes

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/guest/vault"
)

// DefaultInterceptFrom is the first image version whose egress proxy
// intercepts TLS for a box (image v23): only its boxes get the key
// vault's entries (Contract: Key vault, Connect's injection).
const DefaultInterceptFrom = 23

// Keys answers a user's vault as claim env: the COCOONBOX_VAULT records
// and the host-only entries (api/vault's Store.Entries).
type Keys func(ctx context.Context, owner string) (records string, host []sandbox.ClaimEntry, err error)

// GWKey answers owner's gw key as a host-only claim env entry (api/usage's
// Service.Entry); its error for a disabled user is usage.ErrDisabled, and
// the box gets no key.
type GWKey func(ctx context.Context, owner string) (sandbox.ClaimEntry, error)

// The retries of a failed push: the first after pushRetryFirst, each next
// one twice as late up to pushRetryMax, at most pushRetries of them. A box
// that is still unreachable gets the whole set at its next wake or boot.
const (
	pushRetryFirst = time.Second
	pushRetryMax   = 30 * time.Second
	pushRetries    = 8
)

// intercepts says whether boxes of image ref get keys.
func (s *Service) intercepts(ref string) bool {
	im, err := sandbox.ParseImageRef(ref)
	return err == nil && im.Version >= s.interceptFrom
}

// ownerLock serializes reading an owner's keys and setting them on a
// machine, so a push and a boot or wake never leave a machine with the
// older set.
func (s *Service) ownerLock(owner string) *sync.Mutex {
	m, _ := s.keyLocks.LoadOrStore(owner, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// claimEntries are the claim env entries an incarnation of b gets
// (Contract: Box API keys): guest/vault's sources, COCOONBOX_VAULT holding
// the user's keys' records, and a host-only entry per key; for an image
// that does not intercept, the sources empty and no host entry (the Keys
// list names such boxes); for an agent box the sources empty and no host
// entry, for good (Contract: OAuth for agents, "No owner credentials in
// agent boxes": no CBV_ entries, no COCOONBOX_VAULT records, at
// provisioning, every wake and every push). The caller holds
// ownerLock(b.UserID). wakeID is the incarnation's, which the door key
// (doorkey.go) is of.
func (s *Service) claimEntries(ctx context.Context, b *Box, wakeID string) ([]sandbox.ClaimEntry, error) {
	entries := make([]sandbox.ClaimEntry, 0, len(vault.Sources))
	for _, src := range vault.Sources {
		entries = append(entries, sandbox.ClaimEntry{Name: string(src), Guest: true})
	}
	entries = s.gwEntry(ctx, b, entries)
	entries = s.doorEntry(b, wakeID, entries)
	if s.keys == nil || !s.intercepts(b.Image) || b.Agent {
		return entries, nil
	}
	records, host, err := s.keys(ctx, b.UserID)
	if err != nil {
		return nil, err
	}
	entries[0].Value = records
	return append(entries, host...), nil
}

// gwEntry adds the owner's gw key to entries: every box of the owner
// gets it, an agent box too (Contract: OAuth for agents, "Its programs
// still reach gw with the owner's gw key"), since the supervisor's gw
// door needs no interception. A gw that does not answer leaves the box
// without a key until the next push, wake or boot, rather than without a
// boot; a disabled user's box gets none.
func (s *Service) gwEntry(ctx context.Context, b *Box, entries []sandbox.ClaimEntry) []sandbox.ClaimEntry {
	if s.gw == nil {
		return entries
	}
	e, err := s.gw(ctx, b.UserID)
	if err != nil {
		s.log.Warn("boxes: the box gets no gw key this time", "box", b.ID, "user", b.UserID, "err", err)
		return entries
	}
	return append(entries, e)
}

// setClaims gives b's machine the owner's current entries, with the door
// key of incarnation wakeID: a boot or wake passes the wake id it is about
// to write (and this api remembers it for the pushes meanwhile), a push
// "" for the incarnation this api knows (incarnations.of).
func (s *Service) setClaims(ctx context.Context, sup sandbox.Supervisor, b *Box, wakeID string) error {
	mu := s.ownerLock(b.UserID)
	mu.Lock()
	defer mu.Unlock()
	if wakeID != "" {
		s.wakes.set(b.ID, wakeID)
	} else {
		wakeID = s.wakes.of(b)
	}
	entries, err := s.claimEntries(ctx, b, wakeID)
	if err != nil {
		return err
	}
	return supervisorError(sup.SetClaimEnv(ctx, b.ID, entries))
}

// PushKeys gives every machine of owner their current keys at once, one
// call per machine in parallel: a running one renders them now, any other
// keeps them for its next wake or boot (which sets them again anyway). A
// machine that is gone is skipped, and so are an agent box and one whose
// image gets no keys when there is no gw key to push; a failed push is retried (pushRetries,
// backing off from pushRetryFirst to pushRetryMax). It returns at once.
func (s *Service) PushKeys(owner string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		bs, err := listBoxes(s.ctx, s.pool, owner)
		if err != nil {
			s.log.Warn("boxes: keys not pushed: the boxes could not be listed; each gets them at its next wake or boot", "user", owner, "err", err)
			return
		}
		for _, b := range bs {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.pushTo(b.ID, owner, 0)
			}()
		}
	}()
}

// pushTo pushes to box id (read again: its image may have changed), and on
// failure schedules attempt+1.
func (s *Service) pushTo(id, owner string, attempt int) {
	b, err := findBox(s.ctx, s.pool, owner, id, false)
	if errors.Is(err, ErrNotFound) || s.ctx.Err() != nil {
		return
	}
	if err == nil && s.gw == nil && (!s.intercepts(b.Image) || b.Agent) {
		return // its set stays empty: nothing to push
	}
	if err == nil {
		var sup sandbox.Supervisor
		if sup, err = s.supervisor(b.Host); err == nil {
			err = s.setClaims(s.ctx, sup, b, "")
		}
	}
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, sandbox.ErrNotFound) || s.ctx.Err() != nil {
		return
	}
	if attempt >= pushRetries {
		s.log.Warn("boxes: keys not pushed; the box gets them at its next wake or boot", "box", id, "attempts", attempt+1, "err", err)
		return
	}
	wait := min(pushRetryFirst<<attempt, pushRetryMax)
	s.log.Warn("boxes: keys not pushed; retrying", "box", id, "attempt", attempt+1, "retry_in", wait, "err", err)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-s.ctx.Done():
		case <-t.C:
			s.pushTo(id, owner, attempt+1)
		}
	}()
}

// WithoutKeys lists owner's own boxes whose image does not intercept:
// they get no keys until upgraded. An agent box, which never gets them,
// is not listed.
func (s *Service) WithoutKeys(ctx context.Context, owner string) ([]*Box, error) {
	bs, err := listBoxes(ctx, s.pool, owner)
	if err != nil {
		return nil, err
	}
	var out []*Box
	for _, b := range bs {
		if !s.intercepts(b.Image) && !b.Agent {
			out = append(out, b)
		}
	}
	return out, nil
}
