// Command box is `make box`: it boots a box of a cbdesk image and leaves it
// running until it is killed (Ctrl-C or `kill PID`), printing how to enter
// it. The root is throwaway (--volatile=overlay) unless --persistent DIR.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

func main() {
	image := flag.String("image", "", "image root directory (out/images/cbdesk-vN-TIER)")
	name := flag.String("name", "cbbox", "machine name")
	persistent := flag.String("persistent", "", "keep the box's root in this directory (copied from the image on first boot)")
	flag.Parse()
	if *image == "" {
		fmt.Fprintln(os.Stderr, "usage: box --image DIR [--name NAME] [--persistent DIR]")
		os.Exit(2)
	}
	b, err := box.Start(context.Background(), box.Options{Image: *image, Name: *name, Persistent: *persistent})
	if err != nil {
		fmt.Fprintf(os.Stderr, "box: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("box %s is running (booted in %.2f s, console log %s)\n", b.Name, b.Booted.Seconds(), b.Console)
	fmt.Printf("  enter it:        nsenter -t %d -a /bin/bash -l\n", b.Leader())
	fmt.Printf("  as user:         nsenter -t %d -a runuser -l user\n", b.Leader())
	fmt.Printf("  read its story:  nsenter -t %d -a journalctl -m\n", b.Leader())
	if img, err := b.ReadFile("/etc/cocoonbox/image"); err == nil && strings.Contains(string(img), "\ntier=desk\n") {
		fmt.Printf("  its desktop:     a VNC viewer on 127.0.0.1:5900 (no password; one desk box at a time owns the port)\n")
		fmt.Printf("  a screenshot:    nsenter -t %d -a runuser -u user -- sh -c 'DISPLAY=:0 XAUTHORITY=/run/cocoonbox-x/Xauthority xwd -root -silent | convert xwd:- png:-' >shot.png\n", b.Leader())
	}
	fmt.Printf("  stop it:         Ctrl-C here, or kill %d\n", os.Getpid())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Println("stopping the box")
	b.Stop()
}
