// Command demo is `make demo`, the main job, on the product's own path:
// `cocoonbox-api serve` on its embedded PostgreSQL with the local
// supervisor, a user made by the admin command, the CLI signed in through
// headless Chromium, and a box of the image created through the api
// (`cocoonbox box create`). Each concern's step (a file of this package
// that calls register) then checks its guest promises in that box through
// `cocoonbox rsh`, the box's lifecycle goes through the CLI (hibernate,
// ensure, save, upgrade, delete), and it prints a short report a person can
// read. It exits 1 when a line of the report is wrong (the delete step
// prints the box's diagnostics first), and always deletes the box and stops
// the api.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// demo is what every step works on: the api, the signed-in CLI, and the
// box the api booted, reached through rsh.
type demo struct {
	api  *harness.API
	cli  harness.CLI
	box  *box.Box
	name string // the box's name (and hostname)
	id   string // its id, cb-…
	// image is the ref it was created from; newer the one upgrade moves it to.
	image, newer string
	// created is how long `box create` took to done (state running).
	created time.Duration
	// machines is the local supervisor's state directory (its boxes'
	// disks under machines/*/root); upstream the demo key's host.
	machines string
	upstream *upstream
}

// step is one concern's part of the demo, run in order.
type step struct {
	order int
	name  string
	run   func(ctx context.Context, d *demo, r *report)
}

var steps []step

// register adds a step; order places it (10 foundation, 20 identity, ...).
func register(order int, name string, run func(ctx context.Context, d *demo, r *report)) {
	steps = append(steps, step{order, name, run})
}

// report collects the lines a person reads; any bad line fails the demo.
type report struct{ failed int }

func (r *report) ok(what, format string, args ...any) {
	fmt.Printf("  ok    %-22s %s\n", what, fmt.Sprintf(format, args...))
}

// info prints a line that shows something and checks nothing: never "ok".
func (r *report) info(what, format string, args ...any) {
	fmt.Printf("  --    %-22s %s\n", what, fmt.Sprintf(format, args...))
}

func (r *report) bad(what, format string, args ...any) {
	r.failed++
	fmt.Printf("  FAIL  %-22s %s\n", what, fmt.Sprintf(format, args...))
}

// check prints ok or FAIL depending on err.
func (r *report) check(what string, err error, format string, args ...any) {
	if err != nil {
		r.bad(what, "%v", err)
		return
	}
	r.ok(what, format, args...)
}

func main() {
	image := flag.String("image", "", "image root directory (out/images/cbdesk-vN-TIER)")
	keep := flag.Bool("keep", false, "leave the api and its box running after the report")
	flag.Usage = func() {
		fmt.Fprintf(os.Stdout, "usage: demo --image DIR [--keep]\n\nRuns the api with its local supervisor, signs the CLI in, creates a box of the image through it, and reports what each guest promise did.\n\n")
		flag.CommandLine.SetOutput(os.Stdout)
		flag.PrintDefaults()
	}
	flag.Parse()
	if *image == "" {
		flag.Usage()
		os.Exit(2)
	}
	start := time.Now()
	r := &report{}
	d, stop, err := startProduct(context.Background(), *image, r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		stop()
		os.Exit(1)
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].order < steps[j].order })
	for _, s := range steps {
		fmt.Printf("\n== %s\n", s.name)
		s.run(context.Background(), d, r)
	}
	if *keep {
		fmt.Printf("\nthe api %s and its box %s left running: `cocoonbox rsh --box %s -- CMD` (XDG_CONFIG_HOME=%s); stop with `kill %d`\n",
			d.api.URL, d.name, d.name, d.cli.ConfigDir, os.Getpid())
		select {}
	}
	stop()
	fmt.Printf("\n%d failed; demo took %.1f s\n", r.failed, time.Since(start).Seconds())
	if r.failed > 0 {
		os.Exit(1)
	}
}
