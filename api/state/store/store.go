// Package store is the state store (Contract: State objects (agent ↔ api),
// Flow library): one flat space of sealed objects, keyed <uid>/..., that
// the api, its replicas and the agents of a user's boxes (through
// presigned URLs) share. Two implementations: Dir, the embedded default (a
// directory under the api's state directory, for one machine), and S3, any
// S3-compatible object store (AWS, R2, GCS's XML API, MinIO, Ceph,
// SeaweedFS) through minio-go. Open picks one from api.yaml's state
// section. docs/state.md describes the layout.
//
// The store knows nothing of what an object holds: every object is sealed
// before it gets here (package state/objects), so the store's operator
// reads names and sizes only.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxObject is the largest object the store takes, in bytes: chunks are at
// most 8 MiB (restic's chunker) and a manifest of a large home a few tens
// of MiB.
const MaxObject = 64 << 20

// MaxPresignExpiry bounds a presigned URL's life: a URL is a bearer
// credential for one object, so it is short (S3 itself allows 7 days).
const MaxPresignExpiry = time.Hour

// Errors of every Store.
var (
	// ErrNotFound: no object under that key.
	ErrNotFound = errors.New("no such object")
	// ErrInvalidKey: a key outside the grammar (CheckKey).
	ErrInvalidKey = errors.New("invalid object key")
	// ErrTooLarge: an object over MaxObject.
	ErrTooLarge = errors.New("object too large")
)

// Store is a state store. Keys are checked with CheckKey by every method
// (an invalid one is ErrInvalidKey, nothing touched). A Put is atomic: a
// reader sees the old object or the new one, never half; the objects Put
// before a Sync returned survive a crash of the api (S3's as soon as Put
// returns). Every method is safe for concurrent use, across processes and
// (S3) hosts.
type Store interface {
	// Put stores data (at most MaxObject bytes, else ErrTooLarge) under
	// key, replacing what was there.
	Put(ctx context.Context, key string, data []byte) error
	// Sync makes every object Put before it durable: a save syncs its
	// chunks once before it puts the manifest that names them, not each
	// chunk as it goes (a home's thousands of small files are thousands
	// of objects).
	Sync(ctx context.Context) error
	// Get is the object under key, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Has says whether an object is under key.
	Has(ctx context.Context, key string) (bool, error)
	// List calls fn with every key under prefix (which ends in "/"), in
	// no promised order; an error of fn ends the walk and is returned.
	List(ctx context.Context, prefix string, fn func(key string) error) error
	// Delete removes the object under key; a missing one is no error.
	Delete(ctx context.Context, key string) error
	// DeleteUser removes every object under <uid>/ (Contract: Flow
	// library: "Removing <uid>/ removes the library"; a user deleted).
	DeleteUser(ctx context.Context, uid string) error
	// PresignGet and PresignPut are URLs that GET or PUT the object under
	// key without other credentials until expiry (1s to
	// MaxPresignExpiry) has passed, and for that key and method only:
	// what an agent in a box writes and reads a save's objects with.
	PresignGet(ctx context.Context, key string, expiry time.Duration) (string, error)
	PresignPut(ctx context.Context, key string, expiry time.Duration) (string, error)
	// String names the store for logs: "embedded DIR" or "s3 URL/BUCKET".
	String() string
}

// maxKey bounds a key's length in bytes (S3's own limit is 1024).
const maxKey = 1024

// CheckKey says whether key is an object key: a user id and at least one
// more segment, separated by "/"; each segment 1 to 255 of
// [A-Za-z0-9._-], not beginning with "."; at most 1024 bytes. The grammar
// keeps a key one path under Dir's root (where a name beginning with "."
// is a write in progress) and one plain name in S3 (nothing to encode).
func CheckKey(key string) error {
	if len(key) > maxKey {
		return fmt.Errorf("%w: %d bytes, over %d", ErrInvalidKey, len(key), maxKey)
	}
	segs := strings.Split(key, "/")
	if len(segs) < 2 {
		return fmt.Errorf("%w %q: not <uid>/<name>", ErrInvalidKey, key)
	}
	for _, s := range segs {
		if err := checkSegment(s); err != nil {
			return fmt.Errorf("%w %q: %v", ErrInvalidKey, key, err)
		}
	}
	return nil
}

// CheckPrefix says whether prefix is a key prefix: segments as CheckKey's,
// the user id at least, ending in "/".
func CheckPrefix(prefix string) error {
	p, ok := strings.CutSuffix(prefix, "/")
	if !ok || len(prefix) > maxKey {
		return fmt.Errorf("%w: prefix %q does not end in /", ErrInvalidKey, prefix)
	}
	for _, s := range strings.Split(p, "/") {
		if err := checkSegment(s); err != nil {
			return fmt.Errorf("%w: prefix %q: %v", ErrInvalidKey, prefix, err)
		}
	}
	return nil
}

func checkSegment(s string) error {
	if s == "" || s[0] == '.' || len(s) > 255 {
		return fmt.Errorf("segment %q is empty, begins with a dot or is over 255 bytes", s)
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("segment %q has %q (allowed: A-Z a-z 0-9 . _ -)", s, c)
		}
	}
	return nil
}

// UserPrefix is the prefix of every object of user uid: "<uid>/".
func UserPrefix(uid string) string { return uid + "/" }

func checkExpiry(d time.Duration) error {
	if d < time.Second || d > MaxPresignExpiry {
		return fmt.Errorf("presigned URL expiry %s is not 1s..%s", d, MaxPresignExpiry)
	}
	return nil
}
