// Command writetime runs inside a box for BenchmarkIdentityWriteToKernelHostname:
// for each record on stdin (one JSON line each, whose name is already a
// valid hostname) it starts the clock, runs `identity write` with the
// record, and polls uname(2) every 100 µs until the kernel hostname is the
// record's name. It prints one latency in microseconds per line.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 8192), 8192)
	for sc.Scan() {
		var rec struct{ Name string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			fail(err)
		}
		// Let the previous run of the helper end, so each write is
		// measured alone.
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		cmd := exec.Command("/usr/local/lib/cocoonbox/identity", "write")
		cmd.Stdin = bytes.NewReader(sc.Bytes())
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fail(fmt.Errorf("identity write: %w", err))
		}
		for {
			var u unix.Utsname
			_ = unix.Uname(&u)
			if unix.ByteSliceToString(u.Nodename[:]) == rec.Name {
				break
			}
			if time.Since(start) > 10*time.Second {
				fail(fmt.Errorf("hostname not %s 10 s after the write", rec.Name))
			}
			time.Sleep(100 * time.Microsecond)
		}
		fmt.Println(time.Since(start).Microseconds())
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "writetime:", err)
	os.Exit(1)
}
