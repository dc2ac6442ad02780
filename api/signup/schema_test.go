package signup

import (
	"context"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The tables hold the contract's rules by themselves: one identity per
// GitHub account and one GitHub account per user, the settings' defaults
// (off, invite-only, $1 a day, one agent box, 50 an hour) in one row.
func TestSchemaHoldsTheContractsRules(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, users.Schema, Schema)
	ctx := context.Background()
	var a, b string
	if err := db.Pool.QueryRow(ctx, "INSERT INTO users (name, idp) VALUES ('a', 'github') RETURNING id").Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, "INSERT INTO users (name, password_hash) VALUES ('b', 'x') RETURNING id").Scan(&b); err != nil {
		t.Fatal(err)
	}
	link := func(subject, user string) error {
		_, err := db.Pool.Exec(ctx, "INSERT INTO identities (idp, subject, user_id) VALUES ('github', $1, $2)", subject, user)
		return err
	}
	if err := link("583231", a); err != nil {
		t.Fatal(err)
	}
	if link("583231", b) == nil {
		t.Error("one GitHub account linked to two users")
	}
	if link("9", a) == nil {
		t.Error("a user got two GitHub accounts")
	}
	if link("octocat", b) == nil {
		t.Error("a login, not the numeric id, was stored as the subject")
	}
	if err := link("9", b); err != nil {
		t.Fatal(err)
	}
	var enabled, inviteOnly bool
	var seats, maxAgentBoxes, hourly int
	var capMicros int64
	err := db.Pool.QueryRow(ctx, "SELECT enabled, invite_only, seats, daily_cap_micros, max_agent_boxes, hourly_accounts FROM signup_settings").
		Scan(&enabled, &inviteOnly, &seats, &capMicros, &maxAgentBoxes, &hourly)
	if err != nil {
		t.Fatal(err)
	}
	if enabled || !inviteOnly || capMicros != 1_000_000 || maxAgentBoxes != 1 || hourly != 50 {
		t.Errorf("defaults: enabled %v invite_only %v cap %d max_agent_boxes %d hourly %d", enabled, inviteOnly, capMicros, maxAgentBoxes, hourly)
	}
	if _, err := db.Pool.Exec(ctx, "INSERT INTO signup_settings (one) VALUES (true)"); err == nil {
		t.Error("a second settings row")
	}
	// A user's delete takes their identities and their queue entry.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO signup_queue (id, idp, subject, login, email, email_verified, status, user_id)
		VALUES ($1, 'github', '583231', 'A', 'a@example.com', true, 'admitted', $1)`, a); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "DELETE FROM users WHERE id = $1", a); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.Pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM identities WHERE user_id = $1) + (SELECT count(*) FROM signup_queue WHERE id = $1)", a).Scan(&left); err != nil || left != 0 {
		t.Errorf("after the delete: %d rows of the user left, %v", left, err)
	}
}
