package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// exitError is one of rsh's own failures: the CLI prints msg and ends
// with code. (A remote command's status is an exitCode.)
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// ExitCode is rsh's code for the failure (command.Coded).
func (e exitError) ExitCode() int { return e.code }

// rshArgs is rsh's command line: its flags, then [HOST] and the command,
// either after -- or, as rsync and git give them (ssh's order), straight
// after HOST.
type rshArgs struct {
	box, endpoint string
	tty           bool
	command       []string
}

// rshFlags defines rsh's flags on fs: ssh's -l (rsync gives -l user)
// and -t beside rsh's own. Parsing stops at the first word that is not
// one of them, so the command's own flags (rsync --server ...) stay the
// command's.
func rshFlags(fs *command.Flags, a *rshArgs) *string {
	fs.SetInterspersed(false)
	fs.StringVar(&a.box, "box", "", "the box's name or id (default: HOST, else your first box)")
	fs.StringVar(&a.endpoint, "endpoint", "", "the api's `URL`")
	fs.BoolVarP(&a.tty, "tty", "t", false, "a terminal: raw mode here, resizes, $TERM")
	return fs.StringP("login", "l", "user", "the box's user, as ssh's -l (user is the only one)")
}

// parseRsh reads rsh's command line (rshFlags); -h or --help is
// pflag.ErrHelp.
func parseRsh(args []string) (rshArgs, error) {
	var a rshArgs
	fs := pflag.NewFlagSet("cocoonbox rsh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	login := rshFlags(fs, &a)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return a, err
		}
		return a, command.UsageError{Msg: "rsh: " + err.Error()}
	}
	if *login != "user" {
		return a, command.UsageError{Msg: fmt.Sprintf("rsh: -l %s: commands in a box run as user only", *login)}
	}
	// pflag takes rsh's own "--" (rsh [flags] -- COMMAND); a HOST before
	// the command, with or without "--" after it, is ssh's order, in which
	// rsync and git give it.
	rest := fs.Args()
	host, words := "", rest
	switch {
	case fs.ArgsLenAtDash() == 0:
	case len(rest) >= 2 && rest[1] == "--":
		host, words = rest[0], rest[2:]
	case len(rest) >= 1:
		host, words = rest[0], rest[1:]
	}
	if a.box == "" {
		a.box = host
	}
	if a.box != "" && !client.BoxName.MatchString(a.box) {
		return a, command.UsageError{Msg: fmt.Sprintf("rsh: the box %q %s", shorten(a.box), client.BoxNameRule)}
	}
	if len(words) == 0 || strings.TrimSpace(strings.Join(words, " ")) == "" {
		return a, command.UsageError{Msg: "rsh: no command given (cocoonbox rsh [--box B] [HOST] -- COMMAND...)"}
	}
	a.command = words
	return a, nil
}

// rsh runs a command in a box through Session.Exec and ends with its exit
// status. Contract: Remote command (Session.Exec, cocoonbox rsh).
// cmd is rsh's command, whose help -h prints.
func rsh(cmd *cobra.Command, args []string) error {
	ctx, stdin, stdout := cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout()
	a, err := parseRsh(args)
	if errors.Is(err, pflag.ErrHelp) {
		return cmd.Help()
	}
	if err != nil {
		return err
	}
	st, err := loadState(a.endpoint)
	if err != nil {
		return err
	}
	token, err := st.token()
	if err != nil {
		return exitError{cli.Failed, "rsh: " + err.Error()}
	}
	pingAfter := 15 * time.Second
	if v := os.Getenv("COCOONBOX_PING_AFTER"); v != "" {
		if pingAfter, err = time.ParseDuration(v); err != nil || pingAfter < 100*time.Millisecond {
			return command.UsageError{Msg: fmt.Sprintf("rsh: COCOONBOX_PING_AFTER=%q is not a duration of 100ms or more (15s, 1m)", v)}
		}
	}
	sess := controlv1connect.NewSessionClient(streamClient(st.endpoint, pingAfter), st.endpoint,
		connect.WithGRPC(), connect.WithAcceptCompression("gzip", nil, nil), connect.WithInterceptors(client.BearerInterceptor(token)))
	term := newTerminal(a.tty, stdin)
	defer term.restore()
	start := &controlv1.SessionExecStart{Box: a.box, Command: a.command}
	if a.tty {
		start.Tty, start.Term = term.size(), os.Getenv("TERM")
		if !client.IsTerm(start.Term) {
			start.Term = "" // the api's default (xterm-256color) over a refusal
		} else {
			uploadTerminfo(ctx, sess, a.box, start.Term)
		}
	}
	code, err := runRemote(ctx, sess, start, term, stdin, stdout, os.Stderr)
	if err != nil {
		term.restore()
		if ctx.Err() != nil {
			return exitCode(130) // interrupted: the shell's code for SIGINT
		}
		return st.explainStream("rsh", err)
	}
	term.restore()
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

// uploadTerminfo gives the box this terminal's terminfo entry when it has
// none of that name (a new terminal's, xterm-ghostty say), so programs in
// the box can drive it: the local entry (infocmp -x) is compiled in the box
// into ~user/.terminfo with tic, which ncurses reads first (Contract:
// Offload, "the Exec terminfo upload", cbdesk v21: ncurses-term and tic).
// It is one Exec before the command's, without a terminal; a terminal
// unknown here too, or an upload that fails, leaves the box as it was and
// the session goes on (the box's programs fall back as they would).
func uploadTerminfo(ctx context.Context, client controlv1connect.SessionClient, box, term string) {
	entry, err := exec.CommandContext(ctx, "infocmp", "-x", term).Output()
	if err != nil {
		return
	}
	start := &controlv1.SessionExecStart{Box: box, Command: []string{
		"infocmp", term, ">/dev/null", "2>&1", "||", "tic", "-x", "-o", `"$HOME/.terminfo"`, "-", ">/dev/null", "2>&1"}}
	_, _ = runRemote(ctx, client, start, newTerminal(false, nil), bytes.NewReader(entry), io.Discard, io.Discard)
}

// runRemote runs start and pumps the streams until the exit status, which
// it answers.
func runRemote(ctx context.Context, client controlv1connect.SessionClient, start *controlv1.SessionExecStart,
	term *terminal, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := client.Exec(ctx)
	var sendMu sync.Mutex
	send := func(m *controlv1.SessionExecRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return s.Send(m)
	}
	if err := send(&controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_Start{Start: start}}); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	first, err := s.Receive()
	if err != nil {
		return 0, err
	}
	if !first.GetStarted() {
		return 0, errors.New("the api's answer did not begin with started")
	}
	term.raw()
	if start.Tty != nil {
		go term.watchResize(ctx, func(size *controlv1.TerminalSize) error {
			return send(&controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_Resize{Resize: size}})
		})
	}
	go feedStdin(stdin, start.Tty != nil, send, s.CloseRequest)
	for {
		m, err := s.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended without the command's exit status")
			}
			return 0, err
		}
		switch msg := m.GetMsg().(type) {
		case *controlv1.SessionExecResponse_Stdout:
			if _, err := stdout.Write(msg.Stdout); err != nil {
				return 0, fmt.Errorf("write the command's output: %w", err)
			}
		case *controlv1.SessionExecResponse_Stderr:
			_, _ = stderr.Write(msg.Stderr)
		case *controlv1.SessionExecResponse_Exit:
			return int(msg.Exit.GetCode()), nil
		}
	}
}

// stdinChunk is what one stdin message carries at most (the api's
// client.ExecChunk).
const stdinChunk = client.ExecChunk

// feedStdin sends stdin to its end, then stdin_eof. Without a tty nothing
// more will be sent, so the request side closes too; with one, resizes
// may still follow.
func feedStdin(stdin io.Reader, tty bool, send func(*controlv1.SessionExecRequest) error, closeRequest func() error) {
	buf := make([]byte, stdinChunk)
	for {
		n, err := stdin.Read(buf)
		if n > 0 {
			if send(&controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_Stdin{Stdin: append([]byte(nil), buf[:n]...)}}) != nil {
				return // the call ended; its Receive says how
			}
		}
		if err != nil {
			_ = send(&controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_StdinEof{StdinEof: true}})
			if !tty {
				_ = closeRequest()
			}
			return
		}
	}
}

// explainStream says what failed in the Session stream of the command
// cmd (rsh, screen), with the exit code of the project's table
// (docs/conventions.md, "Exit codes"): 65 a rule the request broke, 66 no such box, 69
// the box or the api is not running, 74 the stream broke, 1 otherwise.
func (s *state) explainStream(cmd string, err error) error {
	var ce *connect.Error
	msg := err.Error()
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument:
		return exitError{cli.Invalid, cmd + ": the api refused it: " + msg}
	case connect.CodeNotFound:
		return exitError{cli.NoInput, cmd + ": " + msg + " (cocoonbox boxes lists yours)"}
	case connect.CodeFailedPrecondition:
		return exitError{cli.Unavailable, cmd + ": " + msg}
	case connect.CodeUnauthenticated:
		return exitError{cli.Failed, cmd + ": " + s.tokenRefused()}
	case connect.CodeUnavailable:
		return exitError{cli.Unavailable, cmd + ": " + s.why(err).Error()}
	case connect.CodeUnknown, connect.CodeCanceled, connect.CodeAborted, connect.CodeDataLoss:
		return exitError{cli.IO, cmd + ": the stream to the box broke: " + msg}
	}
	return exitError{cli.Failed, cmd + ": " + msg}
}
