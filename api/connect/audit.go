package connect

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// AuditRetention is how long connect_audit keeps a row (Contract:
// Connect, Audit).
const AuditRetention = 90 * 24 * time.Hour

// auditLabel derives the key of the arguments' HMAC from the user's
// state key.
const auditLabel = "cocoonbox connect audit"

// MaxActivity bounds the rows one activity answer lists, newest first.
const MaxActivity = 500

// The audit's decisions (Contract: Connect, Audit): allow (a tool the
// policy allows, called), approved (an ask tool the user let through),
// denied (the user said deny), off (a call of a tool whose policy is
// off), approval_required (an ask tool's call that ended unanswered:
// the time ran out, the client went away or the connector left),
// needs_reconnect (the grant refused, or the connector already needing
// it), disconnect.
const (
	AuditAllow            = "allow"
	AuditApproved         = "approved"
	AuditDenied           = "denied"
	AuditOff              = "off"
	AuditApprovalRequired = "approval_required"
	AuditNeedsReconnect   = "needs_reconnect"
	AuditDisconnect       = "disconnect"
)

// The audit's outcomes: ok (the server answered a result that is no
// error, or the disconnect was done), error (a tool error, or the call
// refused before the server), outcome_unknown (the call reached the
// server and ended before its answer: whether it acted is not known).
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomeUnknown = "outcome_unknown"
)

// The doors of an audit row: DoorMCP is the mode B door, DoorBox the box
// door; a disconnect's is where it came from, DoorConsole or DoorApp
// (Connectors over gRPC).
const (
	DoorMCP     = "mcp"
	DoorBox     = "box"
	DoorConsole = "console"
	DoorApp     = "app"
)

// Activity is one connect_audit row as GET /cb/api/connect/activity
// answers it. It carries no argument, result or token: the arguments
// only as their length and keyed hash.
type Activity struct {
	Time      time.Time `json:"time"`
	Connector string    `json:"connector"`
	// Tool is the connector's tool ("" for a disconnect).
	Tool     string `json:"tool"`
	Door     string `json:"door"`
	Caller   string `json:"caller"`
	Decision string `json:"decision"`
	Outcome  string `json:"outcome"`
	// UpstreamStatus is the HTTP status of the server's last answer;
	// nil when the call never reached it.
	UpstreamStatus *int  `json:"upstream_status"`
	LatencyMS      int64 `json:"latency_ms"`
	RequestBytes   int64 `json:"request_bytes"`
	ResponseBytes  int64 `json:"response_bytes"`
	// ArgumentsHMAC is hex HMAC-SHA256 of the arguments' JSON under
	// HKDF-SHA256(user state key, "cocoonbox connect audit"); "" for a
	// disconnect.
	ArgumentsHMAC string `json:"arguments_hmac,omitempty"`

	args []byte
}

// caller is the audit's caller of a mode B door call: mcp: and the
// client's clientInfo.name, cut to 64 bytes of printable ASCII.
func caller(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, name)
	if len(name) > 64 {
		name = name[:64]
	}
	return "mcp:" + name
}

// audit writes a row for user by the api's clock; a.args, when set, goes
// in only as its keyed hash. It outlives ctx's end: the row of a call
// ended by its client is written too.
func (b *Broker) audit(ctx context.Context, user string, a Activity) error {
	ctx = context.WithoutCancel(ctx)
	var mac []byte
	if a.args != nil {
		sk, err := b.vault.StateKey(ctx, user)
		if err != nil {
			return err
		}
		key, err := hkdf.Key(sha256.New, sk, nil, auditLabel, 32)
		if err != nil {
			return err
		}
		h := hmac.New(sha256.New, key)
		h.Write(a.args)
		mac = h.Sum(nil)
	}
	_, err := b.pool.Exec(ctx, `INSERT INTO connect_audit (at, user_id, connector, tool, door, caller, decision, outcome,
			upstream_status, latency_ms, request_bytes, response_bytes, arguments_hmac)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		b.now(), user, a.Connector, a.Tool, a.Door, a.Caller, a.Decision, a.Outcome,
		a.UpstreamStatus, a.LatencyMS, a.RequestBytes, a.ResponseBytes, mac)
	if err != nil {
		return fmt.Errorf("connect_audit: %w", err)
	}
	return nil
}

// Activity answers user's audit rows, newest first, at most MaxActivity;
// connector, when not "", keeps that connector's alone (an *InputError
// when it is no connector id).
func (b *Broker) Activity(ctx context.Context, user, connector string) ([]Activity, error) {
	if connector != "" && !nameRule.MatchString(connector) {
		return nil, &InputError{"connector", fmt.Sprintf("%q is not ^[a-z][a-z0-9-]{0,23}$", connector)}
	}
	rows, err := b.pool.Query(ctx, `SELECT at, connector, tool, door, caller, decision, outcome, upstream_status,
			latency_ms, request_bytes, response_bytes, arguments_hmac
		FROM connect_audit WHERE user_id = $1 AND ($2 = '' OR connector = $2) ORDER BY at DESC, id DESC LIMIT $3`,
		user, connector, MaxActivity)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Activity{}
	for rows.Next() {
		var a Activity
		var mac []byte
		if err := rows.Scan(&a.Time, &a.Connector, &a.Tool, &a.Door, &a.Caller, &a.Decision, &a.Outcome, &a.UpstreamStatus,
			&a.LatencyMS, &a.RequestBytes, &a.ResponseBytes, &mac); err != nil {
			return nil, err
		}
		a.ArgumentsHMAC = hex.EncodeToString(mac)
		out = append(out, a)
	}
	return out, rows.Err()
}

// SweepAudit deletes the audit rows older than AuditRetention by the
// api's clock, answering how many.
func (b *Broker) SweepAudit(ctx context.Context) (int64, error) {
	tag, err := b.pool.Exec(ctx, "DELETE FROM connect_audit WHERE at < $1", b.now().Add(-AuditRetention))
	if err != nil {
		return 0, fmt.Errorf("connect_audit sweep: %w", err)
	}
	return tag.RowsAffected(), nil
}

// RunSweeper sweeps the audit and the approvals no call waits on now and
// every interval until ctx ends, handing errors to logf.
func (b *Broker) RunSweeper(ctx context.Context, every time.Duration, logf func(err error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := b.SweepAudit(ctx); err != nil && ctx.Err() == nil {
			logf(err)
		}
		if err := b.sweepApprovals(ctx); err != nil && ctx.Err() == nil {
			logf(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
