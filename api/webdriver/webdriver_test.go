package webdriver

import (
	"context"
	"fmt"
	"net"
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

// chromedriver given --port=0 took a port free on [::1] alone and exited
// ("IPv4 port not available") when 127.0.0.1 held it: a test process holds
// many (each loopback connection's own port), and a CI-like run failed so.
// Here most of the ephemeral range is held on 127.0.0.1; with --port=0 each
// launch below failed.
func TestChromedriverStartsWhenMostLoopbackPortsAreTakenOnIPv4(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for p := 32768; p <= 60999 && len(held) < 18000; p++ {
		if l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			held = append(held, l)
		}
	}
	if len(held) < 18000 {
		t.Fatalf("held %d ports of 127.0.0.1, want 18000 (the open files limit?)", len(held))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 10 {
		cmd, base, err := launchDriver(ctx)
		if err != nil {
			t.Fatalf("launch %d: %v", i, err)
		}
		resp, err := http.Get(base + "/status")
		if err == nil {
			resp.Body.Close()
		}
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil {
			t.Fatalf("launch %d: chromedriver at %s: %v", i, base, err)
		}
	}
}
