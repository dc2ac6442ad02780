package egress

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
)

// HostAddrs is the set of every address on every interface of the
// network namespace it was made in (the host's, for the supervisor),
// read at start and again at each netlink address change, so a box
// cannot reach a service of the host's bound to 0.0.0.0 through the
// host's public address, nor one added later.
type HostAddrs struct {
	set  atomic.Pointer[map[netip.Addr]struct{}]
	log  *slog.Logger
	done chan struct{}
	wg   sync.WaitGroup
}

// WatchHostAddrs reads the addresses and follows their changes until
// Close. It fails when netlink cannot be read: a proxy that cannot know
// the host's addresses does not start.
func WatchHostAddrs(log *slog.Logger) (*HostAddrs, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &HostAddrs{log: log, done: make(chan struct{})}
	// Subscribe before the first list, so no change falls between them.
	updates, err := h.subscribe()
	if err != nil {
		return nil, err
	}
	if err := h.reload(); err != nil {
		close(h.done)
		return nil, err
	}
	h.wg.Add(1)
	go h.follow(updates)
	return h, nil
}

// Has says whether addr is one of the host's (an IPv4-mapped address as
// its IPv4 address; the zone of a link-local one does not count).
func (h *HostAddrs) Has(addr netip.Addr) bool {
	_, ok := (*h.set.Load())[addr.Unmap().WithZone("")]
	return ok
}

// Close stops following changes.
func (h *HostAddrs) Close() {
	select {
	case <-h.done:
	default:
		close(h.done)
	}
	h.wg.Wait()
}

func (h *HostAddrs) subscribe() (chan netlink.AddrUpdate, error) {
	ch := make(chan netlink.AddrUpdate, 64)
	err := netlink.AddrSubscribeWithOptions(ch, h.done, netlink.AddrSubscribeOptions{
		ErrorCallback: func(err error) {
			select {
			case <-h.done: // Close closed the socket under the read
			default:
				h.log.Warn("egress: netlink address updates", "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("egress: follow the host's addresses (netlink): %w", err)
	}
	return ch, nil
}

// reload reads the list again; a dump that a change interrupted
// (netlink.ErrDumpInterrupted: the list may miss an address) is read again.
func (h *HostAddrs) reload() error {
	var list []netlink.Addr
	var err error
	for try := 0; try < 5; try++ {
		if list, err = netlink.AddrList(nil, netlink.FAMILY_ALL); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("egress: list the host's addresses (netlink): %w", err)
	}
	set := make(map[netip.Addr]struct{}, len(list))
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			set[ip.Unmap()] = struct{}{}
		}
	}
	h.set.Store(&set)
	return nil
}

// follow reads the whole list again at each change (an update says one
// address, but a lost one, when the socket's buffer overflowed, would
// leave the set wrong for good), and subscribes again when the
// subscription ends (netlink closes its channel on an error).
func (h *HostAddrs) follow(updates chan netlink.AddrUpdate) {
	defer h.wg.Done()
	for {
		select {
		case <-h.done:
			return
		case _, ok := <-updates:
			for !ok {
				select {
				case <-h.done:
					return
				case <-time.After(time.Second):
				}
				var err error
				if updates, err = h.subscribe(); err != nil {
					h.log.Warn("egress: the host's addresses are not followed; retrying", "err", err)
				}
				ok = err == nil
			}
		}
		// Coalesce a burst (an interface coming up adds several).
		for drained := false; !drained; {
			select {
			case _, ok := <-updates:
				drained = !ok
			default:
				drained = true
			}
		}
		if err := h.reload(); err != nil {
			h.log.Warn("egress: the host's addresses", "err", err)
		}
	}
}
