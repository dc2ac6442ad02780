package toolrequest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

const (
	consumer   = 1000
	capability = "endpoint-only-random-value"
)

// testSpool lays out an initialized spool (Init) and its replay
// ledger under fresh directories, for an endpoint at sock.
func testSpool(t testing.TB, sock, policy string) *Spool {
	t.Helper()
	testenv.RequireRoot(t, "request files are the consumer UID's")
	dir := filepath.Join(branchboxtest.Dir0755(t), "volume")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := SpoolBinding{RunID: "run-demo", LeaseID: "delivery_requests", Consumer: "coding-agent", ConsumerUID: consumer}
	if err := Init(dir, b, []byte(capability)); err != nil {
		t.Fatal(err)
	}
	ep, err := endpointAt(sock)
	if err != nil {
		t.Fatal(err)
	}
	return &Spool{Dir: dir, ConsumerUID: consumer, Endpoint: ep, Policy: policy,
		Ledger: filepath.Join(t.TempDir(), "state", "run-demo", "replay", "delivery_requests"), RelayTimeout: 5 * time.Second,
		Binding: Binding{RunID: "run-demo", LeaseID: "delivery_requests", Consumer: "coding-agent", Capability: []byte(capability)}}
}

// request is a valid envelope for id with payload.
func request(id, payload string) []byte {
	return []byte(`{"version":"1","run_id":"run-demo","lease_id":"delivery_requests","consumer":"coding-agent","request_id":"` + id +
		`","capability":"` + capability + `","payload":` + payload + `}`)
}

// write finalizes requests/<id>.json as the consumer does: mode 0600, its
// UID, renamed into place.
func write(t testing.TB, s *Spool, id string, body []byte) string {
	t.Helper()
	tmp := filepath.Join(s.Dir, RequestsDir, "."+id+".tmp")
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, consumer, consumer); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.Dir, RequestsDir, id+".json")
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// responses lists responses/ (what the consumer could take as an answer).
func responses(t *testing.T, s *Spool) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Dir, responsesDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
