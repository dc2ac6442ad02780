package toolrequest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// TestRespondCreatesConsumerReadOnlyOnce: the response is the consumer's,
// 0400, with the exact bytes; the sameResponse bytes again succeed (a re-run), other
// bytes are refused and the first answer stays.
func TestRespondCreatesConsumerReadOnlyOnce(t *testing.T) {
	dir := spoolDir(t)
	if err := os.Mkdir(filepath.Join(dir, responsesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	body := []byte("{\"payload\":\"it's $${x}\\n\"}\n")
	if err := respond(dir, "r1", body, consumer); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, responsesDir, "r1.json")
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != 0o400 || st.Sys().(*syscall.Stat_t).Uid != consumer {
		t.Fatalf("response mode %v uid %d, want 0400 of %d", st.Mode(), st.Sys().(*syscall.Stat_t).Uid, consumer)
	}
	if got, _ := os.ReadFile(p); string(got) != string(body) {
		t.Fatalf("response %q", got)
	}
	if err := respond(dir, "r1", body, consumer); err != nil {
		t.Fatalf("idempotent re-run: %v", err)
	}
	if err := respond(dir, "r1", []byte(`{}`), consumer); branchbox.RuleOf(err) != branchbox.RuleResponseCorrelation {
		t.Fatalf("another response: %v", err)
	}
	if got, _ := os.ReadFile(p); string(got) != string(body) {
		t.Fatalf("the first response was replaced: %q", got)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, responsesDir))
	if len(entries) != 1 {
		t.Fatalf("responses/ holds %d entries, want only the answer (no temp file)", len(entries))
	}
}
