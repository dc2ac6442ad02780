package connect

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/pgnotify"
)

// Channel is where Connect's events reach every api on the database
// (docs/connect.md, Replicas), with one of these payloads:
//
//	approval:<id>  approval id was answered (its row holds the decision)
//	grant:<id>     grant id was disconnected: its open door calls end
//	user:<uuid>    the user signed out everywhere: their open door calls end
const Channel = "cocoonbox_connect"

// Follow LISTENs on Channel (api/pgnotify: reconnecting, and after each
// reconnect every approval waiting here and every grant with a call open
// here looked at again) until ctx ends: an answer given on any api
// reaches the call waiting here, and a disconnect or sign out everywhere
// on any api ends the door calls open here. It returns once the LISTEN is
// up, with a func that waits for its end; the error is the first
// connection's.
func (b *Broker) Follow(ctx context.Context, url string, log *slog.Logger) (func(), error) {
	l, err := pgnotify.Listen(ctx, pgnotify.Config{
		URL: url, Channels: []string{Channel}, Name: "connect", Everything: "every waiting approval and open call's grant", Log: log,
		// Each event is one-way (an answer is given once, a deleted
		// grant's id never comes back), so reloads need no order.
		Reload: b.reload,
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { defer close(done); l.Follow(ctx) }()
	return func() { <-done }, nil
}

// reload acts on one of Channel's payloads, or on "" looks again at
// everything a lost notification could have named: the answers of the
// approvals waiting here, the grants of the calls open here. A sign out
// everywhere's notification lost is not looked for: the revoke of the
// tokens it ends every door call's with reaches this api through the
// token index.
func (b *Broker) reload(ctx context.Context, payload string) error {
	kind, id, _ := strings.Cut(payload, ":")
	switch kind {
	case "approval":
		return b.deliver(ctx, id)
	case "grant":
		b.open.end(func(c *openCall) bool { return c.grant == id }, ErrDisconnected)
		return nil
	case "user":
		b.open.end(func(c *openCall) bool { return c.user == id }, ErrSignedOut)
		return nil
	case "":
		for _, id := range b.waitingIDs() {
			if err := b.deliver(ctx, id); err != nil {
				return err
			}
		}
		return b.endGone(ctx)
	}
	return fmt.Errorf("%s: an unknown payload %q", Channel, payload)
}

// endGone ends the open calls whose grant is gone.
func (b *Broker) endGone(ctx context.Context) error {
	open := b.open.grants()
	if len(open) == 0 {
		return nil
	}
	rows, err := b.pool.Query(ctx, "SELECT id FROM connect_grants WHERE id = ANY($1)", open)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, id := range ids {
		live[id] = true
	}
	b.open.end(func(c *openCall) bool { return !live[c.grant] }, ErrDisconnected)
	return nil
}

// EndUser tells every api, when tx commits, that userID signed out
// everywhere, so that each ends the user's door calls open there with
// ErrSignedOut (Contract: Sign out everywhere). Apis without Connect
// are not listening, and nothing is lost.
func EndUser(ctx context.Context, tx pgx.Tx, userID string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, 'user:' || $2)", Channel, userID); err != nil {
		return fmt.Errorf("tell the apis that %s signed out everywhere: %w", userID, err)
	}
	return nil
}
