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

	"github.com/cocoonbox/cocoonbox/api/apiserver"
	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/users"
	"golang.org/x/term"
)

const usersUsage = `usage: cocoonbox-api users add NAME [--admin] | list [--json] | disable NAME | enable NAME | delete NAME --confirm | passwd NAME
       cocoonbox-api users limits NAME [--max-boxes N] [--max-running N] [--json]
       (each with [--config FILE] [--state-dir DIR], before or after the verb;
       a flag given twice counts its last)

A password is read from standard input (its first line) or, at a terminal,
asked twice; never from the command line. A user name is 1 to 39 of a-z,
0-9, '-' and '_', starting with a letter or digit; a password 8 to 1024 bytes.
Beside a running api on the same state directory these use its database.
limits prints the user's box limits, or sets those given (0 to 64 each; a
new user has 1 and 1): max_boxes caps the boxes they hold, max_running those
starting, running or hibernating. Every api applies them at the next create
or wake; a lowered limit stops nothing already running.
`

// verbFlags are the flags of one verb or two, which go after it.
var verbFlags = map[string]string{"admin": "add NAME", "confirm": "delete NAME", "json": "list|limits NAME", "max-boxes": "limits NAME", "max-running": "limits NAME"}

func usersCmd(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(os.Stderr, usersUsage)
		if len(args) == 0 {
			return fmt.Errorf("%w: users needs a subcommand", errUsage)
		}
		return nil
	}
	// --config and --state-dir may come before the verb as well as after it.
	var c common
	pre := newFlags("users", "", &c, false)
	pre.Usage = func() { fmt.Fprint(os.Stderr, usersUsage) }
	if err := parse(pre, args); err != nil {
		for flag, verb := range verbFlags {
			if strings.HasSuffix(err.Error(), "flag provided but not defined: -"+flag) {
				return fmt.Errorf("%w: --%s goes after the verb: users %s --%s", errUsage, flag, verb, flag)
			}
		}
		return err
	}
	if pre.NArg() == 0 {
		return fmt.Errorf("%w: users needs a subcommand", errUsage)
	}
	verb, args := pre.Arg(0), pre.Args()
	var admin, asJSON, confirm bool
	var maxBoxes, maxRunning limitFlag
	synopsis := "users " + verb + " NAME [flags]"
	if verb == "list" {
		synopsis = "users list [flags]"
	}
	// The common flags set c only when given (newFlags), so those before
	// the verb stay unless given again after it.
	fs := newFlags("users "+verb, synopsis, &c, false)
	switch verb {
	case "add":
		fs.BoolVar(&admin, "admin", false, "make an admin account")
	case "list":
		fs.BoolVar(&asJSON, "json", false, "print JSON, one array of accounts")
	case "limits":
		fs.Var(&maxBoxes, "max-boxes", "set max_boxes to `N`, the boxes the user may hold (0 to 64; unset: kept)")
		fs.Var(&maxRunning, "max-running", "set max_running to `N`, the boxes starting, running or hibernating at once (0 to 64; unset: kept)")
		fs.BoolVar(&asJSON, "json", false, "print JSON, one object")
	case "delete":
		fs.BoolVar(&confirm, "confirm", false, "yes, remove the account with its tokens, sessions and boxes")
	case "disable", "enable", "passwd":
	default:
		return fmt.Errorf("%w: unknown users subcommand %q (add, list, disable, enable, delete, passwd, limits)", errUsage, verb)
	}
	// NAME may come before, between or after the flags: the flag package
	// stops at it, so the flags after it are parsed on their own.
	rest := args[1:]
	var name string
	for {
		if err := parse(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if name != "" {
			return fmt.Errorf("%w: unexpected argument %q after NAME %q", errUsage, fs.Arg(0), name)
		}
		name, rest = fs.Arg(0), fs.Args()[1:]
	}
	if verb == "list" && name != "" {
		return fmt.Errorf("%w: users list takes no NAME", errUsage)
	}
	if verb != "list" && name == "" {
		return fmt.Errorf("%w: users %s needs a NAME", errUsage, verb)
	}
	if verb == "delete" && !confirm {
		return fmt.Errorf("%w: users delete %q needs --confirm: it removes the account with its tokens, sessions and boxes (their saves too), for good", errUsage, name)
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
		if password, err = readPassword(name); err != nil {
			return err
		}
		if err := users.CheckPassword(password); err != nil {
			return err
		}
	}
	ctx := context.Background()
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
func readPassword(name string) (string, error) {
	fd := int(os.Stdin.Fd())
	if term.IsTerminal(fd) {
		fmt.Fprintf(os.Stderr, "Password for %s: ", name)
		first, err := term.ReadPassword(fd)
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(os.Stderr, "Again: ")
		second, err := term.ReadPassword(fd)
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		if string(first) != string(second) {
			return "", errors.New("the two passwords differ; nothing changed")
		}
		return string(first), nil
	}
	line, err := bufio.NewReader(io.LimitReader(os.Stdin, users.MaxPassword+2)).ReadString('\n')
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
