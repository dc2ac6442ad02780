module github.com/cocoonbox/cocoonbox/api

go 1.26.0

require (
	connectrpc.com/connect v1.21.1 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
