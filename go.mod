module github.com/cocoonbox/cocoonbox

go 1.26.0

require (
	filippo.io/edwards25519 v1.2.0
	github.com/BurntSushi/toml v1.6.0
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/distribution/reference v0.6.0
	github.com/godbus/dbus/v5 v5.2.4
	github.com/google/renameio/v2 v2.0.2
	golang.org/x/sys v0.50.0
)

require github.com/opencontainers/go-digest v1.0.0 // indirect
