package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/command"
)

// inviteTokenPrefix starts an invite-scoped token: cbit_ and 64 hex.
const inviteTokenPrefix = "cbit_"

// inviteCmd is cocoonbox invite create [--days N] | list (Contract:
// Sign-in with GitHub and signup, "Invite-scoped tokens"): one-use
// invites made with an admin's invite-scoped token, read from
// $COCOONBOX_INVITE_TOKEN, else the file of --token-file or
// $COCOONBOX_INVITE_TOKEN_FILE; never from the command line, where any
// user of the machine could read it (ps, /proc/PID/cmdline).
func inviteCmd(verb string, fs *command.Flags) runner {
	tokenFile := fs.String("token-file", "", "read the invite-scoped token from `PATH`")
	asJSON := fs.Bool("json", false, "print the api's JSON answer")
	var days int
	if verb == "create" {
		fs.Func("days", "the invite lasts `N` days, 1 to 7 (default 2)", func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 7 {
				return errors.New("days is 1 to 7")
			}
			days = n
			return nil
		})
	}
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		if len(pos) > 0 {
			if strings.HasPrefix(pos[0], inviteTokenPrefix) {
				// Never echoed: it is a secret, now in this shell's history.
				return command.UsageError{Msg: "the invite-scoped token is never taken from the command line: set COCOONBOX_INVITE_TOKEN, or name a file with --token-file or COCOONBOX_INVITE_TOKEN_FILE (and revoke the token you typed)"}
			}
			return command.UsageError{Msg: fmt.Sprintf("invite %s: unexpected argument %q", verb, pos[0])}
		}
		token, err := inviteToken(*tokenFile)
		if err != nil {
			return err
		}
		if verb == "create" {
			body := map[string]int{}
			if days > 0 {
				body["days"] = days
			}
			var inv struct {
				ID        string    `json:"id"`
				Code      string    `json:"code"`
				Link      string    `json:"link"`
				ExpiresAt time.Time `json:"expires_at"`
			}
			raw, err := inviteCall(ctx, st.endpoint, token, http.MethodPost, body, http.StatusCreated, &inv)
			if err != nil {
				return err
			}
			if *asJSON {
				_, err := stdout.Write(raw)
				return err
			}
			fmt.Fprintf(stdout, "%s%s\none use, until %s (invite %s)\n", st.endpoint, inv.Link, inv.ExpiresAt.Local().Format("2006-01-02 15:04 MST"), inv.ID)
			return nil
		}
		var list struct {
			Invites []struct {
				ID        string    `json:"id"`
				Uses      int       `json:"uses"`
				Used      int       `json:"used"`
				ExpiresAt time.Time `json:"expires_at"`
				Status    string    `json:"status"`
			} `json:"invites"`
		}
		raw, err := inviteCall(ctx, st.endpoint, token, http.MethodGet, nil, http.StatusOK, &list)
		if err != nil {
			return err
		}
		if *asJSON {
			_, err := stdout.Write(raw)
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tUSED\tEXPIRES\tSTATUS")
		for _, i := range list.Invites {
			fmt.Fprintf(w, "%s\t%d of %d\t%s\t%s\n", i.ID, i.Used, i.Uses, i.ExpiresAt.Local().Format("2006-01-02 15:04"), i.Status)
		}
		return w.Flush()
	}
}

// inviteToken is the invite-scoped token: $COCOONBOX_INVITE_TOKEN, else
// the first line of the file of --token-file, else of
// $COCOONBOX_INVITE_TOKEN_FILE. No error carries it.
func inviteToken(flagFile string) (string, error) {
	tok, from := os.Getenv("COCOONBOX_INVITE_TOKEN"), "COCOONBOX_INVITE_TOKEN"
	if tok == "" {
		path, what := flagFile, "--token-file"
		if path == "" {
			path, what = os.Getenv("COCOONBOX_INVITE_TOKEN_FILE"), "COCOONBOX_INVITE_TOKEN_FILE"
		}
		if path == "" {
			return "", command.UsageError{Msg: "no invite-scoped token: set COCOONBOX_INVITE_TOKEN, or name its file with --token-file or COCOONBOX_INVITE_TOKEN_FILE"}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("read the invite-scoped token (%s): %w", what, err)
		}
		tok, from = strings.TrimSpace(string(b)), what+" "+path
	}
	tok = strings.TrimSpace(tok)
	hex, ok := strings.CutPrefix(tok, inviteTokenPrefix)
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%s does not hold an invite-scoped token (cbit_ and 64 lowercase hex digits)", from)
	}
	return tok, nil
}

// inviteCall sends one call to /cb/api/invites with the token and decodes
// a want answer into v, answering its raw JSON; another status is an
// error with the api's message.
func inviteCall(ctx context.Context, endpoint, token, method string, body any, want int, v any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint+"/cb/api/invites", rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("read the api's answer: %w", err)
	}
	if resp.StatusCode != want {
		var e struct{ Message string }
		json.Unmarshal(raw, &e)
		if resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("the api refused the invite-scoped token (%s): it is unknown or revoked, or its admin is no longer an enabled admin", e.Message)
		}
		return nil, fmt.Errorf("the api answered %d: %s", resp.StatusCode, e.Message)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("the api's answer: %w", err)
	}
	return raw, nil
}
