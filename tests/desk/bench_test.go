//go:build booted

package desk

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

var savedIn = regexp.MustCompile(`saved (\d+) clients .* in (\d+) ms`)

// BenchmarkSessionSaveFiveClients times session-save (as the toolhost runs
// it) on a desktop with more than five XSMP clients: xfwm4, xfsettingsd,
// the panel, Thunar (with a window), xfdesktop and xfce4-terminal, plus
// Mousepad. ns/op includes entering the box (nsenter + runuser);
// in-box-ms/op is session-save's own figure, from its start to the file
// read back.
func BenchmarkSessionSaveFiveClients(b *testing.B) {
	bx := bootDesk(b)
	openClients(b, bx)
	mustUser(b, bx, saveTool) // the first save after start waits for clients still settling
	var inBox, clients int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := mustUser(b, bx, saveTool)
		m := savedIn.FindStringSubmatch(out)
		if m == nil {
			b.Fatalf("session-save said %q", out)
		}
		clients, _ = strconv.Atoi(m[1])
		ms, _ := strconv.Atoi(m[2])
		inBox += ms
	}
	b.StopTimer()
	if clients < 5 {
		b.Fatalf("only %d clients saved", clients)
	}
	b.ReportMetric(float64(clients), "clients")
	b.ReportMetric(float64(inBox)/float64(b.N), "in-box-ms/op")
}

// BenchmarkDeskBootToXfceSession times a desk box from systemd-nspawn's
// start to xfce4-session idle with xfdesktop up (boot-s/op: to systemd's
// `running`).
func BenchmarkDeskBootToXfceSession(b *testing.B) {
	img := deskImage(b)
	var boot, desktop time.Duration
	for i := 0; i < b.N; i++ {
		vncPortFree(b)
		start := time.Now()
		bx, err := box.Start(b.Context(), box.Options{Image: img})
		if err != nil {
			b.Fatal(err)
		}
		waitDesktop(b, bx)
		desktop += time.Since(start)
		boot += bx.Booted
		bx.Stop()
	}
	b.ReportMetric(desktop.Seconds()/float64(b.N), "desktop-s/op")
	b.ReportMetric(boot.Seconds()/float64(b.N), "boot-s/op")
}
