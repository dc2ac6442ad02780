// Package version carries the build stamp of every cocoonbox binary.
package version

// Version is the source revision a binary was built from (git describe
// output, "-dirty" when the tree had changes). The Makefile sets it with
// -ldflags "-X github.com/cocoonbox/cocoonbox/internal/version.Version=...";
// a plain `go build` leaves "dev".
var Version = "dev"
