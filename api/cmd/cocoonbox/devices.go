package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// deviceJSON is one line of devices --json: the console's fields plus current.
type deviceJSON struct {
	ID        string     `json:"id"`
	Client    string     `json:"client"`
	Label     string     `json:"label"`
	CreatedAt time.Time  `json:"created_at"`
	UsedAt    *time.Time `json:"used_at"`
	Current   bool       `json:"current"`
}

// devices lists the account's devices (* marks the CLI's own).
func devices(fs *command.Flags) runner {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		acct, err := st.account()
		if err != nil {
			return err
		}
		resp, err := acct.ListDevices(ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
		if err != nil {
			return st.explain("list devices", err)
		}
		if *asJSON {
			out := []deviceJSON{}
			for _, d := range resp.Msg.Devices {
				j := deviceJSON{ID: d.Id, Client: d.Client, Label: d.Label, CreatedAt: d.CreatedAt.AsTime(), Current: d.Current}
				if d.UsedAt != nil {
					t := d.UsedAt.AsTime()
					j.UsedAt = &t
				}
				out = append(out, j)
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ID\tCLIENT\tNAME\tSIGNED IN\tLAST USED")
		for _, d := range resp.Msg.Devices {
			mark := " "
			if d.Current {
				mark = "*"
			}
			used := "never"
			if d.UsedAt != nil {
				used = d.UsedAt.AsTime().Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\n", mark, d.Id, d.Client, d.Label, d.CreatedAt.AsTime().Local().Format(time.DateTime), used)
		}
		return tw.Flush()
	}
}

// revokeDevice is `devices revoke ID`.
func revokeDevice(fs *command.Flags) runner {
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		if !client.DeviceID.MatchString(pos[0]) {
			return command.UsageError{Msg: fmt.Sprintf("devices revoke: ID %q %s", shorten(pos[0]), client.DeviceIDRule)}
		}
		acct, err := st.account()
		if err != nil {
			return err
		}
		id := pos[0]
		if _, err := acct.RevokeDevice(ctx, connect.NewRequest(&controlv1.RevokeDeviceRequest{DeviceId: id})); err != nil {
			return st.explain("revoke "+id, err)
		}
		fmt.Fprintf(stdout, "Revoked %s.\n", id)
		return nil
	}
}
