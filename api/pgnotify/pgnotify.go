// Package pgnotify keeps an api's in-memory index (api/tokens' token
// index, api/oauth's grants) current across api replicas through
// PostgreSQL's LISTEN/NOTIFY: one connection of its own LISTENs on the
// index's channels, each notification reloads what its payload names (a
// user's id), and after a lost connection it connects again, backing off
// up to 5 s, and reloads everything, since what was notified meanwhile is
// lost. A reload after a notification that fails (a payload that names
// nobody, say) is answered the same way: the index may be stale, so it is
// reloaded whole.
//
// The reloads are the index's own (Config.Reload), and stores call the
// same Reload after their own commits. So Reload must be serialized from
// its query to its last change (the index's mutex, held across both):
// else a snapshot read before a commit can be applied after one read
// since, and a revoked token or grant works again until the next reload.
//
// Contract: Browser sign-in and device tokens (a revoke reaches every api);
// OAuth for agents (a grant's revoke reaches every api).
package pgnotify

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Config is what a Listener follows and whom it tells.
type Config struct {
	// URL is the database's, for the LISTEN connection (kept apart from
	// the index's pool).
	URL string
	// Channels are LISTENed on (PostgreSQL identifiers, ours).
	Channels []string
	// Name names the index in log lines and errors ("token index"), and
	// Everything what a full reload reloads ("every token").
	Name, Everything string
	Log              *slog.Logger
	// Reload makes the index agree with the database for a notification's
	// payload, or with everything for "". It must be serialized from its
	// query to its last change (see the package doc).
	Reload func(ctx context.Context, payload string) error
	// Notified, when set, runs after each notification's Reload with its
	// payload, unless that Reload failed and a full reload follows (it
	// never runs after a full reload).
	Notified func(payload string)
}

// Listener is a LISTEN connection and the index it keeps current.
type Listener struct {
	cfg  Config
	conn *pgx.Conn
}

// Listen connects, LISTENs on cfg.Channels and then reloads everything,
// in that order, so no change committed between the reload and the LISTEN
// is missed. Follow then keeps the index current.
func Listen(ctx context.Context, cfg Config) (*Listener, error) {
	l := &Listener{cfg: cfg}
	if err := l.connect(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Listener) connect(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, l.cfg.URL)
	if err != nil {
		return fmt.Errorf("%s: connect: %w", l.cfg.Name, err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+strings.Join(l.cfg.Channels, "; LISTEN ")); err != nil {
		conn.Close(ctx)
		return fmt.Errorf("%s: listen: %w", l.cfg.Name, err)
	}
	if err := l.cfg.Reload(ctx, ""); err != nil {
		conn.Close(ctx)
		return err
	}
	l.conn = conn
	return nil
}

// Follow reloads on each notification until ctx ends, making the
// connection again when it is lost or a reload fails (each time followed
// by a full reload), and closes it when ctx ends.
func (l *Listener) Follow(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		for l.conn != nil {
			n, err := l.conn.WaitForNotification(ctx)
			if err != nil {
				if ctx.Err() == nil {
					l.cfg.Log.Warn(l.cfg.Name+": lost the LISTEN connection; reconnecting, then reloading "+l.cfg.Everything, "err", err)
				}
				l.close()
				break
			}
			backoff = 100 * time.Millisecond
			if err := l.cfg.Reload(ctx, n.Payload); err != nil && ctx.Err() == nil {
				// The index may be stale: reload it all.
				l.cfg.Log.Warn(l.cfg.Name+": reload after a notification failed; reloading "+l.cfg.Everything, "payload", n.Payload, "err", err)
				l.close()
				break
			}
			if l.cfg.Notified != nil {
				l.cfg.Notified(n.Payload)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		if err := l.connect(ctx); err != nil && ctx.Err() == nil {
			l.cfg.Log.Warn(l.cfg.Name+": reconnect failed", "err", err, "retry_in", backoff)
		}
	}
}

func (l *Listener) close() {
	l.conn.Close(context.Background())
	l.conn = nil
}
