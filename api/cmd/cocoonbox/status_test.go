package main

import (
	"context"
	"encoding/json"

	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/version"
)

// imagesOnly is a box supervisor that answers Images and List: what
// status asks of an api's supervisor. Any other call panics (its
// embedded nil Supervisor), which a status must never make.
type imagesOnly struct{ sandbox.Supervisor }

func (imagesOnly) Images(context.Context) ([]sandbox.Image, error) {
	return []sandbox.Image{{Ref: "cbdesk:v23-base", Version: 23, Tier: "base"}}, nil
}

func (imagesOnly) List(context.Context, string) ([]sandbox.Machine, error) { return nil, nil }

// Issue 45, Deliver 4: status names the endpoint and its source, the
// token's source and device, and tells an api without a box supervisor
// (it answers, saying so) from one with images.
func TestStatusTellsAnAPIWithoutASupervisorFromOneWith(t *testing.T) {
	for _, c := range []struct {
		name       string
		opts       []apitest.Option
		supervisor bool
		images     string
		boxes      string
	}{
		{"without", nil, false, "", ""},
		{"with", []apitest.Option{apitest.WithSupervisor("host1", imagesOnly{})}, true, "cbdesk:v23-base", "box       main cb-00000000000000a1 hibernated cbdesk:v1-base\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stampVersion(t)
			a := apitest.New(t, c.opts...)
			addHibernatedBox(t, a, "host1")
			t.Setenv("XDG_CONFIG_HOME", t.TempDir())
			t.Setenv("COCOONBOX_ENDPOINT", a.URL)
			t.Setenv("COCOONBOX_TOKEN", string(a.PersonalToken(a.User.ID)))
			out, err := runCLI(t, "", "status")
			if err != nil {
				t.Fatalf("status: %v\n%s", err, out)
			}
			for _, want := range []string{a.URL + " (from $COCOONBOX_ENDPOINT)", "$COCOONBOX_TOKEN", "version cocoonbox-api 99 (test-stamp)"} {
				if !strings.Contains(out, want) {
					t.Errorf("status lacks %q:\n%s", want, out)
				}
			}
			t.Logf("status:\n%s", out)
			if c.supervisor != !strings.Contains(out, "without a box supervisor") || !strings.Contains(out, c.images) || !strings.Contains(out, c.boxes) {
				t.Errorf("status, supervisor %v, images %q:\n%s", c.supervisor, c.images, out)
			}
			out, err = runCLI(t, "", "status", "--json")
			var got apiStatusJSON
			if err != nil || json.Unmarshal([]byte(out), &got) != nil {
				t.Fatalf("status --json: %v\n%s", err, out)
			}
			if !got.Reachable || got.BoxSupervisor != c.supervisor || got.EndpointSource != "$COCOONBOX_ENDPOINT" || got.TokenSource != "$COCOONBOX_TOKEN" || got.APIVersion != "cocoonbox-api 99 (test-stamp)" {
				t.Errorf("status --json: %+v", got)
			}
			if c.supervisor && (len(got.Images) != 1 || got.Images[0].Ref != c.images) {
				t.Errorf("status --json images: %+v", got.Images)
			}
			if c.supervisor && (len(got.Boxes) != 1 || got.Boxes[0].Name != "main" || got.Boxes[0].State != "hibernated") {
				t.Errorf("status --json boxes: %+v", got.Boxes)
			}
		})
	}
}

// stampVersion stamps internal/version as the Makefile's -X does, for the
// test's in-process api (its Version service reads the stamp at each
// call), and puts the previous stamp back at the test's end.
func stampVersion(t *testing.T) {
	release, revision := version.Release, version.Version
	version.Release, version.Version = "99", "test-stamp"
	t.Cleanup(func() { version.Release, version.Version = release, revision })
}

// Issue 45, Deliver 4: status names the api's version before any sign-in
// (Version answers without a token), so a user who is not signed in sees
// which api answers; --json carries it.
func TestStatusNamesTheAPIsVersionWithoutAToken(t *testing.T) {
	stampVersion(t)
	a := apitest.New(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("COCOONBOX_TOKEN", "")
	out, err := runCLI(t, "", "status", "--endpoint", a.URL, "--json")
	var got apiStatusJSON
	if err == nil || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("status without a token: %v (want the not-signed-in failure)\n%s", err, out)
	}
	if !got.Reachable || got.TokenSource != "none" || got.APIVersion != "cocoonbox-api 99 (test-stamp)" || !strings.Contains(got.Error, "not signed in") {
		t.Errorf("status --json without a token: %+v", got)
	}
	out, _ = runCLI(t, "", "status", "--endpoint", a.URL)
	if !strings.Contains(out, "answering, version cocoonbox-api 99 (test-stamp)") {
		t.Errorf("status without a token:\n%s", out)
	}
}

// Issue 45, Deliver 4: a dead api is not an api without boxes: status
// says it cannot be reached, and fails.
func TestStatusOfADeadAPIFails(t *testing.T) {
	endpoint := closedEndpoint(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("0", 64))
	out, err := runCLI(t, "", "status", "--endpoint", endpoint, "--json")
	var got apiStatusJSON
	if err == nil || json.Unmarshal([]byte(out), &got) != nil || got.Reachable || got.BoxSupervisor || got.EndpointSource != "--endpoint" {
		t.Fatalf("status of a closed port: %v, %+v\n%s", err, got, out)
	}
	if !strings.Contains(got.Error, "cannot reach the api") {
		t.Errorf("status of a closed port says %q", got.Error)
	}
}
