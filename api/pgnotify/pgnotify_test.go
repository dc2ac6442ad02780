package pgnotify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// index is a stand-in for an index: it records each Reload's and each
// Notified's payload, and fails the reloads of the payload "fail".
type index struct{ reloads, notified chan string }

func (ix *index) reload(_ context.Context, payload string) error {
	ix.reloads <- payload
	if payload == "fail" {
		return errors.New("a payload that names nobody")
	}
	return nil
}

// expect waits for the next payload on ch, failing the test when it is
// not want or when none comes within 10 s.
func expect(t *testing.T, ch chan string, want, what string) {
	t.Helper()
	select {
	case p := <-ch:
		if p != want {
			t.Fatalf("%s: got %q, want %q (\"\" is everything)", what, p, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10 s", what)
	}
}

// follow starts a Listener on two channels of a fresh database; the
// first full reload is done when it returns.
func follow(t *testing.T) (*dbtest.DB, *index) {
	t.Helper()
	db := dbtest.New(t)
	ix := &index{reloads: make(chan string, 16), notified: make(chan string, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Listen(ctx, Config{URL: db.URL, Channels: []string{"pgnotify_a", "pgnotify_b"}, Name: "test index",
		Everything: "everything", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Reload: ix.reload, Notified: func(p string) { ix.notified <- p }})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ix.reloads, "", "first reload")
	done := make(chan struct{})
	go func() { defer close(done); l.Follow(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return db, ix
}

func notify(t *testing.T, db *dbtest.DB, channel, payload string) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		t.Fatal(err)
	}
}

func TestANotificationOnEachChannelReloadsItsPayload(t *testing.T) {
	t.Parallel()
	db, ix := follow(t)
	for _, c := range []struct{ channel, payload string }{{"pgnotify_a", "alice"}, {"pgnotify_b", "bob"}} {
		notify(t, db, c.channel, c.payload)
		expect(t, ix.reloads, c.payload, "reload on "+c.channel)
		expect(t, ix.notified, c.payload, "Notified on "+c.channel)
	}
	// Another channel is not followed: a notification there, then one on
	// ours, reloads ours only.
	notify(t, db, "pgnotify_other", "carol")
	notify(t, db, "pgnotify_a", "dave")
	expect(t, ix.reloads, "dave", "reload")
}

// A lost LISTEN connection is made again and followed by a full reload
// (what was notified meanwhile is lost), then notifications come again.
func TestALostConnectionIsMadeAgainAndReloadsEverything(t *testing.T) {
	t.Parallel()
	db, ix := follow(t)
	var killed int
	err := db.Pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d LISTEN connections, %v", killed, err)
	}
	expect(t, ix.reloads, "", "reload after the reconnect")
	notify(t, db, "pgnotify_b", "alice")
	expect(t, ix.reloads, "alice", "reload after a notification on the new connection")
}

// A notification whose reload fails leaves the index possibly stale: the
// connection is made again and everything reloaded, and Notified does not
// run for it.
func TestAFailedReloadReloadsEverything(t *testing.T) {
	t.Parallel()
	db, ix := follow(t)
	notify(t, db, "pgnotify_a", "fail")
	expect(t, ix.reloads, "fail", "the failing reload")
	expect(t, ix.reloads, "", "the full reload after it")
	notify(t, db, "pgnotify_a", "alice")
	expect(t, ix.notified, "alice", "Notified after the reconnect")
}

// Listen fails, and keeps no connection, when the first reload fails or
// the database cannot be reached.
func TestListenFailsWhenTheFirstReloadOrTheConnectionDoes(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	bad := errors.New("the first load failed")
	_, err := Listen(ctx, Config{URL: db.URL, Channels: []string{"pgnotify_a"}, Name: "test index", Log: log,
		Reload: func(context.Context, string) error { return bad }})
	if !errors.Is(err, bad) {
		t.Fatalf("Listen with a failing first reload: %v, want %v", err, bad)
	}
	// The backend ends a moment after the client closes: wait for it.
	wait.Eventually(t, 10*time.Second, "no LISTEN connection left open after the failed Listen", func() (bool, string) {
		var listening int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&listening); err != nil {
			return false, err.Error()
		}
		return listening == 0, fmt.Sprint(listening, " open")
	})
	_, err = Listen(ctx, Config{URL: db.URL, Channels: []string{"no such channel"}, Name: "test index", Log: log,
		Reload: func(context.Context, string) error { return nil }})
	if err == nil {
		t.Fatal("Listen on a channel name that is not an identifier succeeded")
	}
}
