package webdriver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The harness itself against a page of ours: type, click, and see what the
// page's script did. It fails (never skips) where chromium is not installed.
func TestTypeClickAndRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/done" {
			fmt.Fprintf(w, "<p>hello %s</p>", r.URL.Query().Get("name"))
			return
		}
		fmt.Fprint(w, `<form action="/done"><input id="name" name="name"><button id="go">Go</button></form>`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Go(ctx, srv.URL); err != nil {
		t.Fatal(err)
	}
	if err := b.Type(ctx, "#name", "chromium"); err != nil {
		t.Fatal(err)
	}
	if err := b.Click(ctx, "#go"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(ctx, "the answer page", func(url, text string) bool {
		return strings.HasSuffix(url, "/done?name=chromium") && text == "hello chromium"
	}); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if err := b.Click(short, "#absent"); err == nil {
		t.Fatal("a click on a missing element succeeded")
	}
}
