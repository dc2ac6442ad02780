package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/client/login"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// loginWait bounds how long login waits for the browser.
const loginWait = 10 * time.Minute

func loginCmd(fs *command.Flags) runner {
	invite := fs.String("invite", "", "an invite code (cbi_ and 64 hex) for a new account's signup")
	deviceName := fs.String("device-name", "", "the device's name in the device list (default: the host name)")
	noBrowser := fs.Bool("no-browser", false, "print the URL only; do not start xdg-open")
	tokenStdin := fs.Bool("token-stdin", false, "read a token from standard input instead of the browser")
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		if *tokenStdin {
			return loginPaste(ctx, st, stdin, stdout)
		}
		if *invite != "" && !client.IsInviteCode(*invite) {
			return command.UsageError{Msg: fmt.Sprintf("--invite %q is not an invite code (cbi_ and 64 hex digits)", *invite)}
		}
		name := *deviceName
		if name == "" {
			name = hostName()
		}
		if len(name) > client.MaxDeviceName || !utf8.ValidString(name) || name == "" {
			return command.UsageError{Msg: fmt.Sprintf("--device-name %q must be 1 to %d bytes of UTF-8", name, client.MaxDeviceName)}
		}

		if err := reachable(ctx, st.endpoint); err != nil {
			return err
		}
		flow, err := login.Start(login.Request{Endpoint: st.endpoint, Client: client.CLI, DeviceName: name, Invite: *invite})
		if err != nil {
			return err
		}
		u := flow.AuthorizeURL()
		fmt.Fprintf(stdout, "To sign in, open this page in your browser:\n\n  %s\n\nWaiting for the browser (Ctrl-C to stop)...\n", u)
		if !*noBrowser {
			openBrowser(u)
		}
		wctx, cancel := context.WithTimeout(ctx, loginWait)
		defer cancel()
		res, err := flow.Wait(wctx)
		if err != nil {
			var oe *login.OAuthError
			if errors.As(err, &oe) && oe.Code == client.ErrAccessDenied {
				return fmt.Errorf("the sign-in was denied in the browser: run cocoonbox login again to retry")
			}
			return fmt.Errorf("sign-in at %s: %w", st.endpoint, err)
		}
		tok, err := login.Exchange(ctx, http.DefaultClient, st.endpoint, client.CLI.ID, res)
		if err != nil {
			return fmt.Errorf("sign-in at %s: %w: run cocoonbox login again", st.endpoint, err)
		}
		// Contract: a new CLI login revokes the browser token it replaces.
		if old, ok := st.file.Endpoints[st.endpoint]; ok && old.Source == login.SourceBrowser && old.Token != tok.AccessToken {
			if err := login.Revoke(ctx, http.DefaultClient, st.endpoint, client.CLI.ID, old.Token); err != nil {
				fmt.Fprintf(os.Stderr, "cocoonbox: warning: the token this login replaces was not revoked (%v): see cocoonbox devices\n", err)
			}
		}
		st.file.Endpoint = st.endpoint
		st.file.Endpoints[st.endpoint] = login.Saved{Token: tok.AccessToken, Source: login.SourceBrowser}
		if err := st.save(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Signed in to %s as device %q.\n", st.endpoint, name)
		return nil
	}
}

// loginPaste keeps a token read from stdin after the api accepted it.
func loginPaste(ctx context.Context, st *state, stdin io.Reader, stdout io.Writer) error {
	var line string
	err := command.Read(ctx, stdin, func() (err error) {
		line, err = bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
		return err
	})
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the token from standard input: %w", err)
	}
	token := strings.TrimSpace(line)
	if !isToken(token) {
		return fmt.Errorf("standard input holds no token: paste a token of cb_ and 64 hex digits (the console's token page, or the app)")
	}
	if _, err := st.accountWith(token).ListDevices(ctx, connect.NewRequest(&controlv1.ListDevicesRequest{})); err != nil {
		return st.explain("check the pasted token", err)
	}
	st.file.Endpoint = st.endpoint
	st.file.Endpoints[st.endpoint] = login.Saved{Token: token, Source: login.SourcePaste}
	if err := st.save(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Signed in to %s with the pasted token (logout will not revoke it).\n", st.endpoint)
	return nil
}

// isToken is the shape of the personal and device tokens: cb_ and 64 hex.
func isToken(s string) bool {
	hex, ok := strings.CutPrefix(s, "cb_")
	return ok && len(hex) == 64 && strings.Trim(hex, "0123456789abcdef") == ""
}

// hostName is the device's default name: the host name cut to 64 bytes.
func hostName() string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		return "cocoonbox CLI"
	}
	for len(name) > client.MaxDeviceName {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// openBrowser starts xdg-open where there is one; the URL is printed anyway,
// so a machine without a desktop signs in from another browser.
func openBrowser(u string) {
	path, err := exec.LookPath("xdg-open")
	if err != nil {
		return
	}
	cmd := exec.Command(path, u)
	cmd.Stdout, cmd.Stderr = nil, nil
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}

// reachable fails fast, before a browser is opened on a page that cannot
// load, when the api does not answer its /healthz.
func reachable(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", endpoint+"/healthz", nil)
	if err != nil {
		return command.UsageError{Msg: fmt.Sprintf("endpoint %q: %v", endpoint, err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the api at %s (is it running? --endpoint picks another): %w", endpoint, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the api at %s is not healthy (/healthz answered %s): try again once it is", endpoint, resp.Status)
	}
	return nil
}
