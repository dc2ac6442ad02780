package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// Password sign-in hashed without bound: thirty wrong sign-ins at once
// took the api to ~2 GB (argon2id, 64 MiB each). Now at most
// users.MaxHashing hash at once: a hundred wrong sign-ins at once (the
// sign-in limits raised past them) are each 401 or 429 with Retry-After,
// and the api's peak RSS grows by less than two hashes' memory per core
// and 64 MiB more (the GC's slack; a hundred hashes would be 6.4 GB).
func TestAHundredWrongSignInsAtOnceKeepTheAPIsMemoryBounded(t *testing.T) {
	e := newEnvWith(t, "console:\n  sign_in: {per_user: 1000, per_address: 1000}\n")
	hashKiB := int64(users.DefaultKDF.MemoryKiB)
	bound := 2*hashKiB*int64(users.MaxHashing) + 64<<10
	before := memoryKiB(t, e.api.PID(), "VmHWM")
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int]int{}
	for range 100 {
		wg.Go(func() {
			b, _ := json.Marshal(map[string]string{"user": "alice", "password": "wrong horse battery"})
			resp, err := http.Post(e.api.URL+"/cb/api/session", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
			mu.Lock()
			seen[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	after := memoryKiB(t, e.api.PID(), "VmHWM")
	t.Logf("answers %v; api peak RSS %d KiB before, %d KiB after (bound: +%d KiB, %d hashes at once)", seen, before, after, bound, users.MaxHashing)
	for status := range seen {
		if status != http.StatusUnauthorized && status != http.StatusTooManyRequests {
			t.Errorf("a wrong sign-in answered %d", status)
		}
	}
	if seen[http.StatusUnauthorized] == 0 {
		t.Error("no sign-in was checked at all")
	}
	if after-before > bound {
		t.Fatalf("the api's peak RSS grew from %d to %d KiB; bound +%d KiB", before, after, bound)
	}
}
