// Package weedtest runs a real S3-compatible server for tests: SeaweedFS's
// weed, built from source through the Go module proxy by tests/setup-host
// (make setup). A test that cannot find it fails: it never skips.
package weedtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// Version is the SeaweedFS module version tests/setup-host builds (its
// tags are not semantic versions, so the proxy serves it by commit); a
// test holds the two equal.
const Version = "v0.0.0-20261109003541-7506e5f91cd6"

// Bucket is the bucket Start makes.
const Bucket = "cocoonbox-test"

// Binary is the weed to run: $COCOONBOX_WEED, else where tests/setup-host
// puts it ($COCOONBOX_CACHE or /var/cache/cocoonbox, seaweedfs-VERSION/weed).
func Binary() (string, error) {
	if p := os.Getenv("COCOONBOX_WEED"); p != "" {
		return p, nil
	}
	cache := os.Getenv("COCOONBOX_CACHE")
	if cache == "" {
		cache = "/var/cache/cocoonbox"
	}
	p := filepath.Join(cache, "seaweedfs-"+Version, "weed")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("SeaweedFS's weed is not built (%v): run make setup (tests/setup-host builds it from the Go module proxy), or set COCOONBOX_WEED", err)
	}
	return p, nil
}

func freePorts(t testing.TB, n int) []int {
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// Server is a running weed: the S3 store's configuration for it, and Kill,
// which stops it at once (a store gone away; the test's end kills it too).
type Server struct {
	store.S3Config
	Kill func()
}

// Start runs weed mini for t on loopback ports (master, volume, filer and
// the S3 gateway; WebDAV, the admin UI, Iceberg, Lance and telemetry off)
// in a directory of t's, with one admin identity and Bucket made, and
// answers the server (the S3 store's configuration, its credentials file
// written). It
// waits for the bucket to answer, and fails t with weed's log when it
// does not within two minutes. weed is killed when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	access, secret := "cocoonboxtest", "cocoonbox-test-secret-0123456789"
	s3json := fmt.Sprintf(`{"identities":[{"name":"cocoonbox","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","List","Tagging","Write"]}]}`, access, secret)
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), []byte(s3json), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = "+access+"\naws_secret_access_key = "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	p := freePorts(t, 8)
	args := []string{"mini", "-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + strconv.Itoa(p[0]), "-master.port.grpc=" + strconv.Itoa(p[1]),
		"-volume.port=" + strconv.Itoa(p[2]), "-volume.port.grpc=" + strconv.Itoa(p[3]),
		"-filer.port=" + strconv.Itoa(p[4]), "-filer.port.grpc=" + strconv.Itoa(p[5]),
		"-s3.port=" + strconv.Itoa(p[6]), "-s3.port.grpc=" + strconv.Itoa(p[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false",
		"-master.telemetry=false", "-s3.config=" + filepath.Join(dir, "s3.json"), "-bucket=" + Bucket,
		"-filer.localSocket=" + filepath.Join(dir, "filer.sock"), "-s3.localSocket=" + filepath.Join(dir, "s3.sock")}
	var log bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	kill := func() {
		once.Do(func() {
			cmd.Process.Kill()
			exited <- <-exited // Wait's answer, kept for the cleanup's receive
		})
	}
	t.Cleanup(kill)
	cfg := store.S3Config{Endpoint: "http://127.0.0.1:" + strconv.Itoa(p[6]), Bucket: Bucket, CredentialsFile: creds, Profile: "default"}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := store.OpenS3(ctx, cfg)
		cancel()
		if err == nil {
			return &Server{S3Config: cfg, Kill: kill}
		}
		select {
		case err := <-exited:
			exited <- err // for kill's receive
			t.Fatalf("weed mini exited (%v):\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			kill()
			t.Fatalf("weed mini's bucket %s does not answer after 2 minutes (last: %v); its log:\n%s", Bucket, err, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
