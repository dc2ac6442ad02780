package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/term"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// maxValueRead bounds what keys add and rotate read as a value; the api
// refuses a value over 8 KiB with its rule.
const maxValueRead = 64 << 10

// keyJSON is a key as keys --json prints it: never a value.
type keyJSON struct {
	Name        string     `json:"name"`
	Hosts       []string   `json:"hosts"`
	How         string     `json:"how"`
	Placeholder string     `json:"placeholder"`
	Created     time.Time  `json:"created"`
	Rotated     *time.Time `json:"rotated,omitempty"`
}

func keyOf(k *controlv1.Key) keyJSON {
	j := keyJSON{Name: k.Name, Hosts: k.Hosts, How: k.How, Placeholder: k.Placeholder, Created: k.CreatedAt.AsTime()}
	if k.RotatedAt != nil {
		t := k.RotatedAt.AsTime()
		j.Rotated = &t
	}
	return j
}

// hostsFlag is --host, given once per host.
type hostsFlag []string

func (h *hostsFlag) String() string     { return strings.Join(*h, ",") }
func (h *hostsFlag) Set(v string) error { *h = append(*h, v); return nil }
func (h *hostsFlag) Type() string       { return "strings" }

// noValue refuses a key's value on the command line (--value, or a
// second argument): it would stay in the shell's history and in ps.
const noValue = "a key's value is never given on the command line (it would stay in the shell's history and in ps): pipe it on standard input or type it at the prompt"

// keyArgs is the arguments of keys VERB: one NAME (none for ls); a
// second is taken for a value and refused as one.
func keyArgs(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case verb == "ls":
			return command.NoArgs(cmd, args)
		case len(args) == 0:
			return command.Usagef("keys %s needs a NAME", verb)
		case len(args) > 1:
			return command.Usagef("keys %s takes one NAME; %s", verb, noValue)
		}
		return nil
	}
}

// keyFlagError is a flag error of keys VERB; --value gets the rule.
func keyFlagError(cmd *cobra.Command, err error) error {
	if strings.Contains(err.Error(), "--value") {
		return command.Usagef("keys: %s", noValue)
	}
	return command.FlagError(cmd, err)
}

// keysCmd is cocoonbox keys add|ls|rotate|rm VERB (Contract: Key vault).
func keysCmd(verb string, fs *command.Flags) runner {
	asJSON := fs.Bool("json", false, "print JSON")
	var hosts hostsFlag
	var header, template, query *string
	if verb == "add" {
		fs.Var(&hosts, "host", "a `HOST` the key is sent to (again for each)")
		header = fs.String("header", "", "the `HEADER` the key is sent in (default Authorization)")
		template = fs.String("template", "", "the header's value, {} where the key goes (default Bearer {})")
		query = fs.String("query", "", "send the key in this query `PARAMETER` instead")
	}
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		spec := client.KeySpec{Hosts: hosts}
		if verb == "add" {
			spec.Header, spec.Template, spec.Query = *header, *template, *query
		}
		if err := checkKey(verb, pos, spec); err != nil {
			return err
		}
		token, err := st.token()
		if err != nil {
			return err
		}
		keys := controlv1connect.NewKeysClient(http.DefaultClient, st.endpoint, connect.WithInterceptors(client.BearerInterceptor(token)))
		switch verb {
		case "ls":
			return listKeys(ctx, st, keys, *asJSON, stdout)
		case "rm":
			if _, err := keys.DeleteKey(ctx, connect.NewRequest(&controlv1.DeleteKeyRequest{Name: pos[0]})); err != nil {
				return st.explainKeys("keys rm "+pos[0], err)
			}
			return printDone(stdout, *asJSON, map[string]string{"deleted": pos[0]}, "Deleted "+pos[0]+" from the vault and your boxes.")
		}
		value, err := readValue(ctx, verb, pos[0], stdin)
		if err != nil {
			return err
		}
		if err := client.CheckKeyValue(value); err != nil {
			var ie *client.InputError
			errors.As(err, &ie)
			return fmt.Errorf("keys %s %s: the value %s", verb, pos[0], ie.Rule)
		}
		var k *controlv1.Key
		if verb == "add" {
			resp, err := keys.AddKey(ctx, connect.NewRequest(&controlv1.AddKeyRequest{Name: pos[0], Hosts: hosts,
				Header: *header, Template: *template, Query: *query, Value: value}))
			if err != nil {
				return st.explainKeys("keys add "+pos[0], err)
			}
			k = resp.Msg.Key
		} else {
			resp, err := keys.RotateKey(ctx, connect.NewRequest(&controlv1.RotateKeyRequest{Name: pos[0], Value: value}))
			if err != nil {
				return st.explainKeys("keys rotate "+pos[0], err)
			}
			k = resp.Msg.Key
		}
		return printDone(stdout, *asJSON, keyOf(k), fmt.Sprintf("%s: your boxes hold %s, sent to %s as %s.", k.Name, k.Placeholder, strings.Join(k.Hosts, ", "), k.How))
	}
}

// keyFlags are the flags of keys add by the request's field they fill.
var keyFlags = map[string]string{"name": "NAME", "hosts": "--host", "header": "--header", "template": "--template", "query": "--query"}

// checkKey refuses a NAME (pos, when given) and, for add, a --host,
// --header, --template or --query that break the vault's grammar
// (api/client's, which the api checks with), naming the flag and the
// rule, before any call and before the value is asked for.
func checkKey(verb string, pos []string, spec client.KeySpec) error {
	if len(pos) == 0 {
		return nil
	}
	err := client.CheckKeyName(pos[0])
	if err == nil && verb == "add" {
		_, _, err = spec.How()
	}
	var ie *client.InputError
	if !errors.As(err, &ie) {
		return nil
	}
	if ie.Field == "name" {
		return command.UsageError{Msg: fmt.Sprintf("keys %s: NAME %q %s", verb, shorten(pos[0]), client.KeyNameRule)}
	}
	field, _, _ := strings.Cut(ie.Field, "[")
	return command.UsageError{Msg: fmt.Sprintf("keys %s %s: %s %s", verb, pos[0], keyFlags[field], ie.Rule)}
}

func printDone(stdout io.Writer, asJSON bool, v any, line string) error {
	if asJSON {
		return json.NewEncoder(stdout).Encode(v)
	}
	_, err := fmt.Fprintln(stdout, line)
	return err
}

func listKeys(ctx context.Context, st *state, keys controlv1connect.KeysClient, asJSON bool, stdout io.Writer) error {
	resp, err := keys.ListKeys(ctx, connect.NewRequest(&controlv1.ListKeysRequest{}))
	if err != nil {
		return st.explainKeys("keys ls", err)
	}
	if asJSON {
		out := struct {
			Keys  []keyJSON           `json:"keys"`
			Boxes []map[string]string `json:"boxes_without_keys"`
		}{Keys: []keyJSON{}, Boxes: []map[string]string{}}
		for _, k := range resp.Msg.Keys {
			out.Keys = append(out.Keys, keyOf(k))
		}
		for _, b := range resp.Msg.BoxesWithoutKeys {
			out.Boxes = append(out.Boxes, map[string]string{"box": b.Box, "image": b.Image})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOSTS\tSENT AS\tPLACEHOLDER\tADDED\tROTATED")
	for _, k := range resp.Msg.Keys {
		rot := "never"
		if k.RotatedAt != nil {
			rot = k.RotatedAt.AsTime().Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, strings.Join(k.Hosts, ","), k.How, k.Placeholder, k.CreatedAt.AsTime().Local().Format(time.DateTime), rot)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range resp.Msg.BoxesWithoutKeys {
		fmt.Fprintf(stdout, "box %s runs %s, older than v23: it gets no keys until `cocoonbox box upgrade %s`\n", b.Box, b.Image, b.Box)
	}
	return nil
}

// readValue reads a key's value: asked without echo at a terminal, else
// standard input, its one trailing newline dropped.
func readValue(ctx context.Context, verb, name string, stdin io.Reader) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(os.Stderr, "Value of %s (not shown): ", name)
		var v []byte
		err := command.Read(ctx, stdin, func() (err error) { v, err = term.ReadPassword(int(f.Fd())); return err })
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return "", fmt.Errorf("read the value: %w", err)
		}
		return string(v), nil
	}
	var data []byte
	err := command.Read(ctx, stdin, func() (err error) {
		data, err = io.ReadAll(io.LimitReader(bufio.NewReader(stdin), maxValueRead+1))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read the value from standard input: %w", err)
	}
	if len(data) > maxValueRead {
		return "", fmt.Errorf("the value on standard input is longer than %d bytes", maxValueRead)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if v == "" {
		example := fmt.Sprintf("printenv %s | cocoonbox keys add %s --host api.example.com", name, name)
		if verb == "rotate" {
			example = fmt.Sprintf("printenv %s | cocoonbox keys rotate %s", name, name)
		}
		return "", fmt.Errorf("no value on standard input (pipe it, e.g. `%s`)", example)
	}
	return v, nil
}

// explainKeys turns a Keys call's error into what went wrong: the api's
// message names the field and the rule, the name taken or not there.
func (s *state) explainKeys(what string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeNotFound:
			return fmt.Errorf("%s: %s (cocoonbox keys ls lists yours)", what, ce.Message())
		case connect.CodeInvalidArgument, connect.CodeAlreadyExists, connect.CodeFailedPrecondition:
			return fmt.Errorf("%s: %s", what, ce.Message())
		}
	}
	return s.explain(what, err)
}
