package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
)

// memoryKiB reads one field of /proc/PID/status in KiB: VmHWM, the
// process's peak resident set, or VmRSS, its resident set now.
func memoryKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s of %d: %q", field, pid, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// gzipBomb is about size bytes of gzip that inflate to about a thousand
// times more: one member of zeros repeated (a gzip stream of several
// members is one body to every reader, Go's included), so making it
// costs the test little.
func gzipBomb(t *testing.T, size int) []byte {
	t.Helper()
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range min(64, max(1, size>>10)) {
		zw.Write(zeros)
	}
	zw.Close()
	out := bytes.Repeat(member.Bytes(), max(1, size/member.Len()))
	return out
}

// rawCall posts body to the connect service path of the api as one call of
// protocol ("grpc": a gzip-compressed envelope; "connect": a unary body
// with Content-Encoding gzip), with token when it is not "", over h2c,
// and answers the call's status code as connect names it.
func rawCall(ctx context.Context, endpoint, path, protocol, token string, body []byte) (string, error) {
	var req *http.Request
	var err error
	switch protocol {
	case "grpc":
		env := make([]byte, 5, 5+len(body))
		env[0] = 1 // compressed
		binary.BigEndian.PutUint32(env[1:], uint32(len(body)))
		req, err = http.NewRequestWithContext(ctx, "POST", endpoint+path, bytes.NewReader(append(env, body...)))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Grpc-Encoding", "gzip")
		req.Header.Set("Te", "trailers")
	case "connect":
		req, err = http.NewRequestWithContext(ctx, "POST", endpoint+path, bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/proto")
		req.Header.Set("Content-Encoding", "gzip")
		req.Header.Set("Connect-Protocol-Version", "1")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := harness.H2CClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if protocol == "grpc" {
		status := resp.Trailer.Get("Grpc-Status")
		if status == "" {
			status = resp.Header.Get("Grpc-Status") // a trailers-only answer
		}
		names := map[string]string{"0": "ok", "3": "invalid_argument", "8": "resource_exhausted", "16": "unauthenticated"}
		if n, ok := names[status]; ok {
			return n, nil
		}
		return "", fmt.Errorf("%s %s: HTTP %d, grpc-status %q %q", protocol, path, resp.StatusCode, status, resp.Header.Get("Grpc-Message"))
	}
	var e struct{ Code string }
	if json.Unmarshal(answer, &e) != nil || e.Code == "" {
		return "", fmt.Errorf("%s %s: HTTP %d %q", protocol, path, resp.StatusCode, answer)
	}
	return e.Code, nil
}

// callAll makes every call of the Boxes and Account services in both
// protocols, three of each at once, and fails the test on an answer that
// is not want.
func callAll(t *testing.T, e *env, token string, body []byte, want string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for _, path := range []string{"/cocoonbox.control.v1.Boxes/List", "/cocoonbox.control.v1.Account/ListDevices"} {
		for _, protocol := range []string{"grpc", "connect"} {
			for range 3 {
				wg.Go(func() {
					code, err := rawCall(e.ctx, e.api.URL, path, protocol, token, body)
					if err == nil && code != want {
						err = fmt.Errorf("%s %s: %s; want %s", protocol, path, code, want)
					}
					if err != nil {
						errs <- err
					}
				})
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// bombBound is how much the api's peak resident set may grow while it
// refuses the bombs: the HTTP/2 receive windows it buffers (server.Window
// per connection) and the GC's slack, nowhere near what one bomb inflates to.
const bombBound = 64 << 10 // KiB

// An anonymous request could take the api's memory: the Boxes and Account
// services read and inflated the whole body before the token check (a
// 510 KiB gzip body held ~1.8 GiB). Now the token is checked before the
// body is read: twelve 10 MB bombs at once (each ~10 GB inflated), in
// gRPC and Connect, are refused UNAUTHENTICATED, and the api's peak RSS
// grows by less than bombBound.
func TestAnAnonymousGzipBombIsRefusedBeforeItIsRead(t *testing.T) {
	e := newEnv(t)
	bomb := gzipBomb(t, 10<<20)
	before := memoryKiB(t, e.api.PID(), "VmHWM")
	callAll(t, e, "", bomb, "unauthenticated")
	after := memoryKiB(t, e.api.PID(), "VmHWM")
	t.Logf("api peak RSS %d KiB before, %d KiB after twelve anonymous %d-byte gzip bombs (bound: +%d KiB)", before, after, len(bomb), bombBound)
	if after-before > bombBound {
		t.Fatalf("the api's peak RSS grew from %d to %d KiB refusing anonymous bombs; bound +%d KiB", before, after, bombBound)
	}
}

// With a token, the message is bounded once inflated too: a body of a few
// KiB of gzip inflating to megabytes is RESOURCE_EXHAUSTED at 16 KiB
// (connect.WithReadMaxBytes), not inflated to its end (it was
// INVALID_ARGUMENT after the whole of it); a 10 MB bomb is refused by its
// size; the peak RSS stays within bombBound.
func TestAGzipBombWithATokenIsCutAtTheMessageBound(t *testing.T) {
	e := newEnv(t)
	token := e.device(e.console("alice"), "bomber")
	small := gzipBomb(t, 8<<10)
	before := memoryKiB(t, e.api.PID(), "VmHWM")
	callAll(t, e, token, small, "resource_exhausted")
	callAll(t, e, token, gzipBomb(t, 10<<20), "resource_exhausted")
	after := memoryKiB(t, e.api.PID(), "VmHWM")
	t.Logf("api peak RSS %d KiB before, %d KiB after the bombs with a token (bound: +%d KiB)", before, after, bombBound)
	if after-before > bombBound {
		t.Fatalf("the api's peak RSS grew from %d to %d KiB; bound +%d KiB", before, after, bombBound)
	}
}

// Version answers without a token (version.proto), so its body is an
// anonymous caller's: it is bounded as a signed-in caller's message is, a
// few KiB of gzip inflating to megabytes and a 10 MB bomb both
// RESOURCE_EXHAUSTED at 16 KiB, the peak RSS within bombBound; an empty
// request answers the version (issue 45, Deliver 4).
func TestVersionCutsAnAnonymousGzipBombAtTheMessageBound(t *testing.T) {
	e := newEnv(t)
	const path = "/cocoonbox.control.v1.Version/GetVersion"
	before := memoryKiB(t, e.api.PID(), "VmHWM")
	for _, bomb := range [][]byte{gzipBomb(t, 8<<10), gzipBomb(t, 10<<20)} {
		for _, protocol := range []string{"grpc", "connect"} {
			if code, err := rawCall(e.ctx, e.api.URL, path, protocol, "", bomb); err != nil || code != "resource_exhausted" {
				t.Errorf("%s %s, anonymous, a %d-byte gzip bomb: %s %v; want resource_exhausted", protocol, path, len(bomb), code, err)
			}
		}
	}
	after := memoryKiB(t, e.api.PID(), "VmHWM")
	t.Logf("api peak RSS %d KiB before, %d KiB after anonymous gzip bombs to Version (bound: +%d KiB)", before, after, bombBound)
	if after-before > bombBound {
		t.Fatalf("the api's peak RSS grew from %d to %d KiB; bound +%d KiB", before, after, bombBound)
	}
	var empty bytes.Buffer
	gzip.NewWriter(&empty).Close()
	if code, err := rawCall(e.ctx, e.api.URL, path, "grpc", "", empty.Bytes()); err != nil || code != "ok" {
		t.Errorf("grpc %s, anonymous, empty: %s %v; want ok", path, code, err)
	}
}
