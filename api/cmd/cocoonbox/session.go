package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/client/login"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// DefaultEndpoint is the api of `cocoonbox-api serve` with no config.
const DefaultEndpoint = "http://127.0.0.1:18200"

// state is cli.json and the endpoint a command works on.
type state struct {
	path     string
	file     *login.Config
	endpoint string
	// source says where endpoint came from: "--endpoint",
	// "$COCOONBOX_ENDPOINT", "cli.json (the last login)" or "the default".
	source string
}

// loadState reads cli.json and picks the endpoint: the flag, else
// $COCOONBOX_ENDPOINT, else the last login's, else DefaultEndpoint.
func loadState(flagEndpoint string) (*state, error) {
	path, err := login.ConfigPath()
	if err != nil {
		return nil, err
	}
	f, err := login.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	ep, source := flagEndpoint, "--endpoint"
	for _, next := range []struct{ ep, source string }{
		{os.Getenv("COCOONBOX_ENDPOINT"), "$COCOONBOX_ENDPOINT"},
		{f.Endpoint, "cli.json (the last login)"},
		{DefaultEndpoint, "the default"},
	} {
		if ep == "" {
			ep, source = next.ep, next.source
		}
	}
	ep = strings.TrimSuffix(ep, "/")
	if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
		return nil, command.UsageError{Msg: fmt.Sprintf("endpoint %q is not an http:// or https:// URL", ep)}
	}
	return &state{path: path, file: f, endpoint: ep, source: source}, nil
}

// saved is the stored login of the endpoint, or an error saying to log in.
func (s *state) saved() (login.Saved, error) {
	l, ok := s.file.Endpoints[s.endpoint]
	if !ok {
		return l, fmt.Errorf("not signed in to %s: run cocoonbox login --endpoint %s", s.endpoint, s.endpoint)
	}
	return l, nil
}

// token is what the Account calls carry: $COCOONBOX_TOKEN when set (as in
// a box), else the endpoint's stored login.
func (s *state) token() (string, error) {
	if t := os.Getenv("COCOONBOX_TOKEN"); t != "" {
		return t, nil
	}
	l, err := s.saved()
	return l.Token, err
}

// account is the Account service of the endpoint, called with token().
func (s *state) account() (controlv1connect.AccountClient, error) {
	token, err := s.token()
	if err != nil {
		return nil, err
	}
	return s.accountWith(token), nil
}

// accountWith is the Account service of the endpoint, called with token.
func (s *state) accountWith(token string) controlv1connect.AccountClient {
	return controlv1connect.NewAccountClient(http.DefaultClient, s.endpoint, connect.WithInterceptors(client.BearerInterceptor(token)))
}

// boxes is the Boxes service of the endpoint, called with token().
func (s *state) boxes() (controlv1connect.BoxesClient, error) {
	token, err := s.token()
	if err != nil {
		return nil, err
	}
	return controlv1connect.NewBoxesClient(http.DefaultClient, s.endpoint, connect.WithInterceptors(client.BearerInterceptor(token))), nil
}

// explain turns an Account call's error into what went wrong and what to do.
func (s *state) explain(what string, err error) error {
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		return fmt.Errorf("%s: %s", what, s.tokenRefused())
	case connect.CodeNotFound:
		var ce *connect.Error
		errors.As(err, &ce)
		return fmt.Errorf("%s: %s (cocoonbox devices lists yours)", what, ce.Message())
	case connect.CodeUnavailable:
		return fmt.Errorf("%s: %w", what, s.why(err))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// tokenRefused says which token the api refused and what to do: a bad
// $COCOONBOX_TOKEN is not mended by a login, since the variable wins.
func (s *state) tokenRefused() string {
	if os.Getenv("COCOONBOX_TOKEN") != "" {
		return fmt.Sprintf("the api at %s refused $COCOONBOX_TOKEN (revoked, or not a token of this api): set it to a live token (the console's personal token or a device's), or unset it to use this CLI's login", s.endpoint)
	}
	return fmt.Sprintf("the api at %s refused this CLI's token (revoked or signed out): run cocoonbox login --endpoint %s", s.endpoint, s.endpoint)
}

// why tells a call that got no answer (the api out of reach: said so,
// with how to pick another) from an UNAVAILABLE answer of the api (its
// own words, and whether trying later may help). It wraps err, so its
// code stays readable (--json's error code).
func (s *state) why(err error) error {
	var ce *connect.Error
	switch {
	case client.Unanswered(err) || !errors.As(err, &ce):
		return fmt.Errorf("cannot reach the api at %s (is it running? --endpoint picks another): %w", s.endpoint, err)
	case client.Retryable(err):
		return said{fmt.Sprintf("the api at %s cannot do it now: %s (try again in a while)", s.endpoint, ce.Message()), err}
	}
	return said{fmt.Sprintf("the api at %s cannot do it: %s (trying again will not help: tell the api's operator)", s.endpoint, ce.Message()), err}
}

// said is an error told in words of the CLI's own, wrapping its cause.
type said struct {
	msg   string
	cause error
}

func (e said) Error() string { return e.msg }
func (e said) Unwrap() error { return e.cause }

// explainBox turns a Boxes call's error into what went wrong: the api's
// message names the field and the rule it broke (INVALID_ARGUMENT), the
// box that is not there, the name taken, the state or the limit; the rest
// as explain.
func (s *state) explainBox(what string, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return s.explain(what, err)
	}
	switch ce.Code() {
	case connect.CodeNotFound:
		return fmt.Errorf("%s: %s (cocoonbox boxes lists yours)", what, ce.Message())
	case connect.CodeInvalidArgument, connect.CodeAlreadyExists, connect.CodeFailedPrecondition, connect.CodeResourceExhausted:
		return fmt.Errorf("%s: %s", what, ce.Message())
	}
	return s.explain(what, err)
}

// save writes cli.json.
func (s *state) save() error { return s.file.Save(s.path) }
