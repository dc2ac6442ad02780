// Package version carries the build stamp of every cocoonbox binary and
// the one form they print it in (docs/conventions.md, Version).
package version

// Version is the source revision a binary was built from (git describe
// output, "-dirty" when the tree had changes). The Makefile sets it with
// -ldflags "-X github.com/cocoonbox/cocoonbox/internal/version.Version=...";
// a plain `go build` leaves "dev".
var Version = "dev"

// Release is the product's release (image/VERSION, e.g. "23"), set by the
// Makefile as Version is; a plain `go build` leaves "dev".
var Release = "dev"

// String is what `NAME --version` and `NAME version` print, without the
// newline: "NAME RELEASE (REVISION)", e.g. "cocoonbox 23 (v23-4-gabc1234)".
func String(name string) string { return name + " " + Release + " (" + Version + ")" }
