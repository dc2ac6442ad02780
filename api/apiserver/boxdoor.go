package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
)

// lateHandler is the Connect box door, which the local supervisor's egress
// proxy must know when it starts, before Connect's broker is made: 401
// with no body until set, as a door with no key would answer.
type lateHandler struct {
	h   atomic.Pointer[http.Handler]
	srv *http.Server
}

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.WriteHeader(http.StatusUnauthorized)
}

// doors is the local supervisor's Config.Doors: the box door at
// connect.box_listen when it is on, else none.
func (l *lateHandler) doors(c config.Connect) map[string]http.Handler {
	if !c.BoxDoor() {
		return nil
	}
	return map[string]http.Handler{c.BoxListen: l}
}

// stop ends the box door's listener, if it has one.
func (l *lateHandler) stop() {
	if l.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.srv.Shutdown(ctx)
	}
}

// serveBoxDoor serves the Connect box door (Contract: Connect, "Box door
// (mode A)"; connect.BoxDoor) on connect.box_listen when Connect is on and
// it is set, its keys checked by the box service (boxes'
// Service.CheckDoorKey), and answers where it listens. An address this
// host cannot listen on (no bridge: no local supervisor here, or not yet)
// is a warning and no box door, as a supervisor that does not start is
// for boxes. The same handler answers the egress proxy's requests to it.
func serveBoxDoor(broker *connect.Broker, bh *boxes.Handler, c config.Connect, door *lateHandler, log *slog.Logger) (net.Addr, error) {
	if broker == nil || !c.BoxDoor() {
		return nil, nil
	}
	h := broker.BoxDoor(doorKeyCheck(bh), log)
	door.h.Store(&h)
	ln, err := net.Listen("tcp", c.BoxListen)
	if err != nil {
		log.Warn("connect: no box door on this host: connect.box_listen cannot be listened on (is the local supervisor's bridge up here?)", "box_listen", c.BoxListen, "err", err)
		return nil, nil
	}
	door.srv = &http.Server{Handler: door, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = door.srv.Serve(ln) }()
	log.Info("connect: the box door", "addr", ln.Addr().String(), "path", connect.BoxDoorPath)
	return ln.Addr(), nil
}

// doorKeyCheck is the box door's key check on bh's service: an api without
// boxes has no box, so no key opens it.
func doorKeyCheck(bh *boxes.Handler) connect.DoorKeyCheck {
	return func(ctx context.Context, key string) (string, string, error) {
		svc, err := bh.Service()
		if err != nil {
			return "", "", fmt.Errorf("no boxes here: %w", connect.ErrDoorKey)
		}
		owner, box, err := svc.CheckDoorKey(ctx, key)
		if errors.Is(err, boxes.ErrDoorKey) {
			return "", "", fmt.Errorf("%w: %w", connect.ErrDoorKey, err)
		}
		return owner, box, err
	}
}
