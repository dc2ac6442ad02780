// Package boxes is the api's half of the boxes' lifecycle: the boxes table,
// their operations and event log in PostgreSQL, and the operation runner
// that drives a supervisor (package sandbox) to create, boot, wake,
// hibernate, save, upgrade and delete them.
//
// Contract: Boxes (api) ↔ sandboxd; Box identity (written at every boot and
// wake); Journal (a new /etc/machine-id at every wake); Box API keys (the
// claim env entries); Control MCP (the states and phases).
//
// An operation is a row first and work second: the call that begins it
// commits the row (its request id unique per user, at most one operation
// under way per box by a unique index) and returns, and a runner goroutine
// does the work, writing each phase and state as an event. Runners of one
// box take turns on a PostgreSQL advisory lock, so two apis on one database
// never act on one box at once; an api that dies mid-operation leaves its
// instance lock free, and any api adopts and finishes (or fails) what it
// left (recover.go). docs/box-lifecycle.md tells the whole story.
package boxes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/steps"
)

// Config is what a Service is built from.
type Config struct {
	// Pool is the api's database (migrated with Schema); URL is its
	// connection URL, for the LISTEN and the instance lock's connections.
	Pool *pgxpool.Pool
	URL  string
	// Hosts are the supervisors by host name (at least one); a new box goes
	// to the one holding the fewest boxes, and stays there.
	Hosts map[string]sandbox.Supervisor
	// RecoverEvery is how often the api looks for operations a dead api
	// left and sweeps a deleted user's leftovers (api.yaml's
	// boxes.recover_every; 0 is 15 s; it also looks once at start).
	RecoverEvery time.Duration
	// Keys answers a user's key vault entries (nil: no vault, every box's
	// COCOONBOX_VAULT empty). InterceptFrom is the first image version
	// whose boxes get them (0: DefaultInterceptFrom).
	Keys          Keys
	InterceptFrom int
	// KeepUp says whether a box's scheduled wake is on (SleepAt ahead):
	// idle hibernate leaves such a user box up (api/wake's Store.KeepUp;
	// nil: none is).
	KeepUp func(ctx context.Context, boxID string) (bool, error)
	// GW answers the owner's gw key as the host-only claim env entry
	// every box of the owner gets, an agent box and an image that does
	// not intercept too (api/usage's Entry; nil: no gw, no key).
	GW GWKey
	// ConnectDoor gives every box but an agent box the door key of its
	// incarnation, a new one at every boot and wake (DoorKeyEntry;
	// CheckDoorKey checks it; api.yaml's connect.box_listen set).
	ConnectDoor bool
	// MaxOperations bounds the operations this api runs at once (api.yaml's
	// boxes.max_operations; 0 is DefaultMaxOperations): each holds one
	// connection of a pool of that size, opened beside Pool, so calls and
	// reads on Pool never wait behind operations. MaxQueued bounds those
	// waiting for a turn (boxes.max_queued; 0 is
	// DefaultMaxQueued): a call past it is ErrLimit. Adopted operations
	// queue past it.
	MaxOperations, MaxQueued int
	// Idle is idle hibernate's (idle.go; zero: off).
	Idle Idle
	// State, when set, is the state store box saves also go into and
	// restores come from on any host (statesaves.go; nil: disk-level
	// saves only).
	State *State
	Log   *slog.Logger
}

// The defaults of Config's bounds (api.yaml's boxes.max_operations and
// boxes.max_queued).
const (
	DefaultMaxOperations = 4
	DefaultMaxQueued     = 256
)

// Service is the boxes of every user of one database. Its methods are safe
// for concurrent use.
type Service struct {
	pool     *pgxpool.Pool
	ops      *pgxpool.Pool // the operations' own connections, one each
	hosts    map[string]sandbox.Supervisor
	names    []string // host names, sorted
	instance string   // this api's runner id (api- and 16 hex)
	lockConn *pgx.Conn
	events   *notifier
	log      *slog.Logger
	every    time.Duration
	// keys, interceptFrom and keyLocks (owner → *sync.Mutex): keys.go.
	keys          Keys
	interceptFrom int
	gw            GWKey
	keepUp        func(ctx context.Context, boxID string) (bool, error)
	keyLocks      sync.Map
	// door says boxes get a Connect box door key (Config.ConnectDoor);
	// wakes are the incarnations this api provisions (doorkey.go).
	door  bool
	wakes incarnations
	// idle and calls: idle.go.
	idle  Idle
	calls calls
	// state: statesaves.go.
	state *State
	// idleChecks counts the idle checks done (the tests wait on it).
	idleChecks atomic.Int64

	// slots holds a token per operation in flight (cap: MaxOperations);
	// pending counts this api's operations queued or in flight, at most
	// maxPending (MaxOperations + MaxQueued) for new calls.
	slots      chan struct{}
	pending    atomic.Int64
	maxPending int64

	// onSteps, when set (the benchmarks), gets each ended operation's
	// steps (steps.Timeline).
	onSteps func(op *Operation, tl *steps.Timeline)

	ctx  context.Context // ends at Close: runners stop and leave their operation to recovery
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New starts the service: it takes this api's instance lock, LISTENs on
// Channel, and starts recovery (at once, then every RecoverEvery). Close
// stops it.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("boxes: no supervisor host configured")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.RecoverEvery == 0 {
		cfg.RecoverEvery = 15 * time.Second
	}
	if cfg.InterceptFrom == 0 {
		cfg.InterceptFrom = DefaultInterceptFrom
	}
	if cfg.MaxOperations == 0 {
		cfg.MaxOperations = DefaultMaxOperations
	}
	if cfg.MaxQueued == 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	if cfg.Idle.Every == 0 {
		cfg.Idle.Every = DefaultIdleEvery
	}
	s := &Service{pool: cfg.Pool, hosts: cfg.Hosts, names: slices.Sorted(maps.Keys(cfg.Hosts)),
		instance: newID("api-"), log: cfg.Log, every: cfg.RecoverEvery, keys: cfg.Keys, interceptFrom: cfg.InterceptFrom, gw: cfg.GW, door: cfg.ConnectDoor, keepUp: cfg.KeepUp,
		slots: make(chan struct{}, cfg.MaxOperations), maxPending: int64(cfg.MaxOperations + cfg.MaxQueued), idle: cfg.Idle, state: cfg.State,
		calls: calls{open: map[string]int{}, moved: map[string]bool{}, written: map[string]time.Time{}}}
	pc := cfg.Pool.Config() // a copy: the same database, tracer and settings
	pc.MaxConns, pc.MinConns = int32(cfg.MaxOperations), 0
	ops, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("boxes: the operations' pool: %w", err)
	}
	conn, err := pgx.Connect(ctx, cfg.URL)
	if err != nil {
		ops.Close()
		return nil, fmt.Errorf("boxes: connect for the instance lock: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey("instance", s.instance)); err != nil {
		conn.Close(ctx)
		ops.Close()
		return nil, fmt.Errorf("boxes: instance lock: %w", err)
	}
	s.ops, s.lockConn = ops, conn
	s.ctx, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	if s.events, err = listen(s.ctx, cfg.URL, cfg.Log); err != nil {
		conn.Close(ctx)
		ops.Close()
		return nil, err
	}
	s.log.Info("boxes: recovery at start, then every recover_every", "recover_every", s.every.String(), "hosts", s.names,
		"max_operations", cfg.MaxOperations, "max_queued", cfg.MaxQueued)
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.recoverLoop() }()
	if cfg.Idle.Agent > 0 || cfg.Idle.User > 0 {
		s.log.Info("boxes: idle hibernate", "agent_boxes", cfg.Idle.Agent.String(), "user_boxes", cfg.Idle.User.String(), "every", cfg.Idle.Every.String())
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.idleLoop() }()
	}
	return s, nil
}

// Close stops the runners (an operation they leave unfinished, queued or
// mid-step, stays under way for the next api's recovery), the LISTEN, the
// operations' pool and the instance lock.
func (s *Service) Close() {
	s.stop()
	s.wg.Wait()
	s.events.wait()
	s.ops.Close()
	s.lockConn.Close(context.Background())
}

// supervisor is the supervisor of a host the database names.
func (s *Service) supervisor(host string) (sandbox.Supervisor, error) {
	sup, ok := s.hosts[host]
	if !ok {
		return nil, fmt.Errorf("host %q holds the box but is not in this api's sandbox.hosts: %w", host, ErrUnavailable)
	}
	return sup, nil
}

// Located is a box as Locate finds it.
type Located struct {
	BoxID, Name string
	// State is the box's state (Running unless the error is ErrNotRunning).
	State string
	// MachineID is the box's /etc/machine-id as the api last wrote or read
	// it (32 hex digits), Host the supervisor's name, Incarnation its boots.
	MachineID, Host string
	Incarnation     int64
	// Supervisor holds the machine, whose id there is BoxID.
	Supervisor sandbox.Supervisor
}

// Locate finds the user's box named by box (a box id, a name, or "" for
// the user's oldest box) and the supervisor holding it, for a caller that
// acts inside it (Session.Exec, the MCP). Errors: ErrInvalid (box is
// neither an id nor a name), ErrNotFound (no such box of this user),
// ErrNotRunning (Located is filled, the box is in another state),
// ErrUnavailable (its host is not configured here).
func (s *Service) Locate(ctx context.Context, userID, box string) (Located, error) {
	b, err := findBox(ctx, s.pool, userID, box, false)
	if err != nil {
		return Located{}, err
	}
	s.touch(ctx, b.ID)
	sup, err := s.supervisor(b.Host)
	if err != nil {
		return Located{}, err
	}
	l := Located{BoxID: b.ID, Name: b.Name, State: b.State, MachineID: b.MachineID, Host: b.Host,
		Incarnation: b.Incarnation, Supervisor: sup}
	if b.State != Running {
		return l, fmt.Errorf("box %s is %s: %w", b.Name, b.State, ErrNotRunning)
	}
	return l, nil
}
