module github.com/cocoonbox/cocoonbox

go 1.26.0

require (
	filippo.io/edwards25519 v1.2.0
	github.com/coreos/go-systemd/v22 v22.7.0
	golang.org/x/sys v0.50.0
)
