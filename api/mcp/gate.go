package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// methods are the requests the control MCP answers; the sdk answers
// every other request of an older revision with a plain HTTP 400, where
// the contract names -32601.
var methods = map[string]bool{
	"initialize": true, "ping": true, "tools/list": true, "tools/call": true,
	// initialize advertises the logging capability (the go-sdk always
	// does), so its one request is answered, by the sdk.
	"logging/setLevel": true,
	// the go-sdk client's first try, answered with the versions served
	"server/discover": true,
}

// gate checks a POST before the sdk reads it: a body over MaxBody is 413;
// a request of a method the MCP does not answer is -32601; a request
// that is not an initialize and carries no Mcp-Session-Id is 404, as a
// wrong one is, so the client initializes a session again instead of the
// sdk starting an uninitialized one that refuses it.
//
// Contract: Control MCP, errors; MCP streamable HTTP, session management.
func gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", MaxBody), http.StatusRequestEntityTooLarge)
			return
		}
		if err != nil {
			http.Error(w, "read the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &msg) != nil {
			next.ServeHTTP(w, r) // a batch, or not JSON: the sdk answers it
			return
		}
		opens := msg.Method == "initialize" || msg.Method == "server/discover"
		switch {
		case len(msg.ID) > 0 && msg.Method != "" && !methods[msg.Method]:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{
				"code": -32601, "message": fmt.Sprintf("method %q not found: the control MCP answers initialize, ping, tools/list, tools/call and logging/setLevel", msg.Method)}})
		case r.Header.Get("Mcp-Session-Id") == "" && !opens:
			http.Error(w, "session not found: send initialize first (no Mcp-Session-Id)", http.StatusNotFound)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
