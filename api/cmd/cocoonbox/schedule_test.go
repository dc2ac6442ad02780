package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
)

// cocoonbox box schedule NAME sets, lists and clears a box's scheduled
// wakes through the api (Contract: Scheduled wake); bad input names the
// flag and changes nothing.
func TestBoxScheduleSetsListsAndClears(t *testing.T) {
	a := apitest.New(t)
	addHibernatedBox(t, a, "local")
	t.Setenv("COCOONBOX_TOKEN", string(a.PersonalToken(a.User.ID)))
	t.Setenv("COCOONBOX_ENDPOINT", a.URL)
	out, err := runCLI(t, "", "box", "schedule", "main", "--cron", "30 7 * * 1-5", "--tz", "Europe/Berlin", "--keep-up", "1h", "--json")
	var s struct {
		Id            json.Number `json:"id"`
		Cron          string
		KeepUpSeconds json.Number `json:"keep_up_seconds"`
	}
	if err != nil || json.Unmarshal([]byte(out), &s) != nil || s.Cron != "30 7 * * 1-5" || s.KeepUpSeconds != "3600" {
		t.Fatalf("set: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "", "box", "schedule", "main", "--cron", "sometimes"); err == nil || !strings.Contains(err.Error(), "cron") {
		t.Fatalf("a bad cron: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "", "box", "schedule", "main", "--list"); err != nil || !strings.Contains(out, "30 7 * * 1-5 (Europe/Berlin)") || strings.Contains(out, "sometimes") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "", "box", "schedule", "main", "--clear"); err != nil || !strings.Contains(out, "Removed 1") {
		t.Fatalf("clear: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "", "box", "schedule", "main"); err == nil || !strings.Contains(err.Error(), "--at or --cron") {
		t.Fatalf("no mode: %v", err)
	}
}

// addHibernatedBox writes the user's box "main" (cb-00000000000000a1,
// hibernated, on host) into the api's database, as a box the supervisor
// made and hibernated.
func addHibernatedBox(t *testing.T, a *apitest.API, host string) {
	t.Helper()
	if _, err := a.Server.DB.Pool.Exec(context.Background(), `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed)
		VALUES ('cb-00000000000000a1', $1, 'main', 'cbdesk:v1-base', 'hibernated', $2, $3)`, a.User.ID, host, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
}
