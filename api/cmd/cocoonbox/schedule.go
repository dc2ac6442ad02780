package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// boxSchedule is `cocoonbox box schedule NAME [--at TIME | --cron EXPR]
// [--tz ZONE] [--keep-up DURATION] | --list | --clear [--id N]` (Contract:
// Scheduled wake; docs/wake.md).
func boxSchedule(fs *command.Flags) runner {
	asJSON := fs.Bool("json", false, "print JSON")
	at := fs.String("at", "", "wake once at this time (RFC 3339, e.g. 2026-12-08T07:30:00+01:00)")
	cronExpr := fs.String("cron", "", "wake on this cron expression (minute hour day month weekday), read in --tz")
	tz := fs.String("tz", "", "the IANA time zone of --cron (default UTC)")
	keepUp := fs.Duration("keep-up", 0, "after each wake, idle hibernate leaves the box up this long (0 to 168h)")
	list := fs.Bool("list", false, "list the box's schedules")
	clear := fs.Bool("clear", false, "remove the box's schedules (only --id's with --id)")
	id := fs.Int64("id", 0, "with --clear: the one schedule to remove")
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		if len(pos) != 1 {
			return command.UsageError{Msg: "box schedule needs a NAME"}
		}
		name := pos[0]
		modes := 0
		for _, on := range []bool{*list, *clear, *at != "" || *cronExpr != ""} {
			if on {
				modes++
			}
		}
		if modes != 1 {
			return command.UsageError{Msg: "box schedule: give one of --at or --cron (set), --list, or --clear"}
		}
		if err := checkSchedule(name, *cronExpr, *tz, *keepUp, *id); err != nil {
			return err
		}
		token, err := st.token()
		if err != nil {
			return err
		}
		c := controlv1connect.NewSchedulesClient(http.DefaultClient, st.endpoint, connect.WithInterceptors(client.BearerInterceptor(token)))
		what := "box schedule " + name
		switch {
		case *list:
			resp, err := c.ListSchedules(ctx, connect.NewRequest(&controlv1.ListSchedulesRequest{Box: name}))
			if err != nil {
				return explainSchedule(st, what, err)
			}
			if *asJSON {
				return printJSON(stdout, resp.Msg.Schedules)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tWHEN\tNEXT\tKEEP UP\tSLEEP AT")
			for _, s := range resp.Msg.Schedules {
				when := s.Cron + " (" + s.TimeZone + ")"
				if s.Cron == "" {
					when = msTime(s.AtMs)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", s.Id, when, msTime(s.NextAtMs), time.Duration(s.KeepUpSeconds)*time.Second, msTime(s.SleepAtMs))
			}
			return tw.Flush()
		case *clear:
			resp, err := c.ClearSchedules(ctx, connect.NewRequest(&controlv1.ClearSchedulesRequest{Box: name, Id: *id}))
			if err != nil {
				return explainSchedule(st, what, err)
			}
			return printDone(stdout, *asJSON, map[string]int64{"cleared": resp.Msg.Cleared}, fmt.Sprintf("Removed %d schedule(s) of %s.", resp.Msg.Cleared, name))
		}
		req := &controlv1.SetScheduleRequest{Box: name, Cron: *cronExpr, TimeZone: *tz, KeepUpSeconds: int64(*keepUp / time.Second)}
		if *at != "" {
			t, err := time.Parse(time.RFC3339, *at)
			if err != nil {
				return command.UsageError{Msg: fmt.Sprintf("box schedule: --at %q is not an RFC 3339 time (e.g. 2026-12-08T07:30:00+01:00)", *at)}
			}
			req.AtMs = t.UnixMilli()
		}
		resp, err := c.SetSchedule(ctx, connect.NewRequest(req))
		if err != nil {
			return explainSchedule(st, what, err)
		}
		return printDone(stdout, *asJSON, resp.Msg, fmt.Sprintf("Schedule %d set: %s wakes next at %s.", resp.Msg.Id, name, msTime(resp.Msg.NextAtMs)))
	}
}

// checkSchedule refuses, before any call, a NAME, --cron, --tz,
// --keep-up or --id that breaks the grammar the api checks them with
// (api/client's), naming the flag and the rule. Empty is not given.
func checkSchedule(name, cronExpr, tz string, keepUp time.Duration, id int64) error {
	bad := func(flag, rule string) error {
		return command.UsageError{Msg: fmt.Sprintf("box schedule %q: %s %s", shorten(name), flag, rule)}
	}
	if !client.BoxName.MatchString(name) {
		return command.UsageError{Msg: fmt.Sprintf("box schedule: NAME %q %s", shorten(name), client.BoxNameRule)}
	}
	if cronExpr != "" {
		if _, err := client.ParseCron(cronExpr); err != nil {
			return bad("--cron", client.CronRule(cronExpr)+": "+err.Error())
		}
	}
	if _, err := client.TimeZone(tz); err != nil {
		return bad("--tz", err.Error())
	}
	if err := client.CheckKeepUp(keepUp); err != nil {
		return bad("--keep-up", err.Error())
	}
	if id < 0 {
		return bad("--id", fmt.Sprintf("%d is not a schedule's id (1 or more; --list shows them)", id))
	}
	return nil
}

// explainSchedule says what a refused call means.
func explainSchedule(st *state, what string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeNotFound:
			return fmt.Errorf("%s: %s (cocoonbox boxes lists yours; --list the schedules)", what, ce.Message())
		case connect.CodeInvalidArgument:
			return fmt.Errorf("%s: %s", what, ce.Message())
		}
	}
	return st.explain(what, err)
}

// msTime is a Unix ms time for a person, "-" for 0.
func msTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04 MST")
}
