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

	"connectrpc.com/connect"
	"golang.org/x/term"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/command"
	"github.com/cocoonbox/cocoonbox/packer"
)

// exitCode ends the CLI with a code after its answer is printed.
type exitCode = command.Exit

// offloadCmd is `cocoonbox offload ...` (Contract: Offload, Offload, Mac
// side; Entry points).
func offloadCmd(fs *command.Flags) runner {
	box := fs.String("box", "", "the box's name or id")
	kind := fs.String("kind", "claude", "the box CLI")
	name := fs.String("name", "", "the copy's name")
	yes := fs.Bool("yes", false, "go ahead past warnings")
	asJSON := fs.Bool("json", false, "one JSON line")
	prompt := fs.Bool("handover-prompt", false, "print the request for a CLI")
	return func(ctx context.Context, pos []string, _ *state, stdin io.Reader, stdout io.Writer) error {
		if *box != "" && !client.BoxName.MatchString(*box) {
			return command.UsageError{Msg: fmt.Sprintf("offload: --box %q %s", shorten(*box), client.BoxNameRule)}
		}
		dirs, err := packer.DefaultDirs()
		if err != nil {
			return err
		}
		if *prompt {
			repo, err := packer.FindRepo(".")
			if err != nil {
				return answer(stdout, *asJSON, nil, err)
			}
			fmt.Fprint(stdout, packer.HandoverPrompt(dirs.Handover(repo.Key)))
			return nil
		}
		// The hand-over is checked before anything else, the api included.
		repo, err := packer.FindRepo(".")
		if err == nil {
			_, err = dirs.ReadHandover(repo.Key)
		}
		if err != nil {
			return answer(stdout, *asJSON, nil, err)
		}
		st, err := loadState(fs.Lookup("endpoint").Value.String())
		if err != nil {
			return err
		}
		info, err := st.findBox(ctx, *box)
		if err != nil {
			return answer(stdout, *asJSON, nil, err)
		}
		p, err := st.packer(dirs, info, *asJSON)
		if err != nil {
			return err
		}
		p.Yes = *yes
		if !*asJSON && isTerminal(stdin) {
			p.Ask = askOn(ctx, stdin)
		}
		res, err := p.Offload(ctx, packer.OffloadOptions{Dir: ".", Kind: *kind, Name: *name})
		if err == nil && !*asJSON {
			fmt.Fprintf(stdout, "Offloaded %s to box %s as %s: %s in tmux %s.\n", repo.Top, info.Name, res.ID, *kind, res.Tmux)
		}
		return answer(stdout, *asJSON, res, err)
	}
}

// backCmd is `cocoonbox back` (Contract: Offload, Back, Mac side).
func backCmd(fs *command.Flags) runner {
	interrupt := fs.Bool("interrupt", false, "Esc first")
	asJSON := fs.Bool("json", false, "one JSON line")
	return func(ctx context.Context, pos []string, _ *state, stdin io.Reader, stdout io.Writer) error {
		dirs, err := packer.DefaultDirs()
		if err != nil {
			return err
		}
		_, rec, err := dirs.InFlight(".")
		if err != nil {
			return answer(stdout, *asJSON, nil, err)
		}
		p, err := recordPacker(fs, dirs, rec, *asJSON)
		if err != nil {
			return err
		}
		res, err := p.Back(ctx, ".", *interrupt)
		if err == nil && !*asJSON {
			fmt.Fprintf(stdout, "Back from box %s: %s. The box's hand-over: %s\n", rec.BoxName, res.Merge.Case, res.BackMD)
		}
		return answer(stdout, *asJSON, res, err)
	}
}

// recordPacker is the packer of the offload rec records, on the
// endpoint of fs's --endpoint.
func recordPacker(fs *command.Flags, dirs packer.Dirs, rec *packer.Record, asJSON bool) (*packer.Packer, error) {
	st, err := loadState(fs.Lookup("endpoint").Value.String())
	if err != nil {
		return nil, err
	}
	return st.packer(dirs, packer.BoxInfo{ID: rec.Box, Name: rec.BoxName}, asJSON)
}

// answer prints the outcome: --json one line, {"ok":true,...} or
// {"ok":false,"code","error"[,"findings"]}; otherwise the error goes to
// main. A refusal exits 3, a failure 1.
func answer(stdout io.Writer, asJSON bool, res any, err error) error {
	var r *packer.Refusal
	refused := errors.As(err, &r)
	if !asJSON {
		if refused {
			if len(r.Findings) > 0 {
				fmt.Fprint(os.Stderr, packer.FindingsTable(r.Findings))
			}
			fmt.Fprintf(os.Stderr, "cocoonbox: refused, nothing changed: %s\n", r.Msg)
			return exitCode(3)
		}
		return err
	}
	out := map[string]any{"ok": err == nil}
	switch {
	case err == nil:
		data, _ := json.Marshal(res)
		json.Unmarshal(data, &out)
		out["ok"] = true
	case refused:
		out["code"], out["error"] = "refused", r.Msg
		if len(r.Findings) > 0 {
			out["findings"] = r.Findings
		}
	default:
		out["code"], out["error"] = "failed", err.Error()
	}
	data, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(data))
	switch {
	case err == nil:
		return nil
	case refused:
		return exitCode(3)
	}
	return exitCode(1)
}

// packer is a Packer into the box through `cocoonbox rsh` of this very
// binary, on this state's endpoint; progress goes to stderr unless asJSON
// (then only the box's own stderr lines, which a person may still read).
func (s *state) packer(dirs packer.Dirs, box packer.BoxInfo, asJSON bool) (*packer.Packer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	os.Setenv("COCOONBOX_ENDPOINT", s.endpoint) // the rsh children use this api
	target := box.ID
	if target == "" {
		target = box.Name
	}
	return &packer.Packer{Dirs: dirs, Box: box, Transport: packer.RSH{Program: self, Box: target},
		Progress: packer.Progress{W: os.Stderr}, BoxState: s.boxState(target)}, nil
}

// boxState reads the state of the box target (a name or id) from
// Boxes.List, lower case without its prefix (running, hibernated, ...):
// the packer stops a step, naming it, when its box is no longer running.
func (s *state) boxState(target string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		token, err := s.token()
		if err != nil {
			return "", err
		}
		boxes := controlv1connect.NewBoxesClient(http.DefaultClient, s.endpoint, connect.WithInterceptors(client.BearerInterceptor(token)))
		resp, err := boxes.List(ctx, connect.NewRequest(&controlv1.ListBoxesRequest{}))
		if err != nil {
			return "", err
		}
		for _, b := range resp.Msg.Boxes {
			if b.BoxId == target || b.Name == target {
				return strings.ToLower(strings.TrimPrefix(b.State.String(), "BOX_STATE_")), nil
			}
		}
		return "absent", nil
	}
}

// findBox is the box named (a name or id), else the first box, from
// Boxes.List: its image decides the preflight's image block.
func (s *state) findBox(ctx context.Context, want string) (packer.BoxInfo, error) {
	token, err := s.token()
	if err != nil {
		return packer.BoxInfo{}, err
	}
	boxes := controlv1connect.NewBoxesClient(http.DefaultClient, s.endpoint, connect.WithInterceptors(client.BearerInterceptor(token)))
	resp, err := boxes.List(ctx, connect.NewRequest(&controlv1.ListBoxesRequest{}))
	if err != nil {
		return packer.BoxInfo{}, s.explain("list your boxes", err)
	}
	for _, b := range resp.Msg.Boxes {
		if want == "" || b.Name == want || b.BoxId == want {
			return packer.BoxInfo{ID: b.BoxId, Name: b.Name, Image: b.Image}, nil
		}
	}
	if want == "" {
		return packer.BoxInfo{}, &packer.Refusal{Msg: "you have no box: cocoonbox box create NAME makes one"}
	}
	return packer.BoxInfo{}, &packer.Refusal{Msg: fmt.Sprintf("--box %q: you have no box of that name or id", want)}
}

// isTerminal says whether v (a reader or a writer) is a terminal.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// askOn asks on stderr and reads y or yes from in.
func askOn(ctx context.Context, in io.Reader) func(string) bool {
	br := bufio.NewReader(in)
	return func(q string) bool {
		fmt.Fprint(os.Stderr, q)
		var l string
		command.Read(ctx, in, func() error { l, _ = br.ReadString('\n'); return nil })
		l = strings.ToLower(strings.TrimSpace(l))
		return l == "y" || l == "yes"
	}
}

func handoverPath(fs *command.Flags) runner {
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		repo, dirs, err := here()
		if err != nil {
			return err
		}
		if err := dirs.Ensure(repo.Key); err != nil {
			return err
		}
		fmt.Fprintln(stdout, dirs.Handover(repo.Key))
		return nil
	}
}

func here() (packer.Repo, packer.Dirs, error) {
	dirs, err := packer.DefaultDirs()
	if err != nil {
		return packer.Repo{}, dirs, err
	}
	repo, err := packer.FindRepo(".")
	return repo, dirs, err
}

// secretsCmd is `offload secrets add|remove ENTRY` and `secrets list`:
// names and paths in repos.json, never a value.
func secretsCmd(verb string, fs *command.Flags) runner {
	asJSON := fs.Bool("json", false, "one JSON line")
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		repo, dirs, err := here()
		if err != nil {
			return answer(stdout, *asJSON, nil, err)
		}
		repos, err := dirs.LoadRepos()
		if err != nil {
			return err
		}
		prefs := repos.Prefs(repo.Key)
		prefs.Top = repo.Top
		if verb != "list" {
			entry := pos[0]
			if err := packer.CheckSecretEntry(entry); err != nil {
				return command.UsageError{Msg: err.Error()}
			}
			kept := []string{}
			for _, e := range prefs.Secrets {
				if e != entry {
					kept = append(kept, e)
				}
			}
			if verb == "add" {
				kept = append(kept, entry)
			}
			prefs.Secrets = kept
			if err := dirs.SaveRepos(repos); err != nil {
				return err
			}
		}
		if *asJSON {
			return answer(stdout, true, map[string]any{"repo": repo.Key, "secrets": prefs.Secrets}, nil)
		}
		for _, e := range prefs.Secrets {
			fmt.Fprintln(stdout, e)
		}
		return nil
	}
}

// offloadStatus is the repository's offload in flight (offload.json) and
// its box session's status (offload status through rsh).
func offloadStatus(fs *command.Flags) runner {
	asJSON := fs.Bool("json", false, "one JSON line")
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		repo, dirs, err := here()
		if err != nil {
			return answer(stdout, *asJSON, nil, err)
		}
		rec, err := dirs.LoadRecord(repo.Key)
		if err != nil {
			return err
		}
		out := map[string]any{"repo": repo.Key, "record": rec}
		if rec != nil {
			p, err := recordPacker(fs, dirs, rec, *asJSON)
			if err != nil {
				return err
			}
			sessions, err := p.Status(ctx, rec.Repo)
			if err != nil {
				return answer(stdout, *asJSON, nil, err)
			}
			out["sessions"] = sessions
		}
		if *asJSON {
			return answer(stdout, true, out, nil)
		}
		if rec == nil {
			fmt.Fprintf(stdout, "No offload of %s is in flight.\n", repo.Top)
			return nil
		}
		fmt.Fprintf(stdout, "Offload %s in box %s, %s in %s (tmux %s):\n", rec.ID, rec.BoxName, rec.Kind, rec.Dir, offload.TmuxSession(rec.Repo, rec.Kind))
		for _, s := range out["sessions"].([]map[string]any) {
			fmt.Fprintf(stdout, "  %v %v: %v\n", s["cli"], s["offload_id"], s["status"])
		}
		return nil
	}
}

// setupCmd is `cocoonbox setup claude`: the plugin's commands.
func setupCmd(fs *command.Flags) runner {
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		dir, err := packer.InstallClaude()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Installed /cocoonbox:offload and /cocoonbox:back in %s.\n", dir)
		return nil
	}
}
