module github.com/cocoonbox/cocoonbox

go 1.26.0

require github.com/coreos/go-systemd/v22 v22.7.0
