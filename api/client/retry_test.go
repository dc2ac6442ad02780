package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// Over a real connect call: an api's UNAVAILABLE is final unless marked
// with MayRetry; a call with no answer (a closed port) may be made again.
func TestRetryableTellsAnAnswerFromNone(t *testing.T) {
	var hint bool
	mux := http.NewServeMux()
	mux.Handle("/t.S/M", connect.NewUnaryHandler("/t.S/M", func(context.Context, *connect.Request[controlv1.ListBoxesRequest]) (*connect.Response[controlv1.ListBoxesResponse], error) {
		err := connect.NewError(connect.CodeUnavailable, errors.New("no box supervisor"))
		if hint {
			return nil, MayRetry(err)
		}
		return nil, err
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	call := func(url string) error {
		_, err := connect.NewClient[controlv1.ListBoxesRequest, controlv1.ListBoxesResponse](http.DefaultClient, url+"/t.S/M").
			CallUnary(context.Background(), connect.NewRequest(&controlv1.ListBoxesRequest{}))
		return err
	}
	if err := call(srv.URL); err == nil || Unanswered(err) || Retryable(err) {
		t.Errorf("UNAVAILABLE without the hint: %v, unanswered %v, retryable %v; want an answer, final", err, Unanswered(err), Retryable(err))
	}
	hint = true
	if err := call(srv.URL); err == nil || Unanswered(err) || !Retryable(err) {
		t.Errorf("UNAVAILABLE with the hint: %v, unanswered %v, retryable %v; want an answer that may be retried", err, Unanswered(err), Retryable(err))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	if err := call(closed); err == nil || !Unanswered(err) || !Retryable(err) {
		t.Errorf("a closed port: %v, unanswered %v, retryable %v; want no answer, retryable", err, Unanswered(err), Retryable(err))
	}
}
