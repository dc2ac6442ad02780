package shares

import (
	"context"
	"log/slog"

	"github.com/cocoonbox/cocoonbox/api/pgnotify"
)

// Channel is where a revoke is NOTIFYed (the share's id), so every api
// ends the viewers it holds of that share, not only the one that served
// the revoke.
const Channel = "cocoonbox_shares"

// Follow LISTENs on Channel (api/pgnotify: reconnecting, and after each
// reconnect every open viewer's share looked at again) and ends this
// api's viewers of each share revoked on any api, until ctx ends. It
// returns once the LISTEN is up, with a func that waits for its end;
// the error is the first connection's.
func Follow(ctx context.Context, url string, st *Store, live *Viewers, log *slog.Logger) (func(), error) {
	l, err := pgnotify.Listen(ctx, pgnotify.Config{
		URL: url, Channels: []string{Channel}, Name: "share viewers", Everything: "every open viewer's share", Log: log,
		// Idempotent and one-way (a revoked share stays revoked), so
		// reloads need no order among themselves.
		Reload: func(ctx context.Context, id string) error {
			ids := []string{id}
			if id == "" {
				ids = live.Shares()
			}
			for _, id := range ids {
				ok, err := st.Still(ctx, id)
				if err != nil {
					return err
				}
				if !ok {
					live.Revoke(id)
				}
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { defer close(done); l.Follow(ctx) }()
	return func() { <-done }, nil
}
