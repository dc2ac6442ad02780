package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/guest/offload/envstep"
	"github.com/cocoonbox/cocoonbox/guest/offload/inbox"
	"github.com/cocoonbox/cocoonbox/guest/offload/verbs"
)

// envVerb waits for the environment step through the inbox (at most 900
// s) and prints its report, as text unless --json. --no-wait reads the
// report as it stands, without the inbox.
func envVerb(paths offload.Paths, ib verbs.Inbox, args []string) (map[string]any, error) {
	f := newFlags("env", "[--repo K] [--no-wait] [--json]")
	key := f.String("repo", repoDefault(), "repo key (default $COCOONBOX_OFFLOAD_REPO)")
	noWait, asJSON := f.Bool("no-wait", false, "read the report as it stands"), f.Bool("json", false, "print the report as JSON")
	if help, err := f.parse(args, 0); help || err != nil {
		return nil, err
	}
	if err := needKey(*key); err != nil {
		return nil, err
	}
	var rep *envstep.Report
	if *noWait {
		var r envstep.Report
		err := offload.ReadJSON(filepath.Join(paths.Repo(*key), inbox.ReportFile), &r)
		if err == nil {
			rep = &r
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	} else {
		progress("env: waiting for the environment step (at most 900 s)")
		resp, err := ib(&offload.Request{Op: "env", Repo: *key, WaitMs: offload.MaxEnvWaitMs}, offload.MaxEnvWaitMs*time.Millisecond+30*time.Second)
		if err != nil {
			return nil, err
		}
		if resp["report"] != nil {
			data, _ := json.Marshal(resp["report"])
			rep = &envstep.Report{}
			json.Unmarshal(data, rep)
		}
	}
	if *asJSON {
		return map[string]any{"report": rep}, nil
	}
	printReport(rep)
	return nil, nil
}

// printReport is the text form: per tool wanted and source, installed,
// outcome; then each lockfile fetch.
func printReport(rep *envstep.Report) {
	if rep == nil {
		fmt.Println("no environment step for this repo (no env.json was sent)")
		return
	}
	state := rep.Outcome
	if !rep.Done {
		state = "running"
	}
	fmt.Printf("environment step: %s", state)
	if rep.Reason != "" {
		fmt.Printf(" (%s)", rep.Reason)
	}
	fmt.Println()
	for _, t := range rep.Tools {
		inst := t.Installed
		if inst == "" {
			inst = "-"
		}
		fmt.Printf("  %-10s wanted %-10s from %-26s installed %-10s %s", t.Tool, t.Wanted, t.Source, inst, t.Outcome)
		if t.Reason != "" {
			fmt.Printf(": %s", t.Reason)
		}
		fmt.Println()
	}
	for _, l := range rep.Lockfiles {
		fmt.Printf("  fetch %-18s %-40s %s", l.File, l.Command, l.Outcome)
		if l.Reason != "" {
			fmt.Printf(": %s", l.Reason)
		}
		fmt.Println()
	}
}

// eventVerb passes a hook's report to the inbox: claude's JSON on stdin,
// codex's notify JSON as the last argument.
func eventVerb(ib verbs.Inbox, args []string) (map[string]any, error) {
	f := newFlags("event", "--repo K --cli C --hook NAME [payload] < payload")
	key, cli, hook := f.String("repo", "", "repo key"), f.String("cli", "", "claude or codex"), f.String("hook", "", "hook name")
	if help, err := f.parse(args, 1); help || err != nil {
		return nil, err
	}
	if err := checkAll(needKey(*key), offload.CheckKind(*cli)); err != nil {
		return nil, err
	}
	var payload []byte
	if f.NArg() == 1 {
		payload = []byte(f.Arg(0))
	} else if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice == 0 {
		data, err := readStdin(offload.MaxRequest / 2)
		if err != nil {
			return nil, err
		}
		payload = []byte(data)
	}
	if len(payload) > 0 && !json.Valid(payload) {
		return nil, usageErr("the %s payload is not JSON", *hook)
	}
	// A hook can fire while the inbox restarts: an idle report lost then
	// left a session busy for ever and its queued message undelivered
	// (seen by TestInboxKilledAndBoxRebootedLosesNothing), so it is sent
	// again. Not twice applied: a second idle report would take the next
	// queued message into a CLI the first one's message already keeps busy
	// (TestHookReportDeliveredTwiceIsAppliedOnce), so it carries an id.
	req := &offload.Request{Op: "event", Repo: *key, CLI: *cli, Hook: *hook, Payload: payload, RequestID: requestID()}
	if _, err := callRetry(ib, req, 10*time.Second); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}
