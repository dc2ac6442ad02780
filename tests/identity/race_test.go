//go:build booted

package boxidentity

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// 200 writes in a tight loop end with the hostname of the last one, and a
// reader loop running meanwhile parses every file it reads (never a torn
// one).
func Test200WritesEndWithTheLastHostnameAndNoTornRead(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	const n = 200
	var recs strings.Builder
	for i := 1; i <= n; i++ {
		recs.Write(record(t, boxID(i), fmt.Sprintf("race-%d", i)).Marshal())
	}
	must(t, b.WriteFile("/root/records", []byte(recs.String()), 0o600, "root"))
	mustWrite(t, b, record(t, boxID(0), "race-0")) // the reader has a file from the start
	waitHostname(t, b, "race-0")

	// The reader: `identity show` (Load and Parse) as fast as it can until
	// the writer is done; it counts reads and failures.
	script := `
set -u
rm -f /root/stop
( reads=0; bad=0
  while [ ! -e /root/stop ]; do
    if out=$(` + writer + ` show 2>&1); then reads=$((reads+1)); else bad=$((bad+1)); echo "torn: $out" >&2; fi
  done
  echo "$reads $bad" >/root/reader ) &
reader=$!
i=0
while IFS= read -r line; do
  i=$((i+1))
  printf '%s\n' "$line" | ` + writer + ` write || { echo "write $i failed" >&2; exit 1; }
done </root/records
touch /root/stop
wait $reader
cat /root/reader`
	res, err := b.Exec(box.Cmd{Args: []string{"bash", "-c", script}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("write loop: exit %d, %v\n%s", res.ExitCode, err, res.Stderr)
	}
	f := strings.Fields(res.Stdout)
	if len(f) != 2 {
		t.Fatalf("reader said %q", res.Stdout)
	}
	reads, _ := strconv.Atoi(f[0])
	bad, _ := strconv.Atoi(f[1])
	t.Logf("reader: %d good reads, %d failed, during %d writes", reads, bad, n)
	if bad != 0 || reads == 0 {
		t.Errorf("reader: %d reads, %d failed (want > 0 and 0):\n%s", reads, bad, res.Stderr)
	}
	waitHostname(t, b, fmt.Sprintf("race-%d", n))
	checkHostname(t, b, fmt.Sprintf("race-%d", n))
	for _, u := range []string{"cocoonbox-hostname.path", "cocoonbox-hostname.service"} {
		if out, _ := b.Run("systemctl", "is-failed", u); strings.TrimSpace(out) == "failed" {
			t.Errorf("%s failed after the burst", u)
		}
	}
	if state := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "ActiveState", "cocoonbox-hostname.path")); state != "active" {
		t.Errorf("cocoonbox-hostname.path is %s after the burst, want active (still watching)", state)
	}
}
