package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/guest/offload/inbox"
	"github.com/cocoonbox/cocoonbox/guest/offload/verbs"
)

// flags is one verb's flag set, parsed the guest/cli way: --help and
// --version on stdout (exit 0), a bad flag on stderr with the usage.
type flags struct {
	*flag.FlagSet
	verb, synopsis string
}

func newFlags(verb, synopsis string) *flags {
	return &flags{FlagSet: flag.NewFlagSet(verb, flag.ContinueOnError), verb: verb, synopsis: synopsis}
}

func (f *flags) usage() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "usage: cocoonbox-agent offload %s %s\n\nflags:\n", f.verb, f.synopsis)
	f.SetOutput(&b)
	f.PrintDefaults()
	return b.String()
}

// parse returns help=true when --help or --version was asked (and
// printed). A usage error is printed by guest/cli on stderr and returned
// for the verb's JSON line; it allows at most maxArgs arguments.
func (f *flags) parse(args []string, maxArgs int) (help bool, err error) {
	var errb bytes.Buffer
	c := cli.Command{Name: "cocoonbox-agent offload " + f.verb, Usage: f.usage(), Stderr: &errb}
	rest, code, exit := c.Parse(f.FlagSet, args)
	if exit && code == cli.OK {
		return true, nil
	}
	if !exit && len(rest) > maxArgs {
		code = c.UsageError("unexpected argument %q", rest[maxArgs])
	}
	if code != cli.OK {
		os.Stderr.Write(errb.Bytes())
		first, _, _ := strings.Cut(errb.String(), "\n")
		_, msg, _ := strings.Cut(first, ": ")
		return false, &verbError{code: "usage", exit: exitUsage, err: errors.New(msg), printed: true}
	}
	return false, nil
}

func needKey(key string) error {
	if err := offload.CheckRepoKey(key); err != nil {
		return usageErr("--repo: %v", err)
	}
	return nil
}

// repoDefault is --repo's default for the box agent's verbs.
func repoDefault() string { return os.Getenv("COCOONBOX_OFFLOAD_REPO") }

func callInbox(paths offload.Paths) verbs.Inbox {
	return func(req *offload.Request, timeout time.Duration) (map[string]any, error) {
		return offload.Call(paths.Socket, req, timeout)
	}
}

func requestID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func readStdin(limit int64) (string, error) {
	data, err := io.ReadAll(io.LimitReader(os.Stdin, limit+1))
	if err != nil {
		return "", fmt.Errorf("read stdin: %w", err)
	}
	if int64(len(data)) > limit {
		return "", usageErr("stdin is over the limit of %d bytes", limit)
	}
	return string(data), nil
}

func dispatch(verb string, args []string) (map[string]any, error) {
	paths := offload.DefaultPaths()
	p := verbs.New(paths, progress)
	ib := callInbox(paths)
	switch verb {
	case "begin":
		f := newFlags(verb, "--repo K --name N --kind C --id ID [--no-repo]")
		key, name, kind, id := f.String("repo", "", "repo key"), f.String("name", "", "copy name (/workspace/NAME)"), f.String("kind", "", "claude or codex"), f.String("id", "", "offload id")
		noRepo := f.Bool("no-repo", false, "the task has no git repository")
		if help, err := f.parse(args, 0); help || err != nil {
			return nil, err
		}
		if err := checkAll(needKey(*key), offload.CheckName(*name), offload.CheckKind(*kind), offload.CheckOffloadID(*id)); err != nil {
			return nil, err
		}
		resp, err := ib(&offload.Request{Op: "status"}, 10*time.Second)
		if err != nil {
			return nil, err
		}
		sessions := 0
		for _, s := range anyList(resp["sessions"]) {
			if st, _ := s.(map[string]any)["status"].(string); st != offload.StatusStopped {
				sessions++
			}
		}
		res, err := p.Begin(*key, *name, *kind, *id, *noRepo, sessions)
		if err != nil {
			ve := classify(err)
			ve.extra = map[string]any{"findings": res.Findings, "cli": res.CLI}
			return nil, ve
		}
		return map[string]any{"dir": res.Dir, "copy": res.Copy, "refs": res.Refs, "cli": res.CLI, "ignored": res.Ignored, "findings": res.Findings}, nil
	case "send":
		f := newFlags(verb, "--repo K --kind C --id ID [--prepare] [--no-repo] < stream | --repo K (--message | --back) [--interrupt] < text")
		key, kind, id := f.String("repo", "", "repo key"), f.String("kind", "", "claude or codex"), f.String("id", "", "offload id")
		prepare, noRepo := f.Bool("prepare", false, "only the environment step"), f.Bool("no-repo", false, "no git repository")
		message, back, interrupt := f.Bool("message", false, "a message to the running session"), f.Bool("back", false, "BACK to the running session"), f.Bool("interrupt", false, "Esc first")
		if help, err := f.parse(args, 0); help || err != nil {
			return nil, err
		}
		if err := needKey(*key); err != nil {
			return nil, err
		}
		if *message || *back {
			if *message == *back {
				return nil, usageErr("--message and --back exclude each other")
			}
			body, err := readStdin(offload.MaxHandover)
			if err != nil {
				return nil, err
			}
			if *message && strings.TrimSpace(body) == "" {
				return nil, usageErr("--message needs the text on stdin")
			}
			req := &offload.Request{Op: "send", Repo: *key, Body: body, Back: *back, Interrupt: *interrupt, RequestID: requestID()}
			resp, err := callRetry(ib, req, 30*time.Second)
			if err != nil {
				return nil, err
			}
			return map[string]any{"seq": resp["seq"], "delivery": resp["delivery"]}, nil
		}
		if err := checkAll(offload.CheckKind(*kind), offload.CheckOffloadID(*id)); err != nil {
			return nil, err
		}
		res, err := p.Send(verbs.SendOptions{Key: *key, Kind: *kind, ID: *id, Prepare: *prepare, NoRepo: *noRepo}, os.Stdin, ib)
		if err != nil {
			return nil, err
		}
		out := map[string]any{"accepted": res.Accepted, "timings_ms": res.Timings}
		if res.Delivery != "" {
			out["delivery"], out["tmux"] = res.Delivery, res.Tmux
		}
		return out, nil
	case "read":
		f := newFlags(verb, "--repo K [--since N] [--wait S]")
		key, since, wait := f.String("repo", "", "repo key"), f.Int64("since", 0, "outbox seq already seen"), f.Int64("wait", 0, "long-poll up to S seconds (at most 600)")
		if help, err := f.parse(args, 0); help || err != nil {
			return nil, err
		}
		if err := needKey(*key); err != nil {
			return nil, err
		}
		if *wait < 0 || *wait > 600 || *since < 0 {
			return nil, usageErr("--wait must be 0 to 600 seconds and --since 0 or more")
		}
		resp, err := ib(&offload.Request{Op: "read", Repo: *key, Since: *since, WaitMs: *wait * 1000}, time.Duration(*wait+30)*time.Second)
		if err != nil {
			return nil, err
		}
		return map[string]any{"entries": resp["entries"], "status": resp["status"]}, nil
	case "status":
		f := newFlags(verb, "[--repo K]")
		key := f.String("repo", "", "only this repo key")
		if help, err := f.parse(args, 0); help || err != nil {
			return nil, err
		}
		if *key != "" {
			if err := needKey(*key); err != nil {
				return nil, err
			}
			if err := p.Settled(*key); err != nil {
				return nil, err
			}
		}
		resp, err := ib(&offload.Request{Op: "status", Repo: *key}, 30*time.Second)
		if err != nil {
			return nil, err
		}
		return map[string]any{"sessions": resp["sessions"]}, nil
	case "end", "wipe-secrets", "restart":
		f := newFlags(verb, "--repo K")
		key := f.String("repo", "", "repo key")
		if help, err := f.parse(args, 0); help || err != nil {
			return nil, err
		}
		if err := needKey(*key); err != nil {
			return nil, err
		}
		switch verb {
		case "end":
			status, err := p.End(*key, ib)
			if err != nil {
				return nil, err
			}
			return map[string]any{"was": status}, nil
		case "wipe-secrets":
			return map[string]any{}, p.WipeSecrets(*key)
		}
		resp, err := ib(&offload.Request{Op: "restart", Repo: *key}, 60*time.Second)
		if err != nil {
			return nil, err
		}
		return map[string]any{"delivery": resp["delivery"]}, nil
	case "post":
		f := newFlags(verb, "(--progress | --question | --back) [--repo K] < body")
		prog, question, back := f.Bool("progress", false, "a progress hand-over"), f.Bool("question", false, "a question for the user"), f.Bool("back", false, "the final hand-over; makes S′")
		key := f.String("repo", repoDefault(), "repo key (default $COCOONBOX_OFFLOAD_REPO)")
		if help, err := f.parse(args, 0); help || err != nil {
			return nil, err
		}
		kind := ""
		for k, on := range map[string]bool{"progress": *prog, "question": *question, "back": *back} {
			if on {
				if kind != "" {
					return nil, usageErr("one of --progress, --question, --back")
				}
				kind = k
			}
		}
		if kind == "" {
			return nil, usageErr("one of --progress, --question, --back")
		}
		if err := needKey(*key); err != nil {
			return nil, err
		}
		body, err := readStdin(offload.MaxHandover)
		if err != nil {
			return nil, err
		}
		if kind == "question" && strings.TrimSpace(body) == "" {
			return nil, usageErr("--question needs the question on stdin")
		}
		id, err := p.Post(*key, kind, body)
		if err != nil {
			return nil, err
		}
		resp, err := callRetry(ib, &offload.Request{Op: "post", Repo: *key, Kind: kind, Body: body, OffloadID: id, RequestID: requestID()}, 30*time.Second)
		if err != nil {
			return nil, err
		}
		status := "posted"
		if kind == "back" {
			status = "ready"
		}
		return map[string]any{"seq": resp["seq"], "status": status}, nil
	case "env":
		return envVerb(paths, ib, args)
	case "event":
		return eventVerb(ib, args)
	case "watch":
		return watchVerb(paths, args)
	case "serve":
		f := newFlags(verb, "")
		if help, err := f.parse(args, 0); help || err != nil {
			return nil, err
		}
		return nil, serve(paths)
	}
	return nil, usageErr("unknown verb %q (begin, send, read, status, end, wipe-secrets, restart, post, env, event, watch, serve)", verb)
}

func checkAll(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			var ve *verbError
			if errors.As(err, &ve) {
				return err
			}
			return usageErr("%v", err)
		}
	}
	return nil
}

func anyList(v any) []any { l, _ := v.([]any); return l }

// callRetry sends a request that carries a request id again, for up to
// 10 s, while the inbox is down or its answer was lost (systemd brings a
// killed inbox back in about a second): the inbox applies a request id
// once, so a request it took before the answer was lost is answered
// again, not done twice.
func callRetry(ib verbs.Inbox, req *offload.Request, timeout time.Duration) (map[string]any, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := ib(req, timeout)
		if !errors.Is(err, offload.ErrInboxDown) || time.Now().After(deadline) {
			return resp, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// serve runs the inbox until SIGTERM.
func serve(paths offload.Paths) error {
	ln, err := inbox.Listen(paths.Socket)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := &inbox.Server{Store: offload.Store{Paths: paths}}
	progress("inbox serving %s (state %s)", paths.Socket, paths.State)
	return s.Serve(ctx, ln, func() { daemon.SdNotify(false, daemon.SdNotifyReady) })
}
