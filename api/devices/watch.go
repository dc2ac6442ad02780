package devices

import "sync"

// hub tells the WatchDevices streams of a user that the user's devices
// changed. Changes made here reach it directly; those made on another api
// reach it through Store.Changed, called by the api's cocoonbox_users listener.
type hub struct {
	mu      sync.Mutex
	watches map[string]map[chan struct{}]struct{}
}

// watch registers a channel that gets a signal (coalesced) on each change
// of userID's devices; stop unregisters it.
func (h *hub) watch(userID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.watches == nil {
		h.watches = map[string]map[chan struct{}]struct{}{}
	}
	if h.watches[userID] == nil {
		h.watches[userID] = map[chan struct{}]struct{}{}
	}
	h.watches[userID][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.watches[userID], ch)
		if len(h.watches[userID]) == 0 {
			delete(h.watches, userID)
		}
		h.mu.Unlock()
	}
}

func (h *hub) changed(userID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.watches[userID] {
		select {
		case ch <- struct{}{}:
		default: // a signal is pending already
		}
	}
}
