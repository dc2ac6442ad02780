package users

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// KDF is argon2id's cost. Hashes carry their own parameters (PHC string
// format), so a changed KDF applies to new passwords and old ones still verify.
type KDF struct {
	Time      uint32 // passes
	MemoryKiB uint32
	Threads   uint8
}

// DefaultKDF is RFC 9106's second recommended option (t=3, 64 MiB, p=4),
// the one for machines without 2 GiB to spare per sign-in.
var DefaultKDF = KDF{Time: 3, MemoryKiB: 64 * 1024, Threads: 4}

// Password bounds: long enough to mean something, short enough that hashing
// one is no denial of service.
const (
	MinPassword = 8
	MaxPassword = 1024
)

var b64 = base64.RawStdEncoding

// Hash is password's argon2id hash in PHC form, with a fresh 16-byte salt.
func (k KDF) Hash(password string) string {
	salt := make([]byte, 16)
	rand.Read(salt)
	sum := argon2.IDKey([]byte(password), salt, k.Time, k.MemoryKiB, k.Threads, 32)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, k.MemoryKiB, k.Time, k.Threads, b64.EncodeToString(salt), b64.EncodeToString(sum))
}

// Verify reports whether password matches hash (a PHC string from Hash),
// comparing in constant time.
func Verify(hash, password string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false, errors.New("password hash: not argon2id v19 in PHC form")
	}
	var k KDF
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &k.MemoryKiB, &k.Time, &k.Threads); err != nil {
		return false, fmt.Errorf("password hash: parameters: %w", err)
	}
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err := errors.Join(err1, err2); err != nil || len(want) == 0 {
		return false, fmt.Errorf("password hash: encoding: %w", err)
	}
	got := argon2.IDKey([]byte(password), salt, k.Time, k.MemoryKiB, k.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// CheckPassword names the rule a new password breaks, or returns nil.
func CheckPassword(password string) error {
	if len(password) < MinPassword || len(password) > MaxPassword {
		return fmt.Errorf("%w: a password is %d to %d bytes, this one is %d", ErrBadPassword, MinPassword, MaxPassword, len(password))
	}
	return nil
}
