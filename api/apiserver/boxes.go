package apiserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/boxpage"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/usage"
	"github.com/cocoonbox/cocoonbox/api/wake"
)

// localHost is the host name of the in-process supervisor.
const localHost = "local"

// bridgeWait bounds the wait for the local supervisor's bridge: another
// supervisor holding it (a second api on this host) leaves this api
// without boxes rather than without a start.
const bridgeWait = 5 * time.Second

// mountBoxes starts the boxes (Contract: Boxes (api) ↔ sandboxd) on the
// configured supervisors and mounts cocoonbox.control.v1.Boxes behind the
// token check. An api whose supervisor does not start (not root, the
// bridge held by another) serves the rest and answers every Boxes call
// UNAVAILABLE with why. sups, when not nil, answers the supervisors in
// place of the configured ones (Options.Supervisors). The handler is what
// the rest of the api calls in process (its Service for Locate and
// WaitOperation), the scheduler of wakes (nil without a supervisor); the
// returned func stops the service and the local supervisor. doors are the
// gateway's services the api serves itself, which the local supervisor's
// egress proxy answers for the boxes (local.Config.Doors).
func mountBoxes(ctx context.Context, srv *server.Server, cfg config.Config, sups supervisorsFunc, db *database.DB, index *tokens.Index, keys boxes.Keys, state *boxes.State, models *usage.Service, wakes *wake.Store, schedules *wake.Service, doors map[string]http.Handler, log *slog.Logger) (*boxes.Handler, *wake.Scheduler, func()) {
	if sups == nil {
		sups = func(ctx context.Context, log *slog.Logger) (map[string]sandbox.Supervisor, func(), error) {
			return supervisors(ctx, cfg.Sandbox, cfg.GW.URL, doors, log)
		}
	}
	h, sc, stop, err := startBoxes(ctx, cfg, sups, db, keys, state, models, wakes, log)
	if err != nil {
		log.Warn("boxes: no supervisor; every Boxes call answers unavailable", "err", err)
		h, stop = boxes.Unavailable(fmt.Errorf("this api has no box supervisor: %w", err)), func() {}
	}
	if _, usageOf := usageHooks(models); usageOf != nil {
		h = h.WithUsage(usageOf, tokens.UserID, log)
	}
	path, handler := controlv1connect.NewBoxesHandler(h, append(callOptions(index), connect.WithInterceptors(h.CallInterceptor()))...)
	srv.Handle(path, index.Guard(handler))
	path, handler = controlv1connect.NewSchedulesHandler(schedules, callOptions(index)...)
	srv.Handle(path, index.Guard(handler))
	return h, sc, stop
}

// supervisorsFunc answers the box supervisors by host name and a func
// that closes them.
type supervisorsFunc = func(ctx context.Context, log *slog.Logger) (map[string]sandbox.Supervisor, func(), error)

// startBoxes starts the boxes service on sups' hosts and the scheduled
// wake on schedules (the idle check asks them whether SleepAt is ahead),
// answering the scheduler too.
func startBoxes(ctx context.Context, cfg config.Config, sups supervisorsFunc, db *database.DB, keys boxes.Keys, state *boxes.State, models *usage.Service, schedules *wake.Store, log *slog.Logger) (*boxes.Handler, *wake.Scheduler, func(), error) {
	hosts, closeHosts, err := sups(ctx, log)
	if err != nil {
		return nil, nil, nil, err
	}
	gwKey, _ := usageHooks(models)
	svc, err := boxes.New(ctx, boxes.Config{Pool: db.Pool, URL: db.URL, Hosts: hosts, RecoverEvery: cfg.Boxes.RecoverEvery,
		MaxOperations: cfg.Boxes.MaxOperations, MaxQueued: cfg.Boxes.MaxQueued, Keys: keys, GW: gwKey, ConnectDoor: cfg.Connect.BoxDoor(), KeepUp: schedules.KeepUp, State: state, Log: log,
		Idle: boxes.Idle{Agent: cfg.OAuth.IdleHibernate, User: cfg.OAuth.UserIdleHibernate, Every: cfg.OAuth.IdleCheckEvery}})
	if err != nil {
		closeHosts()
		return nil, nil, nil, err
	}
	wakeCtx, stopWake := context.WithCancel(ctx)
	sc := wake.NewScheduler(schedules, func(ctx context.Context, user, box, req string) error {
		_, _, err := svc.Ensure(ctx, boxes.Call{UserID: user, RequestID: req, Box: box})
		return err
	}, log)
	done := make(chan struct{})
	go func() { sc.Run(wakeCtx, wakeEvery); close(done) }()
	return boxes.NewHandler(svc, tokens.UserID, log), sc, func() { stopWake(); <-done; svc.Close(); closeHosts() }, nil
}

// mountWakeConsole serves the console's Schedules page and its calls
// (wake.Console) on st, the store the Schedules service answers from;
// without a supervisor too, as that service is (a schedule wakes its box
// once the api has one).
func mountWakeConsole(srv *server.Server, st *wake.Store, con *console.Console, log *slog.Logger) {
	wake.NewConsole(st, con.UserID, log).Mount(srv)
	con.AddSection(console.Section{Title: "Schedules", Path: "/cb/schedules", Blurb: "When your boxes wake by themselves, and how long they stay up after.", Page: &wake.Page})
}

// mountBoxesConsole serves the console's Boxes page and its calls
// (package boxpage) on bh's service; without a supervisor too, where the
// page says boxes are not available and each call answers so.
func mountBoxesConsole(srv *server.Server, bh *boxes.Handler, con *console.Console, log *slog.Logger) {
	boxpage.NewConsole(bh.Service, con.UserID, log).Mount(srv)
	con.AddSection(console.Section{Title: "Boxes", Path: boxpage.Path, Blurb: "Your boxes and their screens: wake, hibernate, save, upgrade and delete them.", Page: &boxpage.Page})
}

// wakeEvery is how often each api looks for due scheduled wakes (Contract:
// Scheduled wake; a box wakes within about this of its time).
const wakeEvery = time.Second

// supervisors are sandbox.hosts' daemons, or the local supervisor.
func supervisors(ctx context.Context, c config.Sandbox, gwURL string, doors map[string]http.Handler, log *slog.Logger) (map[string]sandbox.Supervisor, func(), error) {
	if len(c.Hosts) == 0 {
		// Absolute (config.Local.Images): never the working directory's.
		images := c.Local.Images
		if _, err := os.Stat(images); err != nil {
			return nil, nil, fmt.Errorf("sandbox.local.images (%s): %w (make image builds out/images)", c.Local.ImagesFrom, err)
		}
		n := local.DefaultNetwork()
		n.Bridge, n.Gateway = c.Local.Bridge, netip.MustParsePrefix(c.Local.Gateway)
		wait, cancel := context.WithTimeout(ctx, bridgeWait)
		defer cancel()
		sup, err := local.New(wait, local.Config{StateDir: c.Local.StateDir, Images: images, Network: n, EgressAdmit: c.Local.AdmitPrefixes(), Log: log, Spares: c.Local.Spares,
			EgressResolve: c.Local.Egress.ResolveAddrs(), EgressUpstreamCAFile: c.Local.Egress.UpstreamCAFile, GWURL: gwURL, Doors: doors})
		if err != nil {
			return nil, nil, fmt.Errorf("local supervisor: %w", err)
		}
		log.Info("boxes: the local supervisor", "images", images, "images_from", c.Local.ImagesFrom, "state_dir", c.Local.StateDir, "bridge", n.Bridge, "proxy", sup.ProxyURL(), "spares", c.Local.Spares)
		return map[string]sandbox.Supervisor{localHost: sup}, func() { sup.Close() }, nil
	}
	token := ""
	if c.TokenFile != "" {
		f, err := os.Open(c.TokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox.token_file: %w", err)
		}
		line, _ := bufio.NewReader(f).ReadString('\n')
		f.Close()
		token = strings.TrimSpace(line)
	}
	var roots *tls.Config
	if c.CAFile != "" {
		var err error
		if roots, err = wire.ClientTLS(c.CAFile); err != nil {
			return nil, nil, fmt.Errorf("sandbox.ca_file: %w", err)
		}
	}
	hosts := map[string]sandbox.Supervisor{}
	for name, u := range c.Hosts {
		base, socket, err := config.SandboxdURL(u)
		if err != nil {
			return nil, nil, err
		}
		hc := wire.H2CClient(socket, token, c.PingAfter)
		if strings.HasPrefix(base, "https://") {
			hc = wire.TLSClient(roots, token, c.PingAfter)
		}
		hosts[name] = wire.NewClient(hc, base)
	}
	return hosts, func() {}, nil
}

// homeBoxes lists a user's boxes for the console's home and Boxes pages:
// each box's state, image, last save, the kind of its operation under
// way and the newer image of its tier, when there is one.
func homeBoxes(h *boxes.Handler) console.BoxLister {
	return func(ctx context.Context, userID string) ([]console.BoxSummary, error) {
		svc, err := h.Service()
		if err != nil {
			return nil, err
		}
		bs, err := svc.List(ctx, userID)
		if err != nil {
			return nil, err
		}
		out := make([]console.BoxSummary, 0, len(bs))
		for _, b := range bs {
			s := console.BoxSummary{Name: b.Name, State: b.State, Image: b.Image, Agent: b.Agent}
			if !b.SavedAt.IsZero() {
				saved := b.SavedAt
				s.SavedAt = &saved
			}
			// A host that does not answer leaves the notice out, not the list.
			if latest, newer, err := svc.LatestFor(ctx, b); err == nil && newer {
				s.Upgrade = latest
			}
			if b.OperationID != "" {
				// Ended between the list and this read: none to show.
				if op, err := svc.Operation(ctx, userID, b.OperationID); err == nil {
					s.Operation = op.Kind
				} else if !errors.Is(err, boxes.ErrNotFound) {
					return nil, err
				}
			}
			out = append(out, s)
		}
		return out, nil
	}
}
