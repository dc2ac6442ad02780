package store_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/state/store"
	"github.com/cocoonbox/cocoonbox/api/state/store/storetest"
	"github.com/cocoonbox/cocoonbox/api/state/store/weedtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The embedded store as the api builds and serves it: state.store
// embedded, its presigned URLs answered on the api's own listener.
func TestEmbeddedStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		a := apitest.New(t, apitest.WithoutSession())
		if !strings.HasPrefix(a.State.String(), "embedded "+filepath.Join(a.Config.StateDir, "state")) {
			t.Fatalf("the api's store is %s, want the embedded one under its state directory", a.State)
		}
		return a.State
	})
}

func s3Config(w *weedtest.Server) func(*config.Config) {
	return func(c *config.Config) {
		c.State.Store = "s3"
		c.State.S3 = config.StateS3{Endpoint: w.Endpoint, Bucket: w.Bucket, URLStyle: "path", CredentialsFile: w.CredentialsFile, Profile: w.Profile}
	}
}

// The S3 store as the api builds it from state.s3, against a real
// SeaweedFS (weed, built by make setup; missing, the test fails).
func TestS3StoreAgainstSeaweedFS(t *testing.T) {
	w := weedtest.Start(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		a := apitest.New(t, apitest.WithoutSession(), apitest.WithConfig(s3Config(w)))
		if !strings.HasPrefix(a.State.String(), "s3 ") {
			t.Fatalf("the api's store is %s, want s3", a.State)
		}
		return a.State
	})
}

// Bad input: an S3 store that cannot be reached as configured stops the
// open with an error naming the setting; the control opens.
func TestS3SettingsThatDoNotWorkAreNamed(t *testing.T) {
	w := weedtest.Start(t)
	ctx := context.Background()
	if _, err := store.OpenS3(ctx, w.S3Config); err != nil {
		t.Fatalf("control: %v", err)
	}
	wrong := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(wrong, []byte("[default]\naws_access_key_id = cocoonboxtest\naws_secret_access_key = not-the-secret\n"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("[other]\n"), 0o600)
	for want, change := range map[string]func(*store.S3Config){
		"state.s3.bucket":           func(c *store.S3Config) { c.Bucket = "no-such-bucket" },
		"state.s3.credentials_file": func(c *store.S3Config) { c.CredentialsFile = filepath.Join(t.TempDir(), "missing") },
		"no aws_access_key_id":      func(c *store.S3Config) { c.CredentialsFile = empty },
		"state.s3: bucket":          func(c *store.S3Config) { c.CredentialsFile = wrong },
		"state.s3.endpoint":         func(c *store.S3Config) { c.Endpoint = "ftp://x" },
	} {
		c := w.S3Config
		change(&c)
		if _, err := store.OpenS3(ctx, c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}

// A presigned PUT whose body stalls is cut at http.read_timeout (the
// route has no other read deadline, its bodies being larger than a
// call's): the writer gets an answer, the object is not stored, and the
// control, the same URL with the whole body, stores it.
func TestAStalledPresignedPutIsCut(t *testing.T) {
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithConfig(func(c *config.Config) { c.HTTP.ReadTimeout = time.Second }))
	ctx := context.Background()
	key := a.User.ID + "/state/chunks/aa/aaaa"
	put, err := a.State.PresignPut(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(put)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n0123456789", u.RequestURI(), u.Host)
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a stalled PUT got no answer within a minute: %v", err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a stalled PUT: %s, want 413 (cut)", resp.Status)
	}
	if ok, _ := a.State.Has(ctx, key); ok {
		t.Fatal("a stalled PUT stored an object")
	}
	req, _ := http.NewRequest(http.MethodPut, put, strings.NewReader(strings.Repeat("x", 100)))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("control: the whole body: %v %v", resp, err)
	}
}
