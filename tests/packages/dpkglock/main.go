// Command dpkglock holds the dpkg locks the way apt does (an fcntl write
// lock on each file named) until it is killed; the booted-box tests copy it
// into a box to keep the dpkg lock busy. (flock(1) takes a flock(2) lock,
// which apt's fcntl locks do not see.) Once every lock is held it creates
// the ready file given with -ready.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	ready := flag.String("ready", "", "file to create once the locks are held")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dpkglock [-ready FILE] LOCKFILE...")
		os.Exit(2)
	}
	var held []*os.File
	for _, path := range flag.Args() {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dpkglock:", err)
			os.Exit(1)
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK}
		if err := unix.FcntlFlock(f.Fd(), unix.F_SETLKW, &lk); err != nil {
			fmt.Fprintln(os.Stderr, "dpkglock:", path, err)
			os.Exit(1)
		}
		held = append(held, f)
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte(fmt.Sprintln(os.Getpid())), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "dpkglock:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("dpkglock: holding %d locks\n", len(held))
	for {
		time.Sleep(time.Hour)
	}
}
