package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

// Issue 44, Deliver 5: DialerConfig.Resolve sends one name to one address
// and admits it for that name alone; the address given as itself, and
// localhost, which resolves to it, stay refused. This is how Connect's tests
// reach a server on loopback without switching the check off.
func TestResolveAdmitsThePinnedNameOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	d, err := NewDialer(DialerConfig{Resolve: map[string]netip.Addr{"pinned.example.com": netip.MustParseAddr("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	for _, host := range []string{"pinned.example.com", "PINNED.example.com."} {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Fatalf("%s: %v, want the pinned address dialled", host, err)
		}
		c.Close()
	}
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", host, err)
		}
	}
}
