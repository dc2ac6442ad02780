// Command testcluster starts and stops the one PostgreSQL cluster that a
// whole `make test` run shares (see package dbtest): `testcluster start DIR`
// makes it in DIR if needed, starts it and prints its URL for
// COCOONBOX_TEST_DATABASE_URL; `testcluster stop DIR` stops it.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/api/database"
)

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "start" && os.Args[1] != "stop") {
		fmt.Fprintln(os.Stderr, "usage: testcluster start|stop DIR")
		os.Exit(2)
	}
	dir, err := filepath.Abs(os.Args[2])
	if err == nil {
		c := &database.Cluster{Dir: dir, User: "postgres", Fast: true}
		if os.Args[1] == "start" {
			if err = c.Start(context.Background()); err == nil {
				fmt.Println(c.URL())
			}
		} else {
			err = c.Stop(context.Background())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		os.Exit(1)
	}
}
