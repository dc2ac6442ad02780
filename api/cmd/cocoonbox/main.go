// Command cocoonbox is the user's CLI: it signs in to the api through the
// browser (RFC 8252 loopback, client cocoonbox-cli), keeps the token in
// cli.json, lists and revokes the user's devices, lists, creates, wakes,
// hibernates, saves, upgrades and deletes the user's boxes (following each
// operation's phases), runs commands in a box (rsh), and offloads a
// repository's task into a box and back (packer).
//
// Exit codes: 0 done, 1 the api or the browser said no (a box operation
// failed; offload, back: a step failed and was rolled back as said), 2 bad
// usage, 3 offload or back refused with nothing changed; rsh ends with the
// remote command's status, or its own (see usage).
//
// Contract: Browser sign-in and device tokens; Sign-in with GitHub and
// signup (invite); Boxes (api) ↔ sandboxd;
// Remote command (Session.Exec, cocoonbox rsh); Offload.
package main

import (
	"github.com/cocoonbox/cocoonbox/internal/version"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: cocoonbox COMMAND [flags]

Sign in:
  login [--endpoint URL] [--invite CODE] [--device-name NAME] [--no-browser]
                          sign in through the browser (xdg-open starts it unless
                          --no-browser; the page's URL is printed to open anywhere);
                          the token is kept in cli.json
  login --token-stdin [--endpoint URL]
                          keep a token pasted on standard input (cb_ and 64 hex)
  logout [--everywhere]   forget the token, revoking it when it came from the browser;
                          --everywhere ends every sign-in of your account first
  status [--json]         where this CLI points and what answers there: the
                          endpoint and its source, the token's source and
                          device, the api's version, its box supervisor and
                          images, your boxes; exit 1 when the api gives no answer
Devices (your sign-ins):
  devices [--json]        list them; * marks this CLI's own
  devices revoke ID       revoke one (ID is dev_ and 16 hex)
Boxes (NAME is a box's name or id; without it, your first box):
  boxes [--json]          list your boxes, oldest first
  images [--json]         the images the api boots, * the latest
  box status [NAME] [--json]
                          one box: state, image, newest save, operation under way
  box create NAME [--image REF] [--restore]
                          make a box and boot it; NAME is its hostname: 1 to 63
                          of a-z, 0-9 and -, a letter first, no - last;
                          --restore: from the save a deleted box NAME left
  box ensure [NAME]       make it running: wake it, boot it, or create your first
  box hibernate [NAME] [--yes]
                          freeze it, memory kept; refused while an offload
                          session in it is working, unless --yes
  box save [NAME]         record its disk state (the newest save is kept)
  box upgrade [NAME] --confirm [--yes]
                          move it onto the latest image, keeping /home/user and
                          /workspace and dropping every other change; refused
                          while an offload session in it is working, unless --yes
  box delete NAME --confirm
                          remove it; its newest save is kept for create --restore
  box schedule NAME --at TIME | --cron EXPR [--tz ZONE] [--keep-up DUR]
  box schedule NAME --list | --clear [--id N]
                          wake it at a time or on a cron expression, and keep
                          it up that long after each wake; list or remove them
  Each of create to delete follows its operation until done (exit 0) or
  failed (exit 1, naming the phase and why): a progress line on a terminal,
  a JSON line per event with --json. --request-id ID gives the call's
  request id (default: a new one, reused when the call is retried); the
  same ID again answers the first call's operation and does nothing twice.
  rsh [--box B] [--tty] [HOST] -- COMMAND...
                          run COMMAND in a box as user, in a login shell, its
                          stdin, stdout, stderr and exit status passed through;
                          the box is --box, else HOST, else your first one. As
                          ssh for rsync (-e "cocoonbox rsh --box B") and git
                          (GIT_SSH_COMMAND="cocoonbox rsh --box B",
                          GIT_SSH_VARIANT=simple), which put HOST first and no --.
                          --tty: a terminal (raw mode here, resizes, $TERM).
                          Exit: the command's status; rsh's own failures 2 usage,
                          65 refused by a rule, 66 no such box, 69 box or api not
                          running, 74 the stream broke, 1 other
  screen [NAME] [--port N] [--open]
                          the box's desktop as a VNC endpoint on 127.0.0.1:N (any
                          free port without --port; printed) for any VNC client,
                          each connection its own Session.Screen, until Ctrl-C;
                          --open starts vncviewer (Debian tigervnc-viewer) on it.
                          The box must be running (cocoonbox box ensure NAME).
                          Exit: as rsh's own failures
Keys (your API keys, sealed in the api; a box holds only a placeholder):
  keys add NAME --host HOST... [--header H] [--template T | --query P] [--json]
                          store a key, its value from standard input or a prompt
                          (never the command line), sent to those hosts only, in
                          header H (default Authorization) as T (default
                          "Bearer {}") or in query parameter P
  keys ls [--json]        list them (never a value) and the boxes that get none
  keys rotate NAME [--json]
                          replace a key's value (stdin or a prompt); boxes get it at once
  keys rm NAME [--json]   remove a key from the vault and your boxes
Invites (an admin's invite-scoped token, cbit_, from $COCOONBOX_INVITE_TOKEN, else
the file of --token-file PATH or $COCOONBOX_INVITE_TOKEN_FILE; never the command line):
  invite create [--days N] [--json]
                          make a one-use invite for N days (1 to 7, default 2) and
                          print its link, /cb/?invite=CODE
  invite list [--json]    the invites the token made
Agents:
  mcp [claude|codex] [--with-token]
                          print the snippet for claude's or codex's MCP configuration
                          (both without an argument): the control MCP of the
                          endpoint with OAuth (the URL alone: the agent signs in
                          and you approve it); --with-token adds the form with
                          this CLI's token (your whole account: never a project's file)
Offload (run in a git repository; cocoonbox offload --help tells more):
  offload [--box B] [--kind claude|codex] [--name N] [--yes] [--json]
                          move this task into the box for its coding CLI
  offload handover-path | --handover-prompt | status | secrets add|remove|list
  back [--interrupt] [--json]
                          bring it back and merge it, never touching uncommitted work
  setup claude            install /cocoonbox:offload and /cocoonbox:back for claude
Other:
  version, --version      print "cocoonbox RELEASE (REVISION)"

The endpoint is --endpoint, else $COCOONBOX_ENDPOINT, else the one of your
last login, else http://127.0.0.1:18200. $COCOONBOX_TOKEN, when set, is
the token of devices, boxes and rsh (logout touches only cli.json);
$COCOONBOX_PING_AFTER (default 15s) is how long rsh's connection may be
silent before it is pinged. cli.json is
$XDG_CONFIG_HOME/cocoonbox/cli.json (~/.config/cocoonbox/cli.json).
`

// usageError is bad usage: exit 2 with the usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout)
	var ue usageError
	var code exitCode
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &code):
		os.Exit(int(code))
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ee):
		fmt.Fprintf(os.Stderr, "cocoonbox: %s\n", ee.msg)
		os.Exit(ee.code)
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "cocoonbox: %s\n\n%s", ue.msg, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "cocoonbox: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	err := dispatch(ctx, args, stdin, stdout)
	if err != nil && wantsJSON(args) {
		printJSONError(stdout, err)
	}
	return err
}

// dispatch runs the command args name.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command given"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "login":
		return loginCmd(ctx, rest, stdin, stdout)
	case "logout":
		return logout(ctx, rest, stdout)
	case "status":
		return status(ctx, rest, stdout)
	case "devices":
		return devices(ctx, rest, stdout)
	case "rsh":
		return rsh(ctx, rest, stdin, stdout)
	case "screen":
		return screen(ctx, rest, stdout)
	case "boxes":
		return listBoxes(ctx, rest, stdout)
	case "images":
		return listImages(ctx, rest, stdout)
	case "box":
		return boxCommand(ctx, rest, stdout)
	case "keys":
		return keysCmd(ctx, rest, stdin, stdout)
	case "mcp":
		return mcpSnippet(rest, stdout)
	case "invite":
		return inviteCmd(ctx, rest, stdout)
	case "offload":
		return offloadCmd(ctx, rest, stdin, stdout)
	case "back":
		return backCmd(ctx, rest, stdout)
	case "setup":
		return setupCmd(rest, stdout)
	case "version", "--version":
		fmt.Fprintln(stdout, version.String("cocoonbox"))
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}

// flags makes a command's flag set with its --endpoint; begin parses it.
func flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("cocoonbox "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("endpoint", "", "the api's URL")
	return fs
}

// begin parses args (-h prints the usage, a bad flag or more than maxArgs
// arguments is a usage error) and loads the state of the endpoint.
// Flags may come before, between or after the arguments
// (`devices revoke ID --endpoint URL`); the arguments are answered in order.
func begin(fs *flag.FlagSet, args []string, maxArgs int, stdout io.Writer) ([]string, *state, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, usage)
				return nil, nil, err
			}
			return nil, nil, usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) > maxArgs {
		return nil, nil, usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), positional[maxArgs])}
	}
	st, err := loadState(fs.Lookup("endpoint").Value.String())
	return positional, st, err
}
