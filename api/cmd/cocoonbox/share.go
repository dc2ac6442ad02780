package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// shareID is a share's id as the api makes them (api/shares).
var shareID = regexp.MustCompile(`^sh-[0-9a-f]{16}$`)

func shareCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "share",
		Short: "Share a box's screen by link; list, revoke and audit the shares",
		Long: `Share a box's screen by link: whoever holds the link opens the screen in a
browser, no sign-in, with take-over input or --view-only (the api drops a
view-only viewer's keys, pointer and clipboard), until it expires (--days,
1 to 30, default 7) or you revoke it. Revoking it, or cocoonbox logout
--everywhere, closes its open viewers at once. The link is printed once; the
api keeps only a hash of its secret.`,
		Example: "  cocoonbox share create demo --view-only --days 1\n  cocoonbox share list\n  cocoonbox share revoke sh-0123456789abcdef",
	}
	for _, k := range []struct{ use, short, example string }{
		{"create NAME", "Share box NAME's screen and print the link (shown once)", "  cocoonbox share create demo --view-only --days 1"},
		{"list", "Your shares, newest first, with their viewers open now", "  cocoonbox share list --json"},
		{"revoke ID", "End a share: its link stops working, its viewers close at once", "  cocoonbox share revoke sh-0123456789abcdef"},
		{"log [ID]", "Every open and close of a viewer of your shares (or share ID's)", "  cocoonbox share log sh-0123456789abcdef"},
	} {
		sub := &cobra.Command{Use: k.use, Short: k.short, Example: k.example}
		verb := sub.Name()
		sub.Args = shareArgs(verb)
		c.AddCommand(leaf(sub, false, func(fs *command.Flags) runner { return shareCmd(verb, fs) }))
	}
	return in("boxes", c)
}

// shareArgs checks share VERB's positional arguments before any call.
func shareArgs(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch verb {
		case "list":
			return command.NoArgs(cmd, args)
		case "create":
			if len(args) != 1 {
				return command.Usagef("share create needs one box NAME")
			}
			if !client.BoxName.MatchString(args[0]) {
				return command.Usagef("share create: NAME %q %s", shorten(args[0]), client.BoxNameRule)
			}
		case "revoke":
			if len(args) != 1 {
				return command.Usagef("share revoke needs one share ID (share list shows them)")
			}
		case "log":
			if err := command.MaxArgs(1)(cmd, args); err != nil {
				return err
			}
		}
		if verb != "create" && len(args) == 1 && strings.HasPrefix(args[0], "cbs_") {
			// Never echoed: it is a link's secret, now in this shell's history.
			return command.Usagef("share %s: that is a share link's secret, not a share's id (sh- and 16 hex; share list shows them)", verb)
		}
		if verb != "create" && len(args) == 1 && !shareID.MatchString(args[0]) {
			return command.Usagef("share %s: ID %q is not a share's id (sh- and 16 hex; share list shows them)", verb, shorten(args[0]))
		}
		return nil
	}
}

// shareCmd is cocoonbox share create NAME [--view-only] [--days N] |
// list | revoke ID | log [ID] (issue 43, Deliver 4; docs/screen.md,
// "Shares") on the Shares service.
func shareCmd(verb string, fs *command.Flags) runner {
	asJSON := fs.Bool("json", false, "print JSON")
	var viewOnly *bool
	days := 0
	if verb == "create" {
		viewOnly = fs.Bool("view-only", false, "the viewer sees the screen; its keys, pointer and clipboard never reach the box")
		fs.Func("days", "the link works `N` days, 1 to 30 (default 7)", func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 30 {
				return errors.New("days is 1 to 30")
			}
			days = n
			return nil
		})
	}
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		token, err := st.token()
		if err != nil {
			return err
		}
		c := controlv1connect.NewSharesClient(http.DefaultClient, st.endpoint, connect.WithInterceptors(client.BearerInterceptor(token)))
		what := "share " + verb
		switch verb {
		case "create":
			resp, err := c.CreateShare(ctx, connect.NewRequest(&controlv1.CreateShareRequest{Box: pos[0], ViewOnly: *viewOnly, Days: int32(days)}))
			if err != nil {
				return explainShare(st, what, err)
			}
			if *asJSON {
				return printJSON(stdout, resp.Msg)
			}
			sh := resp.Msg.Share
			input := "take-over input"
			if sh.ViewOnly {
				input = "view-only"
			}
			fmt.Fprintf(stdout, "%s\nshare %s of %s, %s, until %s: the link is shown once; anyone with it opens the screen\n",
				resp.Msg.Link, sh.Id, sh.BoxName, input, msTime(sh.ExpiresAtMs))
			return nil
		case "list":
			resp, err := c.ListShares(ctx, connect.NewRequest(&controlv1.ListSharesRequest{}))
			if err != nil {
				return explainShare(st, what, err)
			}
			if *asJSON {
				return printJSON(stdout, resp.Msg.Shares)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tBOX\tINPUT\tEXPIRES\tSTATE\tVIEWERS")
			for _, sh := range resp.Msg.Shares {
				input, state := "take-over", "live"
				if sh.ViewOnly {
					input = "view-only"
				}
				if sh.RevokedAtMs != 0 {
					state = "revoked " + msTime(sh.RevokedAtMs)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", sh.Id, sh.BoxName, input, msTime(sh.ExpiresAtMs), state, sh.Viewers)
			}
			return tw.Flush()
		case "revoke":
			resp, err := c.RevokeShare(ctx, connect.NewRequest(&controlv1.RevokeShareRequest{Id: pos[0]}))
			if err != nil {
				return explainShare(st, what, err)
			}
			return printDone(stdout, *asJSON, resp.Msg, fmt.Sprintf("Share %s of %s revoked: its link no longer works, its viewers are closed.", resp.Msg.Id, resp.Msg.BoxName))
		}
		id := ""
		if len(pos) == 1 {
			id = pos[0]
		}
		resp, err := c.ShareLog(ctx, connect.NewRequest(&controlv1.ShareLogRequest{Id: id}))
		if err != nil {
			return explainShare(st, what, err)
		}
		if *asJSON {
			return printJSON(stdout, resp.Msg.Events)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tSHARE\tEVENT\tVIEWER\tADDRESS\tREASON")
		for _, e := range resp.Msg.Events {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", msTime(e.AtMs), e.ShareId, e.Event, e.Viewer, e.Address, e.Reason)
		}
		return tw.Flush()
	}
}

// explainShare says what a refused call means.
func explainShare(st *state, what string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeNotFound:
			return fmt.Errorf("%s: %s (cocoonbox boxes lists your boxes, cocoonbox share list your shares)", what, ce.Message())
		case connect.CodeInvalidArgument:
			return fmt.Errorf("%s: %s", what, ce.Message())
		}
	}
	return st.explain(what, err)
}
