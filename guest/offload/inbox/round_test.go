package inbox_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
)

// hostRepo makes a "Mac" repository with two commits and an uncommitted
// change, and returns its directory.
func (e *env) hostRepo(name string) string {
	dir := filepath.Join(e.dir, "mac", name)
	must(e.t, os.MkdirAll(dir, 0o755))
	git(e.t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("target/\n.env\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644)
	git(e.t, dir, "add", ".")
	git(e.t, dir, "commit", "-q", "-m", "one")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("two\n"), 0o644)
	git(e.t, dir, "commit", "-q", "-am", "two")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("two, uncommitted\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "target"), 0o755)
	return dir
}

// macSide does the host packer's part of an offload (Contract: Offload,
// Mac side; offloadtest.MacStream): begin, S, the rsync into the copy, the
// bundle, the stream; then send. extra members go into the stream after
// the table's.
func (e *env) macSide(host, key, name, kind, id string, extra ...[2]string) (map[string]any, int) {
	e.t.Helper()
	begin := e.mustVerb(nil, "begin", "--repo", key, "--name", name, "--kind", kind, "--id", id)
	copyDir, _ := begin["dir"].(string)
	ho := e.handover
	if ho == "" {
		ho = Handover("a test task")
	}
	stream := offloadtest.MacStream(e.t, host, id, ho, begin, func(args []string) {
		out, err := exec.Command("rsync", append(args, host+"/", copyDir+"/")...).CombinedOutput()
		if err != nil {
			e.t.Fatalf("rsync: %v: %s", err, out)
		}
	}, extra...)
	resp, code, stderr := e.verb(stream, "send", "--repo", key, "--kind", kind, "--id", id)
	if code != 0 {
		e.t.Logf("send exited %d: %v\nstderr: %s", code, resp, stderr)
	}
	return resp, code
}

const secretValue = "aws_secret_access_key = s3cr3t-value-never-logged"

// Contract: Offload (a whole round, host-level): begin, send of a stream
// with a bundle, a hand-over and a secret; the CLI starts in tmux with the
// first prompt and exactly the contract's command line; a 300-line
// message and one ending in a newline each arrive as one message; a
// message to a busy session waits for its idle; progress, a question and
// back reach the outbox; end stops the CLI and wipes the secret.
func TestOffloadRoundClaude(t *testing.T) {
	e := newEnv(t)
	host := e.hostRepo("proj")
	send, code := e.macSide(host, "k1", "proj", "claude", "off1", [2]string{"secrets/aws/credentials", secretValue})
	if code != 0 || send["delivery"] != "started" || send["accepted"] != true || send["tmux"] != "cb-off-k1-claude" {
		t.Fatalf("send: %d %v", code, send)
	}
	for _, step := range []string{"read", "index", "check", "secrets", "trust", "start", "accepted"} {
		if _, ok := send["timings_ms"].(map[string]any)[step]; !ok {
			t.Errorf("timings_ms lacks %s: %v", step, send["timings_ms"])
		}
	}
	state := filepath.Join(e.paths.State, "k1")
	wantArgv := []string{"claude", "--dangerously-skip-permissions", "--settings", filepath.Join(state, "hooks.json")}
	var argv []string
	e.waitFor("the stand-in's argv", func() (bool, string) {
		json.Unmarshal([]byte(e.standin("claude", "argv.json")), &argv)
		return len(argv) == 5, e.standin("claude", "argv.json")
	})
	prompt, _ := os.ReadFile(filepath.Join(state, "prompt.md"))
	argv[0] = filepath.Base(argv[0])
	// $(cat …) drops the file's trailing newlines, as the shell does.
	if !reflect.DeepEqual(argv, append(wantArgv, strings.TrimRight(string(prompt), "\n"))) {
		t.Errorf("argv %q, want %q and the prompt file's text", argv[:4], wantArgv)
	}
	for _, want := range []string{"/workspace/proj", "cocoonbox-agent offload env", "# Hand-over: a test task", "# Attached by the packer", "refs/cocoonbox/base/off1", "HTTP_PROXY"} {
		if !strings.Contains(string(prompt), want) {
			t.Errorf("first prompt lacks %q", want)
		}
	}
	var environ []string
	json.Unmarshal([]byte(e.standin("claude", "environ.json")), &environ)
	joined := strings.Join(environ, "\n")
	if !strings.Contains(joined, "COCOONBOX_OFFLOAD_REPO=k1") || !strings.Contains(joined, "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(e.paths.Secrets, "k1/aws/credentials")) {
		t.Errorf("the CLI's environment lacks the repo or the secret's file: %s", joined)
	}
	if strings.Contains(joined, "s3cr3t") || strings.Contains(e.standin("claude", "argv.json"), "s3cr3t") {
		t.Error("the secret's value is in the CLI's environment or argv")
	}
	if data, _ := os.ReadFile(filepath.Join(e.paths.Secrets, "k1/aws/credentials")); string(data) != secretValue {
		t.Errorf("the secret on the tmpfs is %q", data)
	}
	e.waitFor("idle after the first turn", func() (bool, string) { s := e.status("k1"); return s == "idle", s })

	// Copy states: a busy copy is refused by begin, another id by send.
	if resp, code, _ := e.verb(nil, "begin", "--repo", "k1", "--name", "proj", "--kind", "claude", "--id", "off2"); code != 3 || !strings.Contains(fmt.Sprint(resp["error"]), "bring the last offload back first") {
		t.Errorf("begin on a busy copy: %d %v", code, resp)
	}
	if resp, code, _ := e.verb(tarOf(t), "send", "--repo", "k1", "--kind", "claude", "--id", "off2"); code != 3 || resp["code"] != "refused" {
		t.Errorf("send with another offload id: %d %v", code, resp)
	}

	long := ""
	for i := 1; i <= 300; i++ {
		long += fmt.Sprintf("line %d of a long message\n", i)
	}
	long = strings.TrimSuffix(long, "\n")
	for _, msg := range []string{long, "a message that ends in a newline\n"} {
		before := len(e.messages("claude"))
		resp := e.mustVerb([]byte(msg), "send", "--repo", "k1", "--message")
		if resp["delivery"] != "pasted" {
			t.Errorf("delivery to an idle session: %v", resp)
		}
		e.waitFor("the message to be submitted", func() (bool, string) {
			return len(e.messages("claude")) == before+1, fmt.Sprint(len(e.messages("claude")))
		})
		e.waitFor("idle", func() (bool, string) { s := e.status("k1"); return s == "idle", s })
		got := e.messages("claude")
		if len(got) != before+1 || got[before] != strings.TrimRight(msg, "\n") {
			t.Errorf("the CLI got %d messages, the last %q; want one, %q", len(got)-before, got[len(got)-1], strings.TrimRight(msg, "\n"))
		}
	}

	// Busy: a held turn keeps the session working; a message then queues
	// and is pasted at the next idle.
	e.hold("k1")
	queued := e.mustVerb([]byte("after the hold\nstandin: commit\nstandin: progress\nstandin: question"), "send", "--repo", "k1", "--message")
	if queued["delivery"] != "queued" {
		t.Fatalf("a message to a busy session: %v", queued)
	}
	n := len(e.messages("claude"))
	must(t, os.WriteFile(filepath.Join(e.home, ".standin/release"), nil, 0o600))
	e.waitFor("the queued message after the idle", func() (bool, string) {
		m := e.messages("claude")
		return len(m) == n+1 && strings.HasPrefix(m[n], "after the hold"), fmt.Sprint(m[len(m)-1])
	})
	// The turn posted progress and a question: blocked on the answer.
	e.waitFor("blocked", func() (bool, string) { s := e.status("k1"); return s == "blocked", s })
	read := e.mustVerb(nil, "read", "--repo", "k1", "--since", "0", "--wait", "5")
	entries, _ := read["entries"].([]any)
	if len(entries) != 2 || entries[0].(map[string]any)["kind"] != "progress" || entries[1].(map[string]any)["kind"] != "question" {
		t.Fatalf("outbox: %v", read)
	}
	for _, f := range []string{"seq", "kind", "offload_id", "cli", "time_ms", "body"} {
		if _, ok := entries[0].(map[string]any)[f]; !ok {
			t.Errorf("an entry lacks %s: %v", f, entries[0])
		}
	}
	if log := git(t, e.paths.Copy("proj"), "log", "--oneline", "-1"); !strings.Contains(log, "standin turn") {
		t.Errorf("the CLI's commit is not in the copy: %s", log)
	}

	// back: the BACK instruction first; the CLI posts back, S′ is made.
	e.mustVerb([]byte("standin: back"), "send", "--repo", "k1", "--back")
	read = e.mustVerb(nil, "read", "--repo", "k1", "--since", "2", "--wait", "20")
	entries, _ = read["entries"].([]any)
	if len(entries) != 1 || entries[0].(map[string]any)["kind"] != "back" {
		t.Fatalf("back: %v", read)
	}
	if m := e.messages("claude"); !strings.HasPrefix(m[len(m)-1], "BACK:") {
		t.Errorf("the back message does not start with the BACK instruction: %q", m[len(m)-1])
	}
	git(t, e.paths.Copy("proj"), "rev-parse", "--verify", "refs/cocoonbox/back/off1")

	resp := e.mustVerb(nil, "end", "--repo", "k1")
	if resp["was"] == "stopped" {
		t.Errorf("end: %v", resp)
	}
	if m := e.messages("claude"); m[len(m)-1] != "/exit" {
		t.Errorf("end did not type /exit: %q", m[len(m)-1])
	}
	if s := e.status("k1"); s != "stopped" {
		t.Errorf("after end the session is %s", s)
	}
	if _, err := os.Stat(filepath.Join(e.paths.Secrets, "k1")); !os.IsNotExist(err) {
		t.Errorf("end left the secrets: %v", err)
	}
	// The copy is returned: a new offload may take it.
	e.mustVerb(nil, "begin", "--repo", "k1", "--name", "proj", "--kind", "claude", "--id", "off2")
}
