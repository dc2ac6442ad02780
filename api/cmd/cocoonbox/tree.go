package main

import (
	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/internal/command"
)

// rootLong is the root's help: what the CLI is and what every command
// shares.
const rootLong = `cocoonbox is your command line to cocoonbox: sign in, keep your boxes (cloud
desktops) and run commands in them, and offload a coding task into a box.

The endpoint is --endpoint, else $COCOONBOX_ENDPOINT, else the one of your
last login, else http://127.0.0.1:18200. $COCOONBOX_TOKEN, when set, is the
token of devices, boxes and rsh (logout touches only cli.json);
$COCOONBOX_PING_AFTER (default 15s) is how long rsh's connection may be silent
before it is pinged. cli.json is $XDG_CONFIG_HOME/cocoonbox/cli.json
(~/.config/cocoonbox/cli.json).

Exit codes: 0 done, 1 the api or the browser said no (a box operation failed;
offload, back: a step failed and was rolled back as said), 2 bad usage, 3
offload or back refused with nothing changed, 130 interrupted (Ctrl-C); rsh
and screen end with their own (see their help).`

// boxNameRule is the rule a box's NAME keeps (api/client/names.go).
const boxNameRule = `NAME is a box's name or id; without it, your first box.`

// operationLong is what every mutating box command shares.
const operationLong = `

The command follows its operation until done (exit 0) or failed (exit 1,
naming the phase and why): a progress line on stderr on a terminal, a JSON
line per event on stdout with --json. --request-id ID gives the call's
request id (default: a new one, reused when the call is retried); the same ID
again answers the first call's operation and does nothing twice.`

// newRoot is the CLI's command tree, set up by command.New.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "cocoonbox",
		Short: "Your boxes (cloud desktops) from the command line",
		Long:  rootLong,
		Example: `  cocoonbox login
  cocoonbox status
  cocoonbox box create demo
  cocoonbox rsh --box demo -- uname -a
  source <(cocoonbox completion bash)`,
	}
	root.AddGroup(&cobra.Group{ID: "signin", Title: "Sign in:"}, &cobra.Group{ID: "boxes", Title: "Boxes:"},
		&cobra.Group{ID: "agents", Title: "Keys, invites and agents:"}, &cobra.Group{ID: "offload", Title: "Offload:"})

	root.AddCommand(
		in("signin", leaf(&cobra.Command{
			Use:   "login",
			Short: "Sign in through the browser, or keep a pasted token",
			Long: `Sign in through the browser (RFC 8252 loopback): xdg-open starts it unless
--no-browser, and the page's URL is printed to open anywhere. The token is
kept in cli.json. --token-stdin keeps a token pasted on standard input (cb_
and 64 hex) instead.`,
			Example: `  cocoonbox login
  cocoonbox login --endpoint https://cocoonbox.example --no-browser
  cocoonbox login --invite cbi_... --device-name laptop
  echo "$TOKEN" | cocoonbox login --token-stdin`,
		}, false, loginCmd)),
		in("signin", leaf(&cobra.Command{
			Use:   "logout",
			Short: "Forget the token, revoking it when it came from the browser",
			Long: `Forget this endpoint's token, revoking it when it came from the browser (a
pasted token stays valid). --everywhere ends every sign-in of your account
first: console sessions, the personal token, every device.`,
			Example: "  cocoonbox logout\n  cocoonbox logout --everywhere",
		}, false, logout)),
		in("signin", leaf(&cobra.Command{
			Use:   "status",
			Short: "Where this CLI points and what answers there",
			Long: `Where this CLI points and what answers there: the endpoint and its source,
the token's source and device, the api's version, its box supervisor and
images, your boxes one line each. Exit 1 when the api gives no answer.`,
			Example: "  cocoonbox status\n  cocoonbox status --json",
		}, false, status)),
		devicesCommand(),
		in("boxes", leaf(&cobra.Command{
			Use:     "boxes",
			Short:   "List your boxes, oldest first",
			Example: "  cocoonbox boxes\n  cocoonbox boxes --json",
		}, false, listBoxes)),
		in("boxes", leaf(&cobra.Command{
			Use:     "images",
			Short:   "List the images the api boots, * the latest",
			Example: "  cocoonbox images --json",
		}, false, listImages)),
		boxCommand(),
		in("boxes", rshCommand()),
		in("boxes", leaf(&cobra.Command{
			Use:   "screen [NAME]",
			Short: "The box's desktop as a VNC endpoint on 127.0.0.1",
			Long: `The box's desktop as a VNC endpoint on 127.0.0.1:PORT (any free port without
--port; printed) for any VNC client, each connection its own Session.Screen,
until Ctrl-C; --open starts vncviewer (Debian tigervnc-viewer) on it. The box
must be running (cocoonbox box ensure NAME). ` + boxNameRule + `

Exit: as rsh's own failures (65 refused by a rule, 66 no such box, 69 box or
api not running, 74 the stream broke, 1 other), 130 on Ctrl-C.`,
			Example: "  cocoonbox screen demo --open\n  cocoonbox screen demo --port 5901",
			Args:    screenArgs,
		}, false, screen)),
		shareCommand(),
		keysCommand(),
		inviteCommand(),
		in("agents", leaf(&cobra.Command{
			Use:   "mcp [claude|codex]",
			Short: "Print the control MCP snippet for claude's or codex's configuration",
			Long: `Print the snippet for claude's or codex's MCP configuration (both without an
argument): the control MCP of the endpoint with OAuth (the URL alone: the
agent signs in and you approve it). --with-token adds the form with this
CLI's token: your whole account, never for a project's file.`,
			Example:   "  cocoonbox mcp claude\n  cocoonbox mcp codex --with-token",
			Args:      command.MaxArgs(1),
			ValidArgs: mcpClients,
		}, false, mcpSnippet)),
		offloadCommand(),
		in("offload", leaf(&cobra.Command{
			Use:   "back",
			Short: "Bring the offloaded task back and merge it",
			Long: `Run in the repository. back asks the box CLI to hand back (--interrupt: Esc
first), waits up to 600 s, fetches and merges against the state the box
started from, never touching your uncommitted work. Progress goes to stderr;
--json prints one JSON line on stdout.

Exit codes: 0 done, 1 failed (rolled back as said), 2 usage, 3 refused
(nothing changed).`,
			Example: "  cocoonbox back\n  cocoonbox back --interrupt --json",
		}, true, backCmd)),
		in("offload", setupCommand()),
	)
	return command.New(root)
}

// in puts c in the root's help group id.
func in(id string, c *cobra.Command) *cobra.Command {
	c.GroupID = id
	return c
}

func devicesCommand() *cobra.Command {
	c := &cobra.Command{
		Use:     "devices",
		Short:   "List your sign-ins (devices); * marks this CLI's own",
		Example: "  cocoonbox devices\n  cocoonbox devices revoke dev_0123456789abcdef",
	}
	leaf(c, false, devices)
	c.AddCommand(leaf(&cobra.Command{
		Use:     "revoke ID",
		Short:   "Revoke one device (ID is dev_ and 16 hex)",
		Example: "  cocoonbox devices revoke dev_0123456789abcdef",
		Args:    cobra.ExactArgs(1),
	}, false, revokeDevice))
	return in("signin", c)
}

func boxCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "box",
		Short: "Make, wake, freeze, save, upgrade and delete one box",
		Long: `Make, wake, freeze, save, upgrade and delete one box, or see its status and
schedules. ` + boxNameRule,
		Example: "  cocoonbox box create demo\n  cocoonbox box status demo\n  cocoonbox box delete demo --confirm",
	}
	c.AddCommand(
		leaf(&cobra.Command{
			Use:     "status [NAME]",
			Short:   "One box: state, image, newest save, operation under way",
			Long:    "One box: state, image, newest save, operation under way. " + boxNameRule,
			Example: "  cocoonbox box status\n  cocoonbox box status demo --json",
			Args:    command.MaxArgs(1),
		}, false, boxStatus),
		mutationCommand("create NAME", "Make a box and boot it",
			`Make a box and boot it. NAME is its hostname: 1 to 63 of a-z, 0-9 and -, a
letter first, no - last. --image boots that image (cocoonbox images; default
the latest); --restore starts from the save a deleted box NAME left.`,
			"  cocoonbox box create demo\n  cocoonbox box create demo --image cbdesk:v23-desk\n  cocoonbox box create demo --restore"),
		mutationCommand("ensure [NAME]", "Make it running: wake it, boot it, or create your first",
			"Make the box running: wake it, boot it, or create your first. "+boxNameRule,
			"  cocoonbox box ensure\n  cocoonbox box ensure demo"),
		mutationCommand("hibernate [NAME]", "Freeze it, memory kept",
			`Freeze the box, memory kept; refused while an offload session in it is
working, unless --yes. `+boxNameRule,
			"  cocoonbox box hibernate demo\n  cocoonbox box hibernate demo --yes"),
		mutationCommand("save [NAME]", "Record its disk state (the newest save is kept)",
			"Record the box's disk state; the newest save is kept. "+boxNameRule,
			"  cocoonbox box save demo"),
		mutationCommand("upgrade [NAME]", "Move it onto the latest image (--confirm)",
			`Move the box onto the latest image, keeping /home/user and /workspace and
dropping every other change (--confirm says yes); refused while an offload
session in it is working, unless --yes. `+boxNameRule,
			"  cocoonbox box upgrade demo --confirm"),
		mutationCommand("delete NAME", "Remove it; its newest save is kept (--confirm)",
			`Remove the box for good (--confirm says yes); its newest save is kept for
box create NAME --restore.`,
			"  cocoonbox box delete demo --confirm"),
		leaf(&cobra.Command{
			Use:   "schedule NAME",
			Short: "Wake it at a time or on a cron expression; list or remove them",
			Long: `Wake the box at a time (--at) or on a cron expression (--cron, read in --tz),
and keep it up that long after each wake (--keep-up); --list lists the box's
schedules, --clear removes them (only --id's with --id). Give one of --at or
--cron, --list, or --clear.`,
			Example: `  cocoonbox box schedule demo --at 2026-12-08T07:30:00+01:00
  cocoonbox box schedule demo --cron '30 7 * * 1-5' --tz Europe/Paris --keep-up 2h
  cocoonbox box schedule demo --list
  cocoonbox box schedule demo --clear --id 3`,
			Args: command.MaxArgs(1),
		}, false, boxSchedule),
		leaf(&cobra.Command{
			Use:   "snapshots NAME",
			Short: "List the snapshots its saves left in the state store",
			Long: `List the snapshots of the box NAME in the state store, oldest first: those its
saves made and those a deleted box of that NAME left. Each is NAME@SNAPSHOT
for box ls and box restore.`,
			Example: "  cocoonbox box snapshots demo\n  cocoonbox box snapshots demo --json",
			Args:    command.MaxArgs(1),
		}, false, boxSnapshots),
		leaf(&cobra.Command{
			Use:   "ls NAME[@SNAPSHOT] [PATH]",
			Short: "List a path of a snapshot and what is directly under it",
			Long: `List PATH (default /home/user; under /home/user or /workspace) of a snapshot
and what is directly under it, as ls -l would: the newest snapshot of NAME, or
NAME@SNAPSHOT (box snapshots lists them).`,
			Example: "  cocoonbox box ls demo\n  cocoonbox box ls demo@20261207T213000.123456Z-0123456789abcdef /workspace/app",
			Args:    command.MaxArgs(2),
		}, false, boxLs),
		leaf(&cobra.Command{
			Use:   "restore NAME[@SNAPSHOT] PATH...",
			Short: "Put paths of a snapshot back into the running box",
			Long: `Put each PATH (under /home/user or /workspace), with all under it, of a
snapshot back into the running box NAME, without a reboot: the newest
snapshot, or NAME@SNAPSHOT. In place, or under --to DIR with each path's whole
path kept (DIR/home/user/notes.txt). Owners, modes and times come back as
saved.`,
			Example: "  cocoonbox box restore demo /home/user/notes.txt\n  cocoonbox box restore demo@20261207T213000.123456Z-0123456789abcdef /workspace/app --to /home/user/old",
			Args:    cobra.ArbitraryArgs,
		}, false, boxRestore),
	)
	return in("boxes", c)
}

// mutationCommand is the command of a mutating box subcommand; use's first word
// is the subcommand.
func mutationCommand(use, short, long, example string) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long + operationLong, Example: example, Args: command.MaxArgs(1)}
	return leaf(c, false, func(fs *command.Flags) runner { return mutate(c.Name(), fs) })
}

func rshCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "rsh [--box B] [--tty] [HOST] -- COMMAND...",
		Short: "Run a command in a box, as ssh would",
		Long: `Run COMMAND in a box as user, in a login shell, its stdin, stdout, stderr and
exit status passed through; the box is --box, else HOST, else your first one.
As ssh for rsync (-e "cocoonbox rsh --box B") and git
(GIT_SSH_COMMAND="cocoonbox rsh --box B", GIT_SSH_VARIANT=simple), which put
HOST first and no --. Flags end at the first word that is none of rsh's, so
the command's own stay its own. --tty: a terminal (raw mode here, resizes,
$TERM).

Exit: the command's status; rsh's own failures 2 usage, 65 refused by a rule,
66 no such box, 69 box or api not running, 74 the stream broke, 1 other, 130
on Ctrl-C.`,
		Example: `  cocoonbox rsh --box demo -- uname -a
  cocoonbox rsh --tty --box demo -- tmux attach
  rsync -a -e "cocoonbox rsh --box demo" . box:/workspace/x/
  GIT_SSH_COMMAND="cocoonbox rsh --box demo" GIT_SSH_VARIANT=simple git clone box:/workspace/x`,
		// rsh parses its line itself (parseRsh, the same flags): ssh's
		// order, in which the command's words are never rsh's.
		DisableFlagParsing: true,
		RunE:               rsh,
	}
	rshFlags(c.Flags(), &rshArgs{})
	return c
}

func keysCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "keys",
		Short: "Your API keys, sealed in the api; a box holds only a placeholder",
		Long: `Your API keys, sealed in the api: a box holds only a placeholder, replaced by
the key on the way to the key's hosts. A key's value comes from standard input
or a prompt, never the command line.`,
		Example: "  cocoonbox keys ls\n  echo \"$KEY\" | cocoonbox keys add ANTHROPIC_API_KEY --host api.anthropic.com --header x-api-key",
	}
	for _, k := range []struct{ use, short, long, example string }{
		{"add NAME", "Store a key, its value from standard input or a prompt",
			`Store a key, its value from standard input or a prompt (never the command
line), sent to the --host hosts only, in header --header (default
Authorization) as --template (default "Bearer {}") or in query parameter
--query.`,
			"  echo \"$KEY\" | cocoonbox keys add GITHUB_TOKEN --host api.github.com --host uploads.github.com"},
		{"ls", "List them (never a value) and the boxes that get none", "", "  cocoonbox keys ls --json"},
		{"rotate NAME", "Replace a key's value (stdin or a prompt); boxes get it at once", "",
			"  echo \"$NEW\" | cocoonbox keys rotate ANTHROPIC_API_KEY"},
		{"rm NAME", "Remove a key from the vault and your boxes", "", "  cocoonbox keys rm ANTHROPIC_API_KEY"},
	} {
		sub := &cobra.Command{Use: k.use, Short: k.short, Long: k.long, Example: k.example}
		verb := sub.Name()
		sub.Args = keyArgs(verb)
		sub.SetFlagErrorFunc(keyFlagError)
		c.AddCommand(leaf(sub, false, func(fs *command.Flags) runner { return keysCmd(verb, fs) }))
	}
	return in("agents", c)
}

func inviteCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "invite",
		Short: "Make and list one-use invites (an admin's invite-scoped token)",
		Long: `Make and list one-use invites with an admin's invite-scoped token (cbit_), from
$COCOONBOX_INVITE_TOKEN, else the file of --token-file PATH or
$COCOONBOX_INVITE_TOKEN_FILE; never the command line.`,
		Example: "  COCOONBOX_INVITE_TOKEN_FILE=~/.invite-token cocoonbox invite create --days 3",
	}
	for _, k := range []struct{ use, short, example string }{
		{"create", "Make a one-use invite for N days (1 to 7, default 2) and print its link", "  cocoonbox invite create --days 3 --token-file ~/.invite-token"},
		{"list", "The invites the token made", "  cocoonbox invite list --json"},
	} {
		sub := &cobra.Command{Use: k.use, Short: k.short, Example: k.example, Args: command.MaxArgs(1)}
		verb := sub.Name()
		c.AddCommand(leaf(sub, false, func(fs *command.Flags) runner { return inviteCmd(verb, fs) }))
	}
	return in("agents", c)
}

func offloadCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "offload",
		Short: "Move this repository's task into a box for its coding CLI",
		Long: `Run in the repository. offload checks the hand-over (offload handover-path
prints where it goes), runs the preflight (a block stops; warnings need --yes
or an answer), and moves the work tree, its history and the opted-in secrets
into the box (--box, else your first box) for a fresh box CLI (--kind, default
claude) in /workspace/NAME (--name, default the repository's directory name).
--handover-prompt prints the request for a CLI. Progress goes to stderr;
--json prints one JSON line on stdout. cocoonbox back brings it back.

Exit codes: 0 done, 1 failed (rolled back as said), 2 usage, 3 refused
(nothing changed).`,
		Example: "  cocoonbox offload --box demo\n  cocoonbox offload --kind codex --name task --yes --json",
	}
	leaf(c, true, offloadCmd)
	c.AddCommand(
		leaf(&cobra.Command{
			Use:     "handover-path",
			Short:   "Print where this repository's hand-over goes",
			Example: "  cocoonbox offload handover-path",
		}, true, handoverPath),
		leaf(&cobra.Command{
			Use:     "status",
			Short:   "This repository's offload in flight and its box session's status",
			Example: "  cocoonbox offload status --json",
		}, true, offloadStatus),
		secretsCommand(),
	)
	return in("offload", c)
}

func secretsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "secrets",
		Short: "The secrets an offload takes along (names and paths, never a value)",
		Long: `The secrets an offload of this repository takes along, kept in repos.json as
names and paths, never a value. ENTRY is file:<repo path>, aws, kube, gcloud
or ssh:<key>.`,
		Example: "  cocoonbox offload secrets add file:.env\n  cocoonbox offload secrets list --json",
	}
	for _, k := range []struct{ use, short string }{
		{"add ENTRY", "Opt an entry in"}, {"remove ENTRY", "Opt an entry out"}, {"list", "List the entries"},
	} {
		sub := &cobra.Command{Use: k.use, Short: k.short, Args: cobra.ExactArgs(1),
			Example: "  cocoonbox offload secrets " + k.use}
		verb := sub.Name()
		if verb == "list" {
			sub.Args = command.NoArgs
			sub.Example = "  cocoonbox offload secrets list --json"
		}
		c.AddCommand(leaf(sub, true, func(fs *command.Flags) runner { return secretsCmd(verb, fs) }))
	}
	return c
}

func setupCommand() *cobra.Command {
	c := &cobra.Command{
		Use:     "setup",
		Short:   "Install the offload commands into a coding CLI",
		Example: "  cocoonbox setup claude",
	}
	c.AddCommand(leaf(&cobra.Command{
		Use:     "claude",
		Short:   "Install /cocoonbox:offload and /cocoonbox:back for claude",
		Example: "  cocoonbox setup claude",
	}, true, setupCmd))
	return c
}
