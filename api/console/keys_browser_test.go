package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
)

// The Keys page shows each refusal of Add beside its field and in the
// summary at the top, and keeps it shown after the list reloads (the
// reload hid #error within a frame: the user saw no key and no reason);
// the typed values stay. A double click adds the key once, with no
// refusal: the button is disabled while its call is in flight.
func TestTheKeysPageShowsEachRefusalAndKeepsIt(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession())
	u := newUI(t, a.URL)
	u.signIn("alice")
	for _, c := range []struct {
		what, name, hosts, value string
		field, says              string
	}{
		{"a 10,000-character value", "LONG", "api.example.com", strings.Repeat("v", 10000), "key-value", "Value: too long. A key's value is at most 8192 bytes (8 KiB); this one is 10000 bytes."},
		{"a unicode name", "ключ", "api.example.com", "v", "key-name", `Name: use 1 to 64 of the letters A to Z and a to z, the digits, _ and -; "ключ" has others.`},
		{"a bad host", "GOOD", "api.example.com https://other.example.com", "v", "key-hosts", `Host 2: "https://other.example.com" has a scheme: give the host name only (api.openai.com).`},
		{"a duplicate name", "TAKEN", "api.example.com", "v", "key-name", "You have a key of this name already: pick another name, or rotate that key."},
	} {
		if c.what == "a duplicate name" {
			u.addKey("TAKEN", "api.example.com", "v")
		}
		u.open("/cb/keys")
		u.typeIn("#key-name", c.name)
		u.typeIn("#key-hosts", c.hosts)
		u.setValue("#key-value", c.value)
		u.click("#add-submit")
		u.waitText(c.says)
		u.waitIdle("#add-submit")
		var got struct {
			Summary, Beside, Invalid, Name string
		}
		u.js(`const s = document.getElementById("error-summary"), f = document.getElementById(arguments[0]);
const beside = document.getElementById(arguments[0] + "-error");
return { summary: s.hidden ? "" : s.textContent, beside: beside ? beside.textContent : "", invalid: f.getAttribute("aria-invalid") || "",
         name: document.getElementById("key-name").value };`, &got, c.field)
		if !strings.Contains(got.Summary, c.says) || got.Beside != c.says || got.Invalid != "true" || got.Name != c.name {
			t.Errorf("%s, after the list's reload: summary %q, beside #%s %q, aria-invalid %q, the name typed %q; want %q in both and the name kept",
				c.what, got.Summary, c.field, got.Beside, got.Invalid, got.Name, c.says)
		}
	}

	// A double click sends one Add: the second finds the button disabled.
	u.open("/cb/keys")
	u.typeIn("#key-name", "ONCE")
	u.typeIn("#key-hosts", "api.example.com")
	u.typeIn("#key-value", "v")
	var sent int
	u.js(`window.__adds = 0;
const f = window.fetch;
window.fetch = (path, opts) => { if (path === "/cb/api/keys" && opts.method === "POST") window.__adds++; return f(path, opts); };
const b = document.getElementById("add-submit"); b.click(); b.click(); return window.__adds;`, &sent)
	u.waitText("ONCE")
	u.waitIdle("#add-submit")
	var after struct {
		Adds    int
		Summary bool
	}
	u.js(`return { adds: window.__adds, summary: !document.getElementById("error-summary").hidden };`, &after)
	if after.Adds != 1 || after.Summary {
		t.Errorf("a double click sent %d Adds and showed a refusal: %v", after.Adds, after.Summary)
	}
}

// Delete and Rotate ask first in the page's dialog: Cancel keeps the key;
// Rotate takes the new value in a masked field; Delete's confirmation
// deletes it.
func TestTheKeysPageAsksBeforeDeleteAndRotatesInAMaskedField(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession())
	u := newUI(t, a.URL)
	u.signIn("alice")
	u.addKey("GONE", "api.example.com", "v1")
	u.click("#key-GONE button.delete")
	u.waitText("Delete GONE?")
	u.click("#confirm-cancel")
	u.open("/cb/keys")
	u.waitText("GONE")

	u.click("#key-GONE button.rotate")
	u.waitText("Rotate GONE?")
	var kind string
	u.js(`return document.getElementById("confirm-input").type;`, &kind)
	if kind != "password" {
		t.Errorf("Rotate's value field is of type %q, not password", kind)
	}
	u.typeIn("#confirm-input", "v2")
	u.click("#confirm-ok")
	u.waitIdle("#key-GONE button.rotate")
	u.waitRotated("GONE")

	u.click("#key-GONE button.delete")
	u.click("#confirm-ok")
	u.waitText("No keys yet.")
}

// addKey adds a key through the page.
func (u *ui) addKey(name, hosts, value string) {
	u.t.Helper()
	u.open("/cb/keys")
	u.typeIn("#key-name", name)
	u.typeIn("#key-hosts", hosts)
	u.typeIn("#key-value", value)
	u.click("#add-submit")
	u.waitText(name)
}

// setValue sets an input's value at once (typing 10,000 keys is slow).
func (u *ui) setValue(css, value string) {
	u.t.Helper()
	u.js(`document.querySelector(arguments[0]).value = arguments[1];`, nil, css, value)
}

// waitIdle waits until the button css selects is enabled again: its call
// and the list's reload after it have ended.
func (u *ui) waitIdle(css string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 30*time.Second)
	defer cancel()
	var busy bool
	u.step("wait for "+css+" to be idle", u.b.WaitFor(ctx, css+" idle", func(_, _ string) bool {
		u.js(`const b = document.querySelector(arguments[0]); return !b || b.disabled;`, &busy, css)
		return !busy
	}))
}

// waitRotated waits until the keys list shows name rotated.
func (u *ui) waitRotated(name string) {
	u.t.Helper()
	var rotated string
	u.step("wait for "+name+" rotated", u.b.WaitFor(u.ctx, name+" rotated", func(_, _ string) bool {
		u.js(`const r = document.querySelector("#key-" + arguments[0] + " td:nth-child(6)"); return r ? r.textContent : "";`, &rotated, name)
		return rotated != "" && rotated != "never"
	}))
}
