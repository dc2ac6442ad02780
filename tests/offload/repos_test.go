//go:build booted

package offload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest/repocorpus"
	"github.com/cocoonbox/cocoonbox/internal/clis"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// inCopy runs git ARGS as user in the box's copy and returns its raw
// stdout.
func inCopy(t *testing.T, b *box.Box, name string, args ...string) string {
	t.Helper()
	res, err := b.Exec(box.Cmd{User: "user", Args: append([]string{"git", "-C", "/workspace/" + name}, args...)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("git %v in the box's copy: %v exit %d: %s", args, err, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

// The corpus of repository shapes (issue 22, Deliver 2) in a booted box,
// through the image's inbox unit, its tmux and the stand-in CLI: each
// shape's send is taken and its CLI takes the first prompt; in the copy
// HEAD, the status, the staged diff and the refs (a symref stays one, but
// in a linked worktree's copy, which the bundle alone builds) equal the
// host's, and git fsck finds nothing missing. The clone is then ended and
// offloaded again after a fetch moved origin/main, with an ignored file
// the box made (src/.env) still there.
func TestCorpusInTheBox(t *testing.T) {
	t.Parallel()
	b := boot(t, box.Options{})
	installStandin(t, b)
	for i, shape := range repocorpus.Shapes() {
		if shape.Outcome != repocorpus.Back {
			continue // the host refuses it before begin: the box never sees it
		}
		t.Run(shape.Name, func(t *testing.T) {
			top := shape.Make(t)
			key, name := fmt.Sprintf("corpus%d", i), "c-"+shape.Name
			send, code := macSide(t, b, top, key, name, "claude", "off1")
			if code != 0 || send["accepted"] != true {
				t.Fatalf("%s (%s): send %d %v", shape.Name, shape.About, code, send)
			}
			for _, args := range offloadtest.CopyChecks(shape.Name == "linked-worktree") {
				if got, want := inCopy(t, b, name, args...), repocorpus.Git(t, top, args...); got != want {
					t.Errorf("git %s in the box's copy:\n%.600q\nwant the host's:\n%.600q", strings.Join(args, " "), got, want)
				}
			}
			inCopy(t, b, name, "fsck", "--no-dangling", "--no-progress")
			if shape.Name == "clone" {
				b.MustSh(t, "runuser -u user -- sh -c 'echo BOX=1 > /workspace/c-clone/src/.env'")
				mustVerb(t, b, nil, "end", "--repo", key)
				origin := strings.TrimSpace(repocorpus.Git(t, top, "remote", "get-url", "origin"))
				other := filepath.Join(t.TempDir(), "other")
				repocorpus.Git(t, filepath.Dir(other), "clone", "-q", origin, other)
				repocorpus.Git(t, other, "commit", "-q", "--allow-empty", "-m", "upstream")
				repocorpus.Git(t, other, "push", "-q", "origin", "main")
				repocorpus.Git(t, top, "fetch", "-q")
				if send, code := macSide(t, b, top, key, name, "claude", "off2"); code != 0 || send["accepted"] != true {
					t.Fatalf("the clone's next offload after a fetch: send %d %v", code, send)
				}
				if got, want := inCopy(t, b, name, "rev-parse", "refs/remotes/origin/main"), repocorpus.Git(t, top, "rev-parse", "refs/remotes/origin/main"); got != want {
					t.Errorf("origin/main in the copy %s, want %s", got, want)
				}
				if got := strings.TrimSpace(b.MustSh(t, "cat /workspace/c-clone/src/.env")); got != "BOX=1" {
					t.Errorf("the box's own ignored src/.env after the next offload: %q", got)
				}
			}
			mustVerb(t, b, nil, "end", "--repo", key)
		})
	}
}

// Deliver 5 of issue 22 in a box, through the image's inbox unit: with
// remain-on-exit on in user's ~/.tmux.conf, a CLI that dies without a
// hook is stopped and its tmux session gone.
func TestUsersTmuxConfInTheBox(t *testing.T) {
	t.Parallel()
	b := boot(t, box.Options{})
	installStandin(t, b)
	b.MustSh(t, "runuser -u user -- sh -c 'echo \"set -g remain-on-exit on\" > /home/user/.tmux.conf'")
	if _, code := macSide(t, b, macRepo(t), "roe", "proj", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	waitFor(t, "idle", func() (bool, string) { s := status(t, b, "roe"); return s == "idle", s })
	mustVerb(t, b, []byte("standin: die"), "send", "--repo", "roe", "--message")
	waitFor(t, "stopped", func() (bool, string) { s := status(t, b, "roe"); return s == "stopped", s })
	if out, err := b.Sh("runuser -u user -- tmux has-session -t =cb-off-roe-claude 2>&1"); err == nil {
		t.Errorf("the dead CLI's tmux session is still there: %s", out)
	}
}

// The real claude and codex CLIs (npm, internal/clis) in a box with no
// network but loopback, signed in with a key that is never checked (the
// request fails: no service): a 200 KiB hand-over's first prompt is taken
// (accepted; over MaxPromptArg the argument names prompt.md); an
// --interrupt sent while the session starts reaches the CLI (its
// transcript holds it); and claude's transcript is where the inbox's
// fallback looks for a copy named with _.
func TestRealCLIsInTheBox(t *testing.T) {
	t.Parallel()
	b := boot(t, box.Options{Args: []string{"--private-network", "--bind-ro=" + clis.Dir(t) + ":/opt/offload-clis"}})
	const key = "sk-ant-test-not-a-key"
	b.MustSh(t, "install -d -o user -g user /home/user/.local/bin && "+
		"ln -s /opt/offload-clis/node_modules/.bin/claude /home/user/.local/bin/claude && "+
		"ln -s /opt/offload-clis/node_modules/.bin/codex /home/user/.local/bin/codex && chown -h user:user /home/user/.local/bin/* && "+
		"echo 'export ANTHROPIC_API_KEY="+key+"' >> /home/user/.profile && "+
		// The key's approval, as the CLI records a yes to its dialog.
		`runuser -u user -- sh -c 'echo "{\"customApiKeyResponses\":{\"approved\":[\"`+key[len(key)-20:]+`\"],\"rejected\":[]}}" > /home/user/.claude.json' && `+
		"runuser -l user -c 'echo sk-test-not-a-key | codex login --with-api-key'")
	var lines []string
	for i := 0; len(lines)*64 < 200<<10; i++ {
		lines = append(lines, fmt.Sprintf("- step %05d of a long plan, written out in the hand-over in full", i))
	}
	ho := handover("a long task", lines...)
	for _, kind := range []string{"claude", "codex"} {
		t.Run(kind, func(t *testing.T) {
			repo, name := "real-"+kind, "real_"+kind
			stream := macStream(t, b, macRepo(t), repo, name, kind, "off1", ho)
			sent := make(chan map[string]any, 1)
			go func() {
				res, err := b.Exec(box.Cmd{User: "user", Login: true, Args: []string{"cocoonbox-agent offload send --repo " + repo + " --kind " + kind + " --id off1"},
					Stdin: bytes.NewReader(stream), Timeout: 5 * time.Minute})
				var send map[string]any
				json.Unmarshal([]byte(res.Stdout), &send)
				if send == nil {
					send = map[string]any{"exec": fmt.Sprint(err), "stdout": res.Stdout, "stderr": res.Stderr}
				}
				sent <- send
			}()
			waitFor(t, "the session", func() (bool, string) { s := status(t, b, repo); return s != "none", s })
			r := mustVerb(t, b, []byte("stop that and say ok"), "send", "--repo", repo, "--message", "--interrupt")
			t.Logf("the interrupt, sent with the session %s: %v", status(t, b, repo), r["delivery"])
			if send := <-sent; send["accepted"] != true {
				t.Fatalf("send of a 200 KiB hand-over to the real %s: %v", kind, send)
			}
			transcripts := map[string]string{"claude": "/home/user/.claude/projects/-workspace-real-claude", "codex": "/home/user/.codex/sessions"}[kind]
			waitFor(t, "the interrupt's message in the CLI's transcript", func() (bool, string) {
				out, _ := b.Sh("grep -rl 'stop that and say ok' " + transcripts + " 2>&1")
				pane, _ := b.Sh("runuser -u user -- tmux capture-pane -p -t =cb-off-" + repo + "-" + kind + ": | grep -v '^ *$' | tail -15")
				return strings.TrimSpace(out) != "" && !strings.Contains(out, "No such"), out + "\npane:\n" + pane
			})
			if out, _ := b.Sh("grep -rl 'Your first prompt is too long for a command line' " + transcripts); strings.TrimSpace(out) == "" {
				t.Errorf("the %s transcript lacks the first prompt's pointer to prompt.md", kind)
			}
			mustVerb(t, b, nil, "end", "--repo", repo)
		})
	}
}
