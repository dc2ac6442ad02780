package boxes

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// DoorKeyEntry is the guest claim env entry (in the box's /run/silkd.env,
// root 0600) holding the machine's Connect box door key: a client in the
// box sends it as "Authorization: Bearer <key>" to CONNECT_URL
// (agent.env; Contract: Connect, "Box door ... authenticated by the
// machine's door key"). The contract names no entry; this is ours.
const DoorKeyEntry = "CONNECT_KEY"

// doorKeyPrefix starts every door key: "cbd_", the box id, "_", and 64
// hex digits.
const doorKeyPrefix = "cbd_"

// doorKeyLabel derives a box's door key secret from its identity seed
// (HKDF-SHA256 info; ours: the contract names no derivation).
const doorKeyLabel = "cocoonbox connect door key"

// ErrDoorKey is every refusal of CheckDoorKey: a malformed key, an
// unknown or deleted box, a key of another incarnation, an agent box.
var ErrDoorKey = errors.New("not a current door key")

// doorKey is the door key of incarnation wakeID of the box with id and
// identity seed: HMAC-SHA256 under HKDF-SHA256(seed, doorKeyLabel) of the
// box id and wake id. The seed never leaves the api, and every boot and
// wake has a new random wake id, so the key changes at every incarnation
// and the previous one no longer opens the door; any replica computes it
// again from the box row, so nothing more is stored.
func doorKey(seed []byte, id, wakeID string) string {
	k, err := hkdf.Key(sha256.New, seed, nil, doorKeyLabel, 32)
	if err != nil {
		panic(err) // 32 bytes of SHA-256 are always within HKDF's bound
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(id + "|" + wakeID))
	return doorKeyPrefix + id + "_" + hex.EncodeToString(m.Sum(nil))
}

// doorEntry adds the door key of incarnation wakeID of b to entries,
// unless the door is off, b is an agent box (Contract: OAuth for agents,
// "No owner credentials in agent boxes": no box door key, at
// provisioning, on a wake and in the pushes) or no incarnation is known.
func (s *Service) doorEntry(b *Box, wakeID string, entries []sandbox.ClaimEntry) []sandbox.ClaimEntry {
	if !s.door || b.Agent || wakeID == "" {
		return entries
	}
	return append(entries, sandbox.ClaimEntry{Name: DoorKeyEntry, Value: doorKey(b.seed, b.ID, wakeID), Guest: true})
}

// CheckDoorKey answers the owner and the id of the box whose current
// incarnation key is: the box row's wake id (written when a boot or wake
// completes) must give that key. Every refusal is ErrDoorKey (wrapped,
// saying why; never the key): a key of a previous incarnation, of a
// deleted box, of an agent box, or malformed. A database failure is
// another error.
func (s *Service) CheckDoorKey(ctx context.Context, key string) (owner, box string, err error) {
	rest, ok := strings.CutPrefix(key, doorKeyPrefix)
	id, mac, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || !IsBoxID(id) || len(mac) != 64 {
		return "", "", fmt.Errorf("malformed: %w", ErrDoorKey)
	}
	var (
		seed   []byte
		wakeID string
		agent  bool
	)
	err = s.pool.QueryRow(ctx, "SELECT user_id::text, identity_seed, wake_id, agent FROM boxes WHERE id = $1", id).Scan(&owner, &seed, &wakeID, &agent)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("box %s: no such box: %w", id, ErrDoorKey)
	}
	if err != nil {
		return "", "", fmt.Errorf("door key of box %s: %w", id, err)
	}
	if agent {
		return "", "", fmt.Errorf("box %s is an agent box: %w", id, ErrDoorKey)
	}
	if wakeID == "" || !hmac.Equal([]byte(doorKey(seed, id, wakeID)), []byte(key)) {
		return "", "", fmt.Errorf("box %s: not its current incarnation's key: %w", id, ErrDoorKey)
	}
	return owner, id, nil
}

// incarnations remembers, per box, the wake id of the incarnation this
// api provisions or last provisioned (box id → wake id), so a key push
// during a boot or wake sends that incarnation's door key rather than
// the previous one still in the row.
type incarnations struct{ m sync.Map }

func (i *incarnations) set(box, wakeID string) { i.m.Store(box, wakeID) }

// forget drops a deleted box.
func (i *incarnations) forget(box string) { i.m.Delete(box) }

// of is b's wake id as this api knows it: the one it provisions now, else
// the row's.
func (i *incarnations) of(b *Box) string {
	if w, ok := i.m.Load(b.ID); ok {
		return w.(string)
	}
	return b.WakeID
}
