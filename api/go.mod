module github.com/cocoonbox/cocoonbox/api

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	google.golang.org/protobuf v1.36.11
)

require github.com/google/renameio/v2 v2.0.2
