package vault

import (
	"context"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// EntryName is the host-only claim env entry of key id (Contract: Key
// vault): CBV_ and the id, whose placeholder ends cbv_<id>.
func EntryName(id string) string { return "CBV_" + id }

// Entries are owner's keys as a box's claim env (Contract: Key vault, Box
// API keys): records, the value of the guest entry COCOONBOX_VAULT (one
// NAME=placeholder;host,host;how per key, separated by spaces), and one
// host-only entry (Guest false) CBV_<id> per key with the value as sent,
// its hosts and its how. An error (a value that does not unseal) gives
// nothing: a box gets the whole set or none.
func (s *Store) Entries(ctx context.Context, owner string) (records string, host []sandbox.ClaimEntry, err error) {
	keys, err := s.Unseal(ctx, owner)
	if err != nil {
		return "", nil, err
	}
	recs := make([]string, 0, len(keys))
	for _, k := range keys {
		recs = append(recs, Record(k.Name, k.Placeholder, k.Hosts, k.How))
		host = append(host, sandbox.ClaimEntry{Name: EntryName(k.ID), Value: k.Value.Reveal(), Hosts: k.Hosts, How: k.How})
	}
	return strings.Join(recs, " "), host, nil
}
