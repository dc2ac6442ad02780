package store

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// PresignPath is where the api serves the embedded store's presigned URLs:
// PresignPath + KEY?expires=UNIX&sig=HEX.
const PresignPath = "/cocoonbox.state/objects/"

// Dir is the embedded store: each object a file ROOT/objects/KEY, written
// to a temporary file beside it and renamed into place (atomic), made
// durable by Sync: one syncfs of the file system for all the objects of a
// save rather than two fsyncs for each.
// Its presigned URLs point at the api (PresignPath), which serves them
// with Handler; they are signed with HMAC-SHA256 under ROOT/presign.key
// (32 random bytes made at the first Open), binding the method, the key
// and the expiry.
type Dir struct {
	root string
	base string
	sign []byte
	now  func() time.Time
}

// OpenDir opens (making it, 0700, at the first start) the embedded store
// at root. base is the api's public origin (http(s)://HOST[:PORT]) that
// presigned URLs begin with. now is the clock that expiries are checked
// against (nil: time.Now).
func OpenDir(root, base string, now func() time.Time) (*Dir, error) {
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(filepath.Join(root, "objects"), 0o700); err != nil {
		return nil, fmt.Errorf("the state store %s: %w", root, err)
	}
	keyFile := filepath.Join(root, "presign.key")
	key := make([]byte, 32)
	rand.Read(key)
	dfd, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("the state store %s: %w", root, err)
	}
	err = durable.WriteAt(int(dfd.Fd()), "presign.key", durable.File{Data: key, Mode: 0o600, NoReplace: true})
	dfd.Close()
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("the state store's presign key %s: %w", keyFile, err)
	}
	// Two apis starting at once: both read the one that landed.
	if key, err = os.ReadFile(keyFile); err != nil || len(key) != 32 {
		return nil, fmt.Errorf("the state store's presign key %s: %d bytes, %v (want 32 random bytes)", keyFile, len(key), err)
	}
	return &Dir{root: root, base: strings.TrimSuffix(base, "/"), sign: key, now: now}, nil
}

func (d *Dir) String() string { return "embedded " + d.root }

func (d *Dir) path(key string) string {
	return filepath.Join(d.root, "objects", filepath.FromSlash(key))
}

// Put implements Store.
func (d *Dir) Put(ctx context.Context, key string, data []byte) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if len(data) > MaxObject {
		return fmt.Errorf("put %s: %d bytes: %w (%d)", key, len(data), ErrTooLarge, MaxObject)
	}
	p := d.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Sync implements Store: syncfs of the file system the objects are on.
func (d *Dir) Sync(ctx context.Context) error {
	f, err := os.Open(filepath.Join(d.root, "objects"))
	if err != nil {
		return fmt.Errorf("sync %s: %w", d.root, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", d.root, err)
	}
	return nil
}

// Get implements Store.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(d.path(key))
	// A key that is only a prefix of others (a directory here) is no
	// object, as in S3.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.EISDIR) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return data, nil
}

// Has implements Store.
func (d *Dir) Has(ctx context.Context, key string) (bool, error) {
	if err := CheckKey(key); err != nil {
		return false, err
	}
	st, err := os.Stat(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("has %s: %w", key, err)
	}
	return st.Mode().IsRegular(), nil
}

// List implements Store.
func (d *Dir) List(ctx context.Context, prefix string, fn func(string) error) error {
	if err := CheckPrefix(prefix); err != nil {
		return err
	}
	top := filepath.Join(d.root, "objects")
	err := filepath.WalkDir(d.path(strings.TrimSuffix(prefix, "/")), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			return nil // a directory, or a write in progress
		}
		rel, _ := filepath.Rel(top, p)
		return fn(filepath.ToSlash(rel))
	})
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	return nil
}

// Delete implements Store.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := os.Remove(d.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// DeleteUser implements Store. The user's directory is renamed aside
// first, so a crash midway leaves no half of it under the user's prefix.
func (d *Dir) DeleteUser(ctx context.Context, uid string) error {
	if err := CheckPrefix(UserPrefix(uid)); err != nil || strings.Contains(uid, "/") {
		return fmt.Errorf("%w: user id %q", ErrInvalidKey, uid)
	}
	p := d.path(uid)
	var rnd [6]byte
	rand.Read(rnd[:])
	gone := filepath.Join(d.root, "objects", ".deleting-"+uid+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Rename(p, gone); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("delete user %s: %w", uid, err)
	}
	if err := durable.SyncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("delete user %s: %w", uid, err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("delete user %s: %w", uid, err)
	}
	return nil
}

// PresignGet implements Store.
func (d *Dir) PresignGet(ctx context.Context, key string, expiry time.Duration) (string, error) {
	return d.presign(http.MethodGet, key, expiry)
}

// PresignPut implements Store.
func (d *Dir) PresignPut(ctx context.Context, key string, expiry time.Duration) (string, error) {
	return d.presign(http.MethodPut, key, expiry)
}

func (d *Dir) presign(method, key string, expiry time.Duration) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if err := checkExpiry(expiry); err != nil {
		return "", err
	}
	exp := strconv.FormatInt(d.now().Add(expiry).Unix(), 10)
	q := url.Values{"expires": {exp}, "sig": {d.signature(method, key, exp)}}
	return d.base + PresignPath + key + "?" + q.Encode(), nil
}

// signature is HMAC-SHA256(presign key, method \n key \n expires), hex.
func (d *Dir) signature(method, key, expires string) string {
	m := hmac.New(sha256.New, d.sign)
	io.WriteString(m, method+"\n"+key+"\n"+expires)
	return hex.EncodeToString(m.Sum(nil))
}

// Handler serves the presigned URLs of PresignGet and PresignPut under
// PresignPath (the api mounts it there). Answers: 200 with the object (GET)
// or 200 stored (PUT); 400 for a bad key; 403 for a missing, wrong or
// expired signature (each the same body, so a probe learns nothing);
// 404 for a GET of a missing object; 405 for another method; 413 for a
// body over MaxObject or cut (not whole within readTimeout of the
// request's start: a stalled writer holds no connection). Nothing but the
// signature authenticates a request.
func (d *Dir) Handler(readTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.URL.Path, PresignPath)
		if !ok || CheckKey(key) != nil {
			http.Error(w, "not an object key", http.StatusBadRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodPut {
			w.Header().Set("Allow", "GET, PUT")
			http.Error(w, "GET or PUT only", http.StatusMethodNotAllowed)
			return
		}
		exp, sig := r.URL.Query().Get("expires"), r.URL.Query().Get("sig")
		at, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || !hmac.Equal([]byte(sig), []byte(d.signature(r.Method, key, exp))) || d.now().Unix() > at {
			http.Error(w, "the URL's signature is not valid for this object and method, or it has expired", http.StatusForbidden)
			return
		}
		ctx := r.Context()
		if r.Method == http.MethodGet {
			data, err := d.Get(ctx, key)
			if errors.Is(err, ErrNotFound) {
				http.Error(w, "no such object", http.StatusNotFound)
				return
			}
			if err != nil {
				http.Error(w, "the store failed", http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
			return
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(readTimeout))
		data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxObject))
		if err != nil {
			http.Error(w, fmt.Sprintf("the body is over %d bytes or was cut", MaxObject), http.StatusRequestEntityTooLarge)
			return
		}
		// The writer in the box counts on a 200: the object is durable.
		if err := d.Put(ctx, key, data); err != nil || d.Sync(ctx) != nil {
			http.Error(w, "the store failed", http.StatusInternalServerError)
			return
		}
	})
}
