//go:build booted

package packages_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// BenchmarkNoopReconcileInBox: `packages reconcile` in a booted box with
// 300 listed, installed packages (the image's baseline bare, the rest
// arch-qualified, all installed). It reports the wall time per run measured
// inside the box (target under 50 ms) and the dpkg-query and apt-get
// processes per run, counted by wrappers first in PATH (target exactly one
// and none).
func BenchmarkNoopReconcileInBox(b *testing.B) {
	bx := boot(b)
	bx.MustSh(b, `mkdir -p /home/user/.config/cocoonbox && a=$(dpkg --print-architecture) && `+
		`{ cat /etc/cocoonbox/packages.baseline; sed "s/\$/:$a/" /etc/cocoonbox/packages.baseline; } | head -n 300 >`+listPath+
		` && chown -R user:user /home/user/.config`)
	if n := strings.TrimSpace(bx.MustSh(b, "wc -l <"+listPath)); n != "300" {
		b.Fatalf("the list has %s names, want 300", n)
	}
	// Count the processes of one run.
	for _, prog := range []string{"dpkg-query", "apt-get"} {
		script := "#!/bin/sh\nprintf '%s\\n' \"" + prog + " $*\" >>" + execLog + "\nexec /usr/bin/" + prog + " \"$@\"\n"
		if err := bx.WriteFile("/usr/local/sbin/"+prog, []byte(script), 0o755, "root"); err != nil {
			b.Fatal(err)
		}
	}
	bx.Must(b, "env", "PATH=/usr/local/sbin:/usr/sbin:/usr/bin", helper, "reconcile")
	queries, apts := len(execs(bx, "dpkg-query")), len(execs(bx, "apt-get"))
	bx.Must(b, "rm", "/usr/local/sbin/dpkg-query", "/usr/local/sbin/apt-get")

	// Time runs inside the box, without the wrappers.
	// bash's `times` adds the CPU time of the children (the helper and its
	// dpkg-query): the cost on an idle machine, where wall time on a shared
	// one includes waiting for a CPU.
	const runs = 20
	var total, cpu float64
	for i := 0; i < b.N; i++ {
		out := bx.MustSh(b, `bash -c 's=$(date +%s%N); for i in $(seq `+strconv.Itoa(runs)+`); do `+helper+` reconcile >/dev/null 2>&1 || exit 1; done; echo $(( $(date +%s%N) - s )); times >/run/cbtest-times; tail -n 1 /run/cbtest-times'`)
		f := strings.Fields(out)
		if len(f) != 3 {
			b.Fatalf("unexpected output %q", out)
		}
		ns, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			b.Fatal(err)
		}
		total += ns
		cpu += bashSeconds(f[1]) + bashSeconds(f[2])
	}
	b.ReportMetric(total/float64(b.N*runs)/1e6, "ms-wall/reconcile")
	b.ReportMetric(cpu*1000/float64(b.N*runs), "ms-cpu/reconcile")
	b.ReportMetric(float64(queries), "dpkg-query/reconcile")
	b.ReportMetric(float64(apts), "apt-get/reconcile")
}

// bashSeconds reads a `times` figure such as 0m0.123s.
func bashSeconds(s string) float64 {
	m, sec, ok := strings.Cut(strings.TrimSuffix(s, "s"), "m")
	if !ok {
		return 0
	}
	mf, _ := strconv.ParseFloat(m, 64)
	sf, _ := strconv.ParseFloat(sec, 64)
	return mf*60 + sf
}

// BenchmarkBootWithAListInBox: a box's boot (systemd-nspawn's start until
// `running`, what the api's Boot waits for) whose home lists 300 packages,
// all installed (the image's baseline bare and arch-qualified): the common
// case, a box whose reconcile has nothing to do. It reports the boot as the
// host saw it, the box's systemd's own boot (userspace start to
// FinishTimestamp), and when the reconcile ended relative to the boot's end
// (negative: before it).
func BenchmarkBootWithAListInBox(b *testing.B) {
	img := box.Image(b)
	base, err := os.ReadFile(filepath.Join(img, "etc/cocoonbox/packages.baseline"))
	if err != nil {
		b.Fatal(err)
	}
	arch, err := exec.Command("dpkg", "--print-architecture").Output()
	if err != nil {
		b.Fatal(err)
	}
	names := strings.Fields(string(base))
	for _, n := range names {
		names = append(names, n+":"+strings.TrimSpace(string(arch)))
	}
	if len(names) > 300 {
		names = names[:300]
	}
	arg := listAtBoot(b, strings.Join(names, "\n")+"\n")
	var booted, userspace, after float64
	for i := 0; i < b.N; i++ {
		bx, err := box.Start(context.Background(), box.Options{Image: img, Args: []string{arg}})
		if err != nil {
			b.Fatal(err)
		}
		show := func(p string, unit ...string) uint64 {
			out, _ := bx.Run(append([]string{"systemctl", "show", "-P", p}, unit...)...)
			n, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
			return n
		}
		fin, start := show("FinishTimestampMonotonic"), show("UserspaceTimestampMonotonic")
		var end uint64
		err = box.Until(time.Minute, "the reconcile to end", func() (bool, string) {
			end = show("ExecMainExitTimestampMonotonic", unit)
			return end != 0, "still running"
		})
		bx.Stop()
		os.Remove(bx.Console)
		if err != nil {
			b.Fatal(err)
		}
		booted += float64(bx.Booted.Milliseconds())
		userspace += float64(fin-start) / 1e3
		after += (float64(end) - float64(fin)) / 1e3
	}
	b.ReportMetric(booted/float64(b.N), "ms-boot-seen")
	b.ReportMetric(userspace/float64(b.N), "ms-systemd-boot")
	b.ReportMetric(after/float64(b.N), "ms-reconcile-end-after-boot")
}
