package connect

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/server"
)

// BoxDoorPath is the box door's path (CONNECT_URL in agent.env,
// http://10.203.0.1:18091/mcp; Contract: Connect, "Box door (mode A)").
const BoxDoorPath = "/mcp"

// ErrDoorKey is what a DoorKeyCheck answers (wrapped) for a key that
// opens nothing; any other error is the check's own failure.
var ErrDoorKey = errors.New("not a current door key")

// DoorKeyCheck answers the owner and the id of the box whose current
// door key key is (api/boxes' Service.CheckDoorKey): a key of a previous
// incarnation, of a deleted box or of an agent box, or none, is
// ErrDoorKey (wrapped).
type DoorKeyCheck func(ctx context.Context, key string) (owner, box string, err error)

// BoxDoor is the box door's handler (Contract: Connect, "Box door (mode
// A, design §16.3; the same handler with door = box)"): POST, GET and
// DELETE on BoxDoorPath with "Authorization: Bearer <door key>" (the
// box's CONNECT_KEY claim env entry), served exactly as the mode B door
// (Door) for the box's owner, each call audited with door "box" and
// caller "box:<box id>". A request without a current key gets 401 with no
// body; one whose key cannot be checked (the database) 503 with no body;
// another path 404. Serve it on connect.box_listen, on the host bridge:
// only boxes reach it, and the key says which.
func (b *Broker) BoxDoor(check DoorKeyCheck, log *slog.Logger) http.Handler {
	mcpH := b.mcpHandler(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != BoxDoorPath {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || key == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		owner, box, err := check(r.Context(), key)
		if errors.Is(err, ErrDoorKey) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if err != nil {
			log.Warn("connect box door: the key could not be checked", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		server.SetUser(r.Context(), owner)
		ctx := context.WithValue(r.Context(), callerKey{}, doorCaller{user: owner, door: DoorBox, caller: "box:" + box, token: context.Background()})
		mcpH.ServeHTTP(w, r.WithContext(ctx))
	})
}
