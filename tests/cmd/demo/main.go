// Command demo is `make demo`, the main job: it boots a box of a cbdesk
// image, does in it what sandboxd and the api do at a boot and a wake, and
// prints a short report a person can read. Each concern adds its own step
// (a file of this package that calls register). It exits 1 when a line of
// the report is wrong, and always stops the box.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// step is one concern's part of the demo, run in order on the booted box.
type step struct {
	order int
	name  string
	run   func(ctx context.Context, b *box.Box, r *report)
}

var steps []step

// register adds a step; order places it (10 foundation, 20 identity, ...).
func register(order int, name string, run func(ctx context.Context, b *box.Box, r *report)) {
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
	keep := flag.Bool("keep", false, "leave the box running after the report")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: demo --image DIR [--keep]\n\nBoots a box of the image, plays sandboxd and the api, and reports what each helper did.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *image == "" {
		flag.Usage()
		os.Exit(2)
	}
	ctx := context.Background()
	fmt.Printf("cocoonbox demo: booting a box of %s\n", *image)
	start := time.Now()
	b, err := box.Start(ctx, box.Options{Image: *image, Name: "cbdemo-" + fmt.Sprint(os.Getpid())})
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
	r := &report{}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].order < steps[j].order })
	for _, s := range steps {
		fmt.Printf("\n== %s\n", s.name)
		s.run(ctx, b, r)
	}
	if *keep {
		fmt.Printf("\nbox %s left running: enter it with `nsenter -t %d -a`, stop it with `kill %d`\n",
			b.Name, b.Leader(), os.Getpid())
		select {}
	}
	if r.failed > 0 {
		fmt.Println()
		fmt.Println(b.Diagnostics(60))
	}
	b.Stop()
	fmt.Printf("\n%d failed; demo took %.1f s\n", r.failed, time.Since(start).Seconds())
	if r.failed > 0 {
		os.Exit(1)
	}
}
