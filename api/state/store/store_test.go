package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
