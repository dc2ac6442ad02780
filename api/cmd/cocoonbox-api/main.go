// Command cocoonbox-api is the control plane: accounts, boxes, the key vault
// and the control MCP. It reaches boxes only through sandboxd. For now it is
// a skeleton that answers `version`; its sections of the contract come with
// their own issues.
package main

import (
	"fmt"
	"os"
)

// Version is stamped by the Makefile with the source revision.
var Version = "dev"

const usage = `usage: cocoonbox-api COMMAND

commands:
  version   print the build's source revision
`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "version":
		fmt.Println(Version)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "cocoonbox-api: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
}
