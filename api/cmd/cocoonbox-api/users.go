package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/cocoonbox/cocoonbox/api/apiserver"
	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// usersLong is the help of users and each of its verbs.
const usersLong = `A password is read from standard input (its first line) or, at a terminal,
asked twice; never from the command line. A user name is 1 to 39 of a-z,
0-9, '-' and '_', starting with a letter or digit; a password 8 to 1024 bytes.
Beside a running api on the same state directory these use its database.
--config and --state-dir go before or after the verb (a flag given twice
counts its last).`

// limitsLong is what limits adds to it.
const limitsLong = `limits prints the user's box limits, or sets those given (0 to 64 each; a
new user has 1 and 1): max_boxes caps the boxes they hold, max_running those
starting, running or hibernating. Every api applies them at the next create
or wake; a lowered limit stops nothing already running.

`

// verbFlags are the flags of one verb or two, which go after it.
var verbFlags = map[string]string{"admin": "add NAME", "confirm": "delete NAME", "json": "list|limits NAME", "max-boxes": "limits NAME", "max-running": "limits NAME"}

// userFlags are the verb flags of one users command.
type userFlags struct {
	admin, asJSON, confirm bool
	maxBoxes, maxRunning   limitFlag
}

// usersCommand is `users VERB`: --config and --state-dir are users'
// own, so they go before the verb as well as after it.
func usersCommand() *cobra.Command {
	var c common
	users := &cobra.Command{
		Use:     "users",
		Short:   "Make, list, disable, enable, delete and limit accounts; set passwords",
		Long:    "The admin commands on the api's accounts. " + usersLong,
		Example: "  cocoonbox-api users add alice --admin\n  cocoonbox-api users --state-dir /var/lib/cocoonbox-api list --json",
	}
	c.flags(users.PersistentFlags(), false)
	users.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		for flag, verb := range verbFlags {
			if cmd != users {
				break
			}
			if strings.HasSuffix(err.Error(), "unknown flag: --"+flag) {
				return command.Usagef("--%s goes after the verb: users %s --%s", flag, verb, flag)
			}
		}
		return command.FlagError(cmd, err)
	})
	for _, v := range []struct{ use, short, example string }{
		{"add NAME", "Make an account (password from stdin, or asked at a terminal)", "  echo 'correct horse battery' | cocoonbox-api users add alice --admin"},
		{"list", "List the accounts", "  cocoonbox-api users list --json"},
		{"disable NAME", "Stop an account's sign-ins and tokens (until enabled)", "  cocoonbox-api users disable alice"},
		{"enable NAME", "Let a disabled account in again", "  cocoonbox-api users enable alice"},
		{"delete NAME", "Remove an account with its tokens, sessions and boxes (--confirm)", "  cocoonbox-api users delete alice --confirm"},
		{"passwd NAME", "Set an account's password (stdin or a prompt)", "  cocoonbox-api users passwd alice"},
		{"limits NAME", "Print or set an account's box limits (0 to 64 each)", "  cocoonbox-api users limits alice --max-boxes 3 --max-running 2"},
	} {
		var f userFlags
		verb := &cobra.Command{Use: v.use, Short: v.short, Long: v.short + ". " + usersLong, Example: v.example, Args: userArgs}
		fs := verb.Flags()
		switch verb.Name() {
		case "add":
			fs.BoolVar(&f.admin, "admin", false, "make an admin account")
		case "list":
			fs.BoolVar(&f.asJSON, "json", false, "print JSON, one array of accounts")
			verb.Args = command.NoArgs
		case "limits":
			verb.Long = limitsLong + usersLong
			fs.Var(&f.maxBoxes, "max-boxes", "set max_boxes to `N`, the boxes the user may hold (0 to 64; unset: kept)")
			fs.Var(&f.maxRunning, "max-running", "set max_running to `N`, the boxes starting, running or hibernating at once (0 to 64; unset: kept)")
			fs.BoolVar(&f.asJSON, "json", false, "print JSON, one object")
		case "delete":
			fs.BoolVar(&f.confirm, "confirm", false, "yes, remove the account with its tokens, sessions and boxes")
		}
		verb.RunE = func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) > 0 {
				name = args[0]
			}
			return usersRun(cmd, cmd.Name(), name, &c, f)
		}
		users.AddCommand(verb)
	}
	return users
}

// userArgs is a verb's one NAME.
func userArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return command.Usagef("users %s needs a NAME", cmd.Name())
	case len(args) > 1:
		return command.Usagef("unexpected argument %q after NAME %q", args[1], args[0])
	}
	return nil
}

// usersRun runs users verb on the account name.
func usersRun(cmd *cobra.Command, verb, name string, c *common, f userFlags) error {
	admin, asJSON, confirm, maxBoxes, maxRunning := f.admin, f.asJSON, f.confirm, f.maxBoxes, f.maxRunning
	if verb == "delete" && !confirm {
		return command.Usagef("users delete %q needs --confirm: it removes the account with its tokens, sessions and boxes (their saves too), for good", name)
	}
	// Checked before the database starts, so a typo costs nothing.
	if name != "" {
		if err := users.CheckName(name); err != nil {
			return err
		}
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	if _, err := os.Stat(cfg.StateDir); verb != "add" && cfg.Database.URL == "" && os.IsNotExist(err) {
		// A mistyped --state-dir would otherwise start an empty cluster there.
		return fmt.Errorf("no state directory %s: users add makes one; name the api's with --state-dir or --config", cfg.StateDir)
	}
	var password string
	if verb == "add" || verb == "passwd" {
		if password, err = readPassword(cmd.Context(), name); err != nil {
			return err
		}
		if err := users.CheckPassword(password); err != nil {
			return err
		}
	}
	ctx := cmd.Context()
	db, err := apiserver.OpenDB(ctx, cfg, newLogger(cfg, io.Discard), true)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	store := users.NewStore(db.Pool)
	switch verb {
	case "add":
		u, err := store.Add(ctx, name, password, admin)
		if err != nil {
			return err
		}
		fmt.Printf("added %s (id %s%s)\n", u.Name, u.ID, map[bool]string{true: ", admin"}[u.Admin])
	case "list":
		list, err := store.List(ctx)
		if err != nil {
			return err
		}
		return printUsers(list, asJSON)
	case "disable", "enable":
		if _, err := store.SetDisabled(ctx, name, verb == "disable"); err != nil {
			return err
		}
		fmt.Printf("%sd %s\n", verb, name)
		if verb == "disable" {
			return printAdmitted(ctx, db)
		}
	case "delete":
		held, err := apiserver.DeleteUser(ctx, db.Pool, store, name)
		if err != nil {
			return err
		}
		fmt.Printf("deleted %s\n", name)
		if held > 0 {
			// The rows went with the user; the machines go at the sweep.
			fmt.Printf("their %d boxes' machines and saves are removed from their hosts by a running api's next recovery pass (every boxes.recover_every of its api.yaml, 15s by default)\n", held)
		}
		return printAdmitted(ctx, db)
	case "passwd":
		if err := store.SetPassword(ctx, name, password); err != nil {
			return err
		}
		fmt.Printf("password of %s set\n", name)
	case "limits":
		return usersLimits(ctx, db, name, maxBoxes, maxRunning, asJSON)
	}
	return nil
}

// printAdmitted runs signup's admission after a seat was freed (Contract:
// Sign-in with GitHub and signup, "It runs on ... a user deleted or
// disabled") and says how many came in from the queue.
func printAdmitted(ctx context.Context, db *database.DB) error {
	n, err := apiserver.AdmitAfter(ctx, db.Pool, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	if n > 0 {
		fmt.Printf("admitted %d from the signup queue\n", n)
	}
	return nil
}

// limitFlag is a limit given on the command line; unset, the user's
// current value is kept.
type limitFlag struct {
	v   int
	set bool
}

// Type is the flag's kind in pflag's help.
func (f *limitFlag) Type() string { return "int" }

func (f *limitFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.Itoa(f.v)
}

// Set takes a whole number 0 to boxes.MaxLimit; the flag package's error
// names the flag and the value.
func (f *limitFlag) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("not a whole number: a limit is 0 to %d", boxes.MaxLimit)
	}
	if err != nil || v < 0 || v > boxes.MaxLimit {
		return fmt.Errorf("a limit is 0 to %d", boxes.MaxLimit)
	}
	f.v, f.set = v, true
	return nil
}

// usersLimits prints the user's limits after setting those given.
func usersLimits(ctx context.Context, db *database.DB, name string, maxBoxes, maxRunning limitFlag, asJSON bool) error {
	cur, err := boxes.LimitsOf(ctx, db.Pool, name)
	if err != nil {
		return err
	}
	if maxBoxes.set {
		cur.MaxBoxes = maxBoxes.v
	}
	if maxRunning.set {
		cur.MaxRunning = maxRunning.v
	}
	if maxBoxes.set || maxRunning.set {
		if err := boxes.SetLimits(ctx, db.Pool, name, cur); err != nil {
			return err
		}
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(cur)
	}
	fmt.Printf("%s: max_boxes %d, max_running %d\n", name, cur.MaxBoxes, cur.MaxRunning)
	return nil
}

func printUsers(list []users.User, asJSON bool) error {
	if asJSON {
		if list == nil {
			list = []users.User{}
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tADMIN\tDISABLED\tCREATED\tID")
	for _, u := range list {
		fmt.Fprintf(w, "%s\t%v\t%v\t%s\t%s\n", u.Name, u.Admin, u.Disabled, u.CreatedAt.UTC().Format("2006-01-02 15:04Z"), u.ID)
	}
	return w.Flush()
}

// readPassword reads the password: asked twice at a terminal, else the
// first line of standard input.
func readPassword(ctx context.Context, name string) (string, error) {
	fd := int(os.Stdin.Fd())
	secret := func() (b []byte, err error) {
		err = command.Read(ctx, os.Stdin, func() (err error) { b, err = term.ReadPassword(fd); return err })
		fmt.Fprintln(os.Stderr)
		return b, err
	}
	if term.IsTerminal(fd) {
		fmt.Fprintf(os.Stderr, "Password for %s: ", name)
		first, err := secret()
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(os.Stderr, "Again: ")
		second, err := secret()
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		if string(first) != string(second) {
			return "", errors.New("the two passwords differ; nothing changed")
		}
		return string(first), nil
	}
	var line string
	err := command.Read(ctx, os.Stdin, func() (err error) {
		line, err = bufio.NewReader(io.LimitReader(os.Stdin, users.MaxPassword+2)).ReadString('\n')
		return err
	})
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password from stdin: %w", err)
	}
	if !strings.HasSuffix(line, "\n") && len(line) > users.MaxPassword {
		// The read stops past the limit: its length is not the password's.
		return "", fmt.Errorf("%w: a password is %d to %d bytes, the one on standard input is longer", users.ErrBadPassword, users.MinPassword, users.MaxPassword)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("no password on standard input (pipe one line, e.g. `printf '%s\\n' \"$PW\" | cocoonbox-api users add NAME`)")
	}
	return line, nil
}
