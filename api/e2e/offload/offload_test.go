//go:build booted

package offload

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
)

// The helpers the offload tests share (guest/offload/offloadtest).
var (
	git   = offloadtest.Git
	write = offloadtest.Write
	read  = offloadtest.Read
)

// inBox runs a shell line in the box as root (nsenter, not the api) and
// answers its stdout; a failure fails the test.
func inBox(t testing.TB, line string) string {
	t.Helper()
	out, err := harness.InBox(bridge, boxID, nil, line)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// command is the cocoonbox CLI in dir as the signed-in user, on the
// test's api, with data as its XDG_DATA_HOME (the offload directory).
func command(dir, data string, args ...string) *exec.Cmd {
	cmd := exec.Command(bins.CLI, args...)
	cmd.Dir = dir
	cmd.Env = cliEnv(data)
	return cmd
}

// cliEnv is the environment of the CLI and of what runs it (rsync -e):
// cli.json's login, and data as XDG_DATA_HOME.
func cliEnv(data string) []string {
	return append(os.Environ(), "XDG_DATA_HOME="+data, "XDG_CONFIG_HOME="+configDir)
}

// cli runs the cocoonbox CLI (command) and answers its one --json line,
// its exit status and its stderr.
func cli(t testing.TB, dir, data string, args ...string) (map[string]any, int, string) {
	t.Helper()
	cmd := command(dir, data, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	code := harness.ExitCode(cmd.Run())
	if code < 0 {
		t.Fatalf("cocoonbox %v did not run to its end: %s", args, errb.String())
	}
	return parse(t, args, out.String(), errb.String()), code, errb.String()
}

// parse is the CLI's --json line, or {"stdout": out} without --json.
func parse(t testing.TB, args []string, out, stderr string) map[string]any {
	t.Helper()
	var resp map[string]any
	if json.Unmarshal(bytes.TrimSpace([]byte(out)), &resp) != nil && slices.Contains(args, "--json") {
		t.Fatalf("cocoonbox %v: stdout is not one JSON line: %q\nstderr: %s", args, out, stderr)
	}
	if resp == nil {
		resp = map[string]any{"stdout": out}
	}
	return resp
}

func mustCLI(t testing.TB, dir, data string, args ...string) map[string]any {
	t.Helper()
	resp, code, stderr := cli(t, dir, data, args...)
	if code != 0 {
		t.Fatalf("cocoonbox %v exited %d: %v\nstderr:\n%s", args, code, resp, stderr)
	}
	return resp
}

// newRepo makes a git repository named name in a temporary directory,
// its first commit ("one") of files (path and content pairs).
func newRepo(t testing.TB, name string, files ...[2]string) string {
	t.Helper()
	top := filepath.Join(t.TempDir(), name)
	os.MkdirAll(top, 0o755)
	git(t, top, "init", "-q")
	for _, f := range files {
		write(t, top, f[0], f[1])
	}
	git(t, top, "add", ".")
	git(t, top, "commit", "-q", "-m", "one")
	return top
}

// handOver writes the hand-over of top's next offload where `cocoonbox
// offload handover-path` says: task, then the stand-in's lines.
func handOver(t testing.TB, top, data, task string, standin ...string) {
	t.Helper()
	path := strings.TrimSpace(mustCLI(t, top, data, "offload", "handover-path")["stdout"].(string))
	write(t, filepath.Dir(path), filepath.Base(path), offloadtest.Handover(task, standin...))
}

const secret = "TOKEN=S3CR3T-through-the-api"

// Contract: Offload, end to end through the api: `cocoonbox offload`
// moves a repository with an uncommitted change and an opted-in .env into
// the box the api created, over Session.Exec (begin, rsync -e "cocoonbox
// rsh", send); the stand-in commits there; `cocoonbox back` fetches over
// rsh (GIT_SSH_VARIANT=simple) and fast-forwards, then a second round with
// the user's own commit meanwhile comes back as a clean merge.
func TestOffloadAndBackThroughTheAPI(t *testing.T) {
	data := t.TempDir()
	top := newRepo(t, "proj", [2]string{".gitignore", ".env\n.env.local\ntarget/\n"}, [2]string{"a.txt", "one\n"})
	write(t, top, "a.txt", "one, uncommitted\n")
	write(t, top, ".env", secret+"\n")
	write(t, top, ".env.local", "LOCAL=not opted in\n") // a warning the first offload needs a yes for
	head := git(t, top, "rev-parse", "HEAD")

	handOver(t, top, data, "a task through the api", "standin: commit")
	mustCLI(t, top, data, "offload", "secrets", "add", "file:.env")

	res, code, stderr := cli(t, top, data, "offload", "--box", boxName, "--json")
	if code != 3 || res["code"] != "refused" || !strings.Contains(stderr+res["error"].(string), "yes") {
		t.Fatalf("offload without --yes past a warning: %d %v", code, res)
	}
	res = mustCLI(t, top, data, "offload", "--box", boxName, "--yes", "--json")
	if res["accepted"] != true || res["tmux"] == "" {
		t.Fatalf("offload: %v", res)
	}
	key := res["repo"].(string)
	if got := inBox(t, "cat /workspace/proj/a.txt"); got != "one, uncommitted\n" {
		t.Errorf("the box's a.txt = %q", got)
	}
	if got := inBox(t, "cat /run/cocoonbox-offload/secrets/"+key+"/file/.env"); got != secret+"\n" {
		t.Errorf("the opted-in .env on the tmpfs: %q", got)
	}
	st := mustCLI(t, top, data, "offload", "status", "--json")
	if ss, _ := st["sessions"].([]any); len(ss) != 1 {
		t.Errorf("offload status: %v", st)
	}

	back := mustCLI(t, top, data, "back", "--json")
	if m, _ := back["merge"].(map[string]any); m["case"] != "fast-forward" {
		t.Fatalf("back: %v", back)
	}
	if got := git(t, top, "log", "-1", "--format=%s"); got != "standin turn 1" || git(t, top, "rev-parse", "HEAD~1") != head {
		t.Errorf("HEAD is %q, want the box's commit on the old HEAD", got)
	}
	if read(t, top, "a.txt") != "one, uncommitted\n" {
		t.Error("a.txt lost its uncommitted change")
	}
	if strings.Contains(inBox(t, "journalctl -m --no-pager -o cat | grep -c 'S3CR3[T]' || true"), "1") {
		t.Error("the secret is in the box's journal")
	}

	// The second round: the user commits and keeps untracked notes
	// meanwhile; the box's change comes in uncommitted.
	mustCLI(t, top, data, "offload", "--box", boxName, "--yes", "--json")
	write(t, top, "mine.txt", "the user's own\n")
	git(t, top, "add", "mine.txt")
	git(t, top, "commit", "-q", "-m", "the user's commit", "mine.txt")
	write(t, top, "notes.txt", "untracked notes\n")
	userHead := git(t, top, "rev-parse", "HEAD")
	back = mustCLI(t, top, data, "back", "--json")
	if m, _ := back["merge"].(map[string]any); m["case"] != "merge" {
		t.Fatalf("second back: %v", back)
	}
	if git(t, top, "rev-parse", "HEAD") != userHead || read(t, top, "notes.txt") != "untracked notes\n" || !strings.Contains(read(t, top, "work.txt"), "turn 1") {
		t.Errorf("after the clean merge: HEAD %s, status %s", git(t, top, "rev-parse", "HEAD"), git(t, top, "status", "--porcelain"))
	}
	res, code, _ = cli(t, top, data, "back", "--json")
	if code != 3 || !strings.Contains(res["error"].(string), "back.md") {
		t.Errorf("a back with nothing in flight: %d %v", code, res)
	}
}
