package signin

import (
	"context"
	"net/url"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/devices"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type codeFixture struct {
	t     *testing.T
	ctx   context.Context
	db    *dbtest.DB
	store *Store
	users *users.Store
	user  users.User
	// reloaded is each user this api's token index was told to reload.
	reloaded []string
}

func newCodeFixture(t *testing.T) *codeFixture {
	t.Parallel()
	db := dbtest.New(t, users.Schema, Schema)
	us := users.NewStore(db.Pool)
	us.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1} // cheap: these tests are not about passwords
	u, err := us.Add(context.Background(), "alice", "a long enough password", false)
	if err != nil {
		t.Fatal(err)
	}
	f := &codeFixture{t: t, ctx: context.Background(), db: db, users: us, user: u}
	f.store = NewStore(db.Pool, devices.InTx{}, func(_ context.Context, userID string) error {
		f.reloaded = append(f.reloaded, userID)
		return nil
	})
	return f
}

// approve is the user's Allow of the CLI's request with RFC 7636's pair.
func (f *codeFixture) approve(q url.Values) (string, *client.AuthorizeRequest) {
	f.t.Helper()
	r, perr := ParseAuthorizeRequest(q)
	if perr != nil {
		f.t.Fatal(perr)
	}
	code, err := f.store.IssueCode(f.ctx, f.user.ID, r)
	if err != nil {
		f.t.Fatal(err)
	}
	return code, r
}

func (f *codeFixture) redeem(x Exchange) (string, *Error) {
	f.t.Helper()
	secret, oerr, err := f.store.Redeem(f.ctx, x)
	if err != nil {
		f.t.Fatal(err)
	}
	return secret, oerr
}

func (f *codeFixture) devices() int {
	var n int
	f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM user_tokens WHERE user_id = $1`, f.user.ID).Scan(&n)
	return n
}

func goodExchange(code string) Exchange {
	return Exchange{ClientID: "cocoonbox-cli", Code: code, RedirectURI: "http://127.0.0.1:41234/callback", Verifier: rfcVerifier}
}

func TestCodeRedeemsToADeviceTokenNamedByTheRequest(t *testing.T) {
	f := newCodeFixture(t)
	code, _ := f.approve(goodQuery())
	secret, oerr := f.redeem(goodExchange(code))
	if oerr != nil || len(secret) != 67 || secret[:3] != "cb_" {
		t.Fatalf("Redeem = %q, %v", secret, oerr)
	}
	if len(f.reloaded) != 1 || f.reloaded[0] != f.user.ID {
		t.Fatalf("this api's index reloaded for %v, want the user once: the token must work here at once", f.reloaded)
	}
	var client, label string
	f.db.Pool.QueryRow(f.ctx, `SELECT client, label FROM user_tokens WHERE user_id = $1`, f.user.ID).Scan(&client, &label)
	if client != "cocoonbox-cli" || label != "laptop" {
		t.Fatalf("device client %q label %q", client, label)
	}
	var stored int
	f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM signin_codes WHERE code_sha256 = sha256(convert_to($1, 'UTF8'))`, code).Scan(&stored)
	if stored != 1 {
		t.Fatal("the code's SHA-256 is not what is stored")
	}
}

// Bad input: a code used twice. The second use is refused and revokes the
// device the first use made (RFC 6749 §4.1.2).
func TestCodeUsedTwiceIsRefusedAndRevokesItsDevice(t *testing.T) {
	f := newCodeFixture(t)
	code, _ := f.approve(goodQuery())
	if _, oerr := f.redeem(goodExchange(code)); oerr != nil {
		t.Fatal(oerr)
	}
	if _, oerr := f.redeem(goodExchange(code)); oerr == nil || oerr.Code != client.ErrInvalidGrant {
		t.Fatalf("a second use: %v, want invalid_grant", oerr)
	}
	if n := f.devices(); n != 0 || len(f.reloaded) != 2 {
		t.Fatalf("%d devices after the code's replay (index reloaded %d times), want its device revoked", n, len(f.reloaded))
	}
}

// Bad input: a code of a user disabled meanwhile is invalid_grant.
func TestCodeOfAUserDisabledMeanwhileIsInvalidGrant(t *testing.T) {
	f := newCodeFixture(t)
	code, _ := f.approve(goodQuery())
	if _, err := f.users.SetDisabled(f.ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	if _, oerr := f.redeem(goodExchange(code)); oerr == nil || oerr.Code != client.ErrInvalidGrant {
		t.Fatalf("a disabled user's code: %v, want invalid_grant", oerr)
	}
	if f.devices() != 0 {
		t.Fatal("a device was made for a disabled user")
	}
}

func TestCodeRefusedForAnotherClientRedirectOrVerifierAndBurnt(t *testing.T) {
	for name, change := range map[string]func(*Exchange){
		"another client":       func(x *Exchange) { x.ClientID = "cocoonbox-app" },
		"another redirect URI": func(x *Exchange) { x.RedirectURI = "http://127.0.0.1:9/callback" },
		"another verifier":     func(x *Exchange) { x.Verifier = rfcVerifier[:42] + "x" },
		"an unknown code":      func(x *Exchange) { x.Code = "cbc_NOTACODE" },
	} {
		t.Run(name, func(t *testing.T) {
			f := newCodeFixture(t)
			code, _ := f.approve(goodQuery())
			x := goodExchange(code)
			change(&x)
			if _, oerr := f.redeem(x); oerr == nil || oerr.Code != client.ErrInvalidGrant {
				t.Fatalf("%v, want invalid_grant", oerr)
			}
			if f.devices() != 0 {
				t.Fatal("a device was made")
			}
			if name == "an unknown code" {
				return
			}
			// The first attempt burnt the code: the right exchange fails now too.
			if _, oerr := f.redeem(goodExchange(code)); oerr == nil {
				t.Fatal("a code that failed once was accepted afterwards")
			}
		})
	}
}

// The code lives 60 s (here: no time at all).
func TestExpiredCodeIsInvalidGrant(t *testing.T) {
	f := newCodeFixture(t)
	f.store.Lifetime = 0
	code, _ := f.approve(goodQuery())
	if _, oerr := f.redeem(goodExchange(code)); oerr == nil || oerr.Code != client.ErrInvalidGrant {
		t.Fatalf("an expired code: %v, want invalid_grant", oerr)
	}
}
