package apiserver

import (
	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// maxMessage bounds one request message of the Boxes and Account
// services once decompressed (RESOURCE_EXHAUSTED past it): their requests
// are names, ids and flags, well under a KiB. Without it connect read and
// inflated a body of any size (a 510 KiB gzip bomb held ~1.8 GiB).
const maxMessage = 16 << 10

// callOptions are the connect options of a service of small messages: the
// message bound and the token check's interceptor. Mount its handler
// behind index.Guard, which checks the token before the body is read.
func callOptions(index *tokens.Index) []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithReadMaxBytes(maxMessage), connect.WithInterceptors(index.Interceptor())}
}
