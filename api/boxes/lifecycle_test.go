//go:build booted

package boxes

import (
	"context"
	"crypto/ed25519"
	"strings"
	"sync"
	"testing"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/guest/identity"
)

// Must show: create → running with the identity the api wrote (its box id,
// the box's own ed25519 key and key_id, its name), the hostname from the
// name, the journal under the machine-id; two boxes of two users at once.
func TestCreateRunsWithTheIdentityTheHostnameAndTheJournal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.user("alice", 1, 1), e.user("bob", 1, 1)
	var wg sync.WaitGroup
	got := map[string]*Box{}
	var mu sync.Mutex
	for user, name := range map[string]string{alice: "alices-box", bob: "bobs-box"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := e.create(user, name)
			mu.Lock()
			got[user] = b
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for user, b := range got {
		if b.State != Running || b.Incarnation != 1 || b.UserID != user {
			t.Fatalf("box %+v: want running, incarnation 1, of %s", b, user)
		}
		hasItsIdentity(t, b)
	}
	// Each user sees only their own box.
	for user, b := range got {
		list, err := e.s.List(context.Background(), user)
		if err != nil || len(list) != 1 || list[0].ID != b.ID {
			t.Fatalf("list of %s: %v %v", user, list, err)
		}
	}
	// The events of a create, in order: the operation creating then done,
	// the states starting then running.
	events, cancel := watchAll(t, e, alice, got[alice].ID)
	defer cancel()
	var seen []string
	var seqs []uint64
	for ev := range events {
		seqs = append(seqs, ev.Seq)
		switch x := ev.Event.(type) {
		case *controlv1.BoxEvent_State:
			seen = append(seen, "state "+x.State.String())
		case *controlv1.BoxEvent_Operation:
			seen = append(seen, "op "+x.Operation.Phase.String())
		}
		if len(seen) == 4 {
			break
		}
	}
	want := "op PHASE_CREATING,state BOX_STATE_STARTING,state BOX_STATE_RUNNING,op PHASE_DONE"
	if strings.Join(seen, ",") != want {
		t.Fatalf("events %v, want %s", seen, want)
	}
	// A client that reconnects with the last seq it saw gets what came
	// after it, nothing before.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	again, err := e.s.Watch(ctx, alice, "", seqs[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range seqs[2:] {
		if ev := <-again; ev.Seq != want || ev.BoxId != got[alice].ID {
			t.Fatalf("after the cursor %d: event %d of %s, want %d of %s", seqs[1], ev.Seq, ev.BoxId, want, got[alice].ID)
		}
	}
}

// watchAll watches a box's events from the start.
func watchAll(t *testing.T, e *env, user, boxID string) (<-chan *controlv1.BoxEvent, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.s.Watch(ctx, user, boxID, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ch, cancel
}

// hasItsIdentity checks a running box against the api's record: the
// identity the api wrote (its box id, its own ed25519 key and key_id, its
// name and wake id), the hostname from its name, the claim env, and the
// journal under the machine id the api recorded.
func hasItsIdentity(t *testing.T, b *Box) {
	t.Helper()
	rec, err := identity.Parse([]byte(sh(t, b.ID, "cat "+identity.Path)))
	if err != nil {
		t.Fatalf("%s: the identity in the box: %v", b.Name, err)
	}
	pub := ed25519.NewKeyFromSeed(b.seed).Public().(ed25519.PublicKey)
	if rec.BoxID != b.ID || rec.Name != b.Name || rec.WakeID != b.WakeID || rec.KeyID != identity.KeyID(pub) ||
		rec.PublicKey != identity.EncodePublicKey(pub) {
		t.Fatalf("%s: the identity in the box is %+v; the api's box is %s %s wake %s", b.Name, rec, b.ID, b.Name, b.WakeID)
	}
	hostname(t, b.ID, b.Name)
	// The claim env entries (guest/vault's sources) are in /run/silkd.env.
	if env := sh(t, b.ID, "cat /run/silkd.env"); !strings.Contains(env, "COCOONBOX_VAULT=") || !strings.Contains(env, "COCOONBOX_CONNECT=") {
		t.Fatalf("%s: /run/silkd.env holds %q", b.Name, env)
	}
	if mid := strings.TrimSpace(sh(t, b.ID, "cat /etc/machine-id")); mid != b.MachineID {
		t.Fatalf("%s: /etc/machine-id %q, the api recorded %q", b.Name, mid, b.MachineID)
	}
	sh(t, b.ID, "systemd-cat -t boxes-test echo under-the-machine-id; journalctl --flush")
	out := sh(t, b.ID, "ls /var/log/journal/"+b.MachineID+" && journalctl -t boxes-test _MACHINE_ID="+b.MachineID+" -o cat")
	if !strings.Contains(out, "under-the-machine-id") {
		t.Fatalf("%s: the journal under /var/log/journal/%s: %s", b.Name, b.MachineID, out)
	}
}
