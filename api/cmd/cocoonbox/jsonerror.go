package main

import (
	"encoding/json"
	"errors"
	"io"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/internal/command"
)

// A command given --json that fails prints one JSON object on stdout,
// {"error": {"code", "message"}}, besides the message on stderr, so a
// script reading stdout learns why (issue 45, Deliver 3). The code is
// "usage" for bad usage (exit 2), the connect code of the api's answer
// or of the call that got none ("unavailable"), else "failed".

// jsonPrinted is an error whose JSON answer the command printed on stdout
// already (box hibernate's refusal naming the working sessions).
type jsonPrinted struct{ error }

func (e jsonPrinted) Unwrap() error { return e.error }

// wantsJSON says whether args ask for JSON: --json (or -json,
// --json=true) before any "--".
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true":
			return true
		}
	}
	return false
}

// printJSONError prints err as the one JSON object of a failed command,
// unless the command printed its own answer (jsonPrinted, an exitCode
// after offload's JSON) or none is due (--help).
func printJSONError(stdout io.Writer, err error) {
	var printed jsonPrinted
	var code exitCode
	if errors.As(err, &printed) || errors.As(err, &code) || false {
		return
	}
	c := "failed"
	var ue command.UsageError
	var ce *connect.Error
	switch {
	case errors.As(err, &ue):
		c = "usage"
	case errors.As(err, &ce):
		c = ce.Code().String()
	}
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	line, _ := json.Marshal(map[string]body{"error": {Code: c, Message: err.Error()}})
	stdout.Write(append(line, '\n'))
}
