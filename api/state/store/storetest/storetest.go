// Package storetest is the one test suite every state store passes (Run):
// the embedded Dir and S3 against a real SeaweedFS run the same cases, so
// the two cannot drift apart.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// Run runs every case against the store open answers; open is called once
// per case, and each case uses user ids of its own (a store may be shared).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	cases := []struct {
		name string
		f    func(*testing.T, store.Store, string)
	}{
		{"PutGetReplace", testPutGet},
		{"Missing", testMissing},
		{"InvalidKeys", testInvalidKeys},
		{"TooLarge", testTooLarge},
		{"ListUnderPrefix", testList},
		{"DeleteUserRemovesUidPrefix", testDeleteUser},
		{"PresignedPutThenGet", testPresigned},
		{"PresignedURLBoundToKeyAndMethod", testPresignedBound},
		{"PresignedURLExpires", testPresignedExpires},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			uid := fmt.Sprintf("u%d-%d", time.Now().UnixNano(), i)
			c.f(t, open(t), uid)
		})
	}
}

func testPutGet(t *testing.T, s store.Store, uid string) {
	ctx := context.Background()
	key := uid + "/state/chunks/ab/abcdef"
	for _, data := range [][]byte{[]byte("first"), bytes.Repeat([]byte{0, 1, 2}, 100000), {}} {
		if err := s.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get after Put of %d bytes: %d bytes, %v", len(data), len(got), err)
		}
		if ok, err := s.Has(ctx, key); !ok || err != nil {
			t.Fatalf("Has after Put: %v, %v", ok, err)
		}
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Has(ctx, key); ok || err != nil {
		t.Fatalf("Has after Delete: %v, %v", ok, err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatalf("Delete of a missing object: %v", err)
	}
}

func testMissing(t *testing.T, s store.Store, uid string) {
	ctx := context.Background()
	if _, err := s.Get(ctx, uid+"/nothing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a missing object: %v, want ErrNotFound", err)
	}
	// A key that is only a prefix of another is no object either.
	if err := s.Put(ctx, uid+"/dir/leaf", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, uid+"/dir"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a prefix: %v, want ErrNotFound", err)
	}
	if ok, err := s.Has(ctx, uid+"/dir"); ok || err != nil {
		t.Fatalf("Has of a prefix: %v, %v", ok, err)
	}
}

func testInvalidKeys(t *testing.T, s store.Store, uid string) {
	ctx := context.Background()
	for _, k := range []string{"", uid, uid + "/", "/" + uid + "/x", uid + "/../other/x", uid + "/./x", uid + "//x",
		uid + "/.tmp", uid + "/a b", uid + "/a\x00b", uid + "/é", uid + "/" + strings.Repeat("a", 256), uid + "/" + strings.Repeat("a/", 600) + "a"} {
		if err := s.Put(ctx, k, []byte("x")); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Put %q: %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Get %q: %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.PresignPut(ctx, k, time.Minute); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("PresignPut %q: %v, want ErrInvalidKey", k, err)
		}
	}
	if err := s.DeleteUser(ctx, "../"+uid); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("DeleteUser ../: %v, want ErrInvalidKey", err)
	}
	for _, d := range []time.Duration{0, time.Second / 2, store.MaxPresignExpiry + time.Second} {
		if _, err := s.PresignGet(ctx, uid+"/x", d); err == nil || !strings.Contains(err.Error(), "expiry") {
			t.Errorf("PresignGet with expiry %s: %v, want an error naming the expiry", d, err)
		}
	}
}

func testTooLarge(t *testing.T, s store.Store, uid string) {
	ctx := context.Background()
	if err := s.Put(ctx, uid+"/big", make([]byte, store.MaxObject+1)); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Put over MaxObject: %v, want ErrTooLarge", err)
	}
	if ok, _ := s.Has(ctx, uid+"/big"); ok {
		t.Fatal("an object over MaxObject was stored")
	}
}

func list(t *testing.T, s store.Store, prefix string) []string {
	t.Helper()
	var keys []string
	if err := s.List(context.Background(), prefix, func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

func testList(t *testing.T, s store.Store, uid string) {
	ctx := context.Background()
	want := []string{uid + "/flows/index", uid + "/state/chunks/00/00aa", uid + "/state/chunks/ff/ffbb", uid + "/state/manifests/box1/s1"}
	for _, k := range append(slices.Clone(want), uid+"x/state/other") {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if got := list(t, s, uid+"/"); !slices.Equal(got, want) {
		t.Fatalf("List %s/: %q, want %q", uid, got, want)
	}
	if got := list(t, s, uid+"/state/chunks/"); !slices.Equal(got, want[1:3]) {
		t.Fatalf("List chunks: %q, want %q", got, want[1:3])
	}
	if got := list(t, s, uid+"/none/"); len(got) != 0 {
		t.Fatalf("List of an empty prefix: %q", got)
	}
	stop := errors.New("stop")
	n := 0
	if err := s.List(ctx, uid+"/", func(string) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("List whose fn fails: %v after %d calls, want fn's error after 1", err, n)
	}
	if err := s.List(ctx, uid, func(string) error { return nil }); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("List of a prefix without /: %v", err)
	}
}

func testDeleteUser(t *testing.T, s store.Store, uid string) {
	ctx := context.Background()
	other := uid + "x" // shares uid as a string prefix, not as a key prefix
	for _, k := range []string{uid + "/flows/index", uid + "/state/chunks/aa/aabb", uid + "/state/manifests/b/s", other + "/flows/index"} {
		if err := s.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteUser(ctx, uid); err != nil {
		t.Fatal(err)
	}
	if got := list(t, s, uid+"/"); len(got) != 0 {
		t.Fatalf("after DeleteUser, %s/ still holds %q", uid, got)
	}
	if got := list(t, s, other+"/"); len(got) != 1 {
		t.Fatalf("DeleteUser %s touched %s/: %q left", uid, other, got)
	}
	if err := s.DeleteUser(ctx, uid); err != nil {
		t.Fatalf("DeleteUser of a user with nothing: %v", err)
	}
}

// do sends method to u with body and answers the status and the body.
func do(t *testing.T, method, u string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body = nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func testPresigned(t *testing.T, s store.Store, uid string) {
	ctx := context.Background()
	key := uid + "/state/chunks/12/1234"
	put, err := s.PresignPut(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("sealed"), 5000)
	if code, body := do(t, http.MethodPut, put, data); code != http.StatusOK {
		t.Fatalf("PUT to the presigned URL: %d %s", code, body)
	}
	if got, err := s.Get(ctx, key); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get of what the presigned PUT stored: %d bytes, %v", len(got), err)
	}
	get, err := s.PresignGet(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do(t, http.MethodGet, get, nil); code != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET of the presigned URL: %d, %d bytes", code, len(body))
	}
	missing, _ := s.PresignGet(ctx, uid+"/missing", time.Minute)
	if code, _ := do(t, http.MethodGet, missing, nil); code != http.StatusNotFound {
		t.Fatalf("GET of a presigned URL of a missing object: %d, want 404", code)
	}
}

func testPresignedBound(t *testing.T, s store.Store, uid string) {
	ctx := context.Background()
	key, otherKey := uid+"/state/manifests/b/s1", uid+"/state/manifests/b/s2"
	for _, k := range []string{key, otherKey} {
		if err := s.Put(ctx, k, []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	get, _ := s.PresignGet(ctx, key, time.Minute)
	put, _ := s.PresignPut(ctx, key, time.Minute)
	// Control: the untouched URL works, so the refusals below are the
	// binding's and not a broken URL's.
	if code, _ := do(t, http.MethodGet, get, nil); code != http.StatusOK {
		t.Fatalf("control: GET of the presigned URL: %d", code)
	}
	swap := func(u string) string { return strings.Replace(u, "/s1?", "/s2?", 1) }
	for _, c := range []struct {
		what, method, url string
	}{
		{"a GET URL for another key", http.MethodGet, swap(get)},
		{"a PUT URL for another key", http.MethodPut, swap(put)},
		{"a GET URL used to PUT", http.MethodPut, get},
		{"a GET URL with its signature altered", http.MethodGet, alterSignature(t, get)},
		{"a GET URL with its expiry moved", http.MethodGet, moveExpiry(t, get)},
	} {
		if code, _ := do(t, c.method, c.url, []byte("after")); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.what, code)
		}
	}
	for _, k := range []string{key, otherKey} {
		if got, _ := s.Get(ctx, k); string(got) != "before" {
			t.Errorf("%s changed to %q through a refused URL", k, got)
		}
	}
}

// alterSignature flips the last hex digit of the URL's signature (Dir's
// sig, S3's X-Amz-Signature).
func alterSignature(t *testing.T, raw string) string {
	u, _ := url.Parse(raw)
	q := u.Query()
	for _, name := range []string{"sig", "X-Amz-Signature"} {
		if v := q.Get(name); v != "" {
			last := map[byte]string{'0': "1"}[v[len(v)-1]]
			if last == "" {
				last = "0"
			}
			q.Set(name, v[:len(v)-1]+last)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	t.Fatalf("no signature in %s", raw)
	return ""
}

// moveExpiry makes the URL live longer than it was signed for (Dir's
// expires, S3's X-Amz-Expires).
func moveExpiry(t *testing.T, raw string) string {
	u, _ := url.Parse(raw)
	q := u.Query()
	switch {
	case q.Get("expires") != "":
		q.Set("expires", q.Get("expires")+"0")
	case q.Get("X-Amz-Expires") != "":
		q.Set("X-Amz-Expires", "3600")
	default:
		t.Fatalf("no expiry in %s", raw)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func testPresignedExpires(t *testing.T, s store.Store, uid string) {
	ctx := context.Background()
	key := uid + "/state/chunks/ee/eeee"
	if err := s.Put(ctx, key, []byte("x")); err != nil {
		t.Fatal(err)
	}
	get, _ := s.PresignGet(ctx, key, time.Second)
	put, _ := s.PresignPut(ctx, key, time.Second)
	// The expiry is the store's clock's: wait for the GET's refusal (a
	// second and a bit), not for a fixed time; the PUT URL, of the same
	// expiry, is then past it too.
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, _ := do(t, http.MethodGet, get, nil)
		if code == http.StatusForbidden {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a 1s presigned GET URL still answers %d after 60s", code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, _ := do(t, http.MethodPut, put, []byte("late")); code != http.StatusForbidden {
		t.Fatalf("PUT to an expired presigned URL: %d, want 403", code)
	}
	if got, _ := s.Get(ctx, key); string(got) != "x" {
		t.Fatalf("the object is %q after a PUT to an expired URL", got)
	}
}
