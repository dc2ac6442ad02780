package main

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/client/login"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// logout forgets the endpoint's token. It revokes only a token this CLI got
// through the browser: a pasted one (from the app, say) stays valid there.
// --everywhere first ends every sign-in of the account (Account.SignOutEverywhere).
func logout(fs *command.Flags) runner {
	everywhere := fs.Bool("everywhere", false, "end every sign-in of your account: console sessions, the personal token, every device")
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		l, err := st.saved()
		if err != nil {
			return err
		}
		if *everywhere {
			if _, err := st.accountWith(l.Token).SignOutEverywhere(ctx, connect.NewRequest(&controlv1.SignOutEverywhereRequest{})); err != nil {
				return st.explain("sign out everywhere", err)
			}
			fmt.Fprintf(stdout, "Signed out everywhere at %s: every console session, the personal token and every device.\n", st.endpoint)
		} else if l.Source == login.SourceBrowser {
			if err := login.Revoke(ctx, http.DefaultClient, st.endpoint, client.CLI.ID, l.Token); err != nil {
				return fmt.Errorf("%w at %s; the token is still in %s: run cocoonbox logout again when the api is back", err, st.endpoint, st.path)
			}
			fmt.Fprintf(stdout, "Signed out of %s; this device's token is revoked.\n", st.endpoint)
		} else {
			fmt.Fprintf(stdout, "Signed out of %s; the pasted token was forgotten here and stays valid where it came from.\n", st.endpoint)
		}
		// The endpoint stays the default one: the next command's "not signed
		// in" names the api the user signed out of, not 127.0.0.1:18200.
		delete(st.file.Endpoints, st.endpoint)
		return st.save()
	}
}
