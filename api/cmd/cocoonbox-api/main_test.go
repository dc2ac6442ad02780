package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bin is cocoonbox-api built once for the package's tests.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cbapi-bin")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "cocoonbox-api")
	if out, err := exec.Command("go", "build", "-ldflags", "-X github.com/cocoonbox/cocoonbox/internal/version.Version=test-stamp -X github.com/cocoonbox/cocoonbox/internal/version.Release=99", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// stateDir is a short directory (the socket path limit) that the embedded
// cluster's user can enter.
func stateDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cbst")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "state")
}

// api runs one command to its end: its stdout, stderr and exit code.
func api(t testing.TB, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

type served struct {
	cmd    *exec.Cmd
	addr   string
	stderr *bytes.Buffer
	done   chan error
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe starts `cocoonbox-api serve` and waits until /healthz answers 200.
func startServe(t testing.TB, dir string, args ...string) *served {
	t.Helper()
	return startServeAt(t, dir, freeAddr(t), args...)
}

// startServeAt is startServe listening on addr (a config naming it first).
func startServeAt(t testing.TB, dir, addr string, args ...string) *served {
	t.Helper()
	return startServeEnv(t, dir, addr, nil, args...)
}

// startServeEnv is startServeAt with env (NAME=value) added to the api's environment.
func startServeEnv(t testing.TB, dir, addr string, env []string, args ...string) *served {
	t.Helper()
	s := &served{addr: addr, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, append([]string{"serve", "--state-dir", dir, "--listen", s.addr}, args...)...)
	if env != nil {
		s.cmd.Env = append(os.Environ(), env...)
	}
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + s.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve exited before it was healthy: %v\n%s", err, s.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not healthy within 60s; last: %v\n%s", err, s.stderr)
		}
		time.Sleep(5 * time.Millisecond) // polling the condition, not waiting for time
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (s *served) stop(t testing.TB) {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Errorf("serve after SIGTERM: %v\n%s", err, s.stderr)
		}
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		t.Errorf("serve did not stop on SIGTERM\n%s", s.stderr)
	}
}

func TestVersionPrintsStamp(t *testing.T) {
	// Issue 45: `version` printed a bare hash and `--version` exited 2.
	for _, arg := range []string{"version", "--version"} {
		out, _, code := api(t, "", arg)
		if out != "cocoonbox-api 99 (test-stamp)\n" || code != 0 {
			t.Errorf("%s = %q (exit %d), want cocoonbox-api 99 (test-stamp)", arg, out, code)
		}
	}
	if _, errs, code := api(t, "", "nope"); code != 2 || !strings.Contains(errs, `unknown command "nope"`) {
		t.Fatalf("unknown command: exit %d, %q", code, errs)
	}
}

// Must show: serve on an empty state directory comes up, a restart keeps the
// users, a second server on the same directory refuses with a clear message;
// SIGTERM stops the embedded PostgreSQL.
func TestEmbeddedServeOnEmptyStateDirRestartKeepsUsersSecondRefuses(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	s := startServe(t, dir)
	if _, errs, code := api(t, "correct horse\n", "users", "add", "alice", "--admin", "--state-dir", dir); code != 0 {
		t.Fatalf("users add beside the running api: exit %d: %s", code, errs)
	}
	second := exec.Command(bin, "serve", "--state-dir", dir, "--listen", freeAddr(t))
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another cocoonbox-api (pid ") || !strings.Contains(string(out), dir) {
		t.Fatalf("second serve: %v\n%s", err, out)
	}
	s.stop(t)
	// Issue 45: the start-up log names the console and, with no user yet,
	// the command that makes one.
	if log := s.stderr.String(); !strings.Contains(log, "console=http://"+s.addr+"/cb/") || !strings.Contains(log, "cocoonbox-api users add NAME --admin --state-dir "+dir) {
		t.Errorf("the start-up log names no console URL or no users add:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres/data/postmaster.pid")); !os.IsNotExist(err) {
		t.Fatalf("the embedded PostgreSQL still runs after SIGTERM: %v", err)
	}
	startServe(t, dir)
	out2, errs, code := api(t, "", "users", "list", "--state-dir", dir)
	if code != 0 || !strings.Contains(out2, "alice  true") {
		t.Fatalf("users after restart (exit %d):\n%s%s", code, out2, errs)
	}
}

// An api killed without its shutdown leaves its PostgreSQL running; the next
// api on the state directory takes it over, keeps the data and stops it at its end.
func TestKilledApiClusterIsTakenOverByTheNext(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	s := startServe(t, dir)
	if _, errs, code := api(t, "correct horse\n", "users", "add", "dora", "--state-dir", dir); code != 0 {
		t.Fatalf("users add: %s", errs)
	}
	s.cmd.Process.Kill()
	<-s.done
	s.done <- nil
	pid := filepath.Join(dir, "postgres/data/postmaster.pid")
	if _, err := os.Stat(pid); err != nil {
		t.Fatalf("control: the killed api's PostgreSQL should still run: %v", err)
	}
	next := startServe(t, dir)
	if !strings.Contains(next.stderr.String(), "taking it over") {
		t.Errorf("the takeover is not logged:\n%s", next.stderr)
	}
	if out, _, _ := api(t, "", "users", "list", "--state-dir", dir); !strings.Contains(out, "dora") {
		t.Fatalf("users after the takeover:\n%s", out)
	}
	next.stop(t)
	if _, err := os.Stat(pid); !os.IsNotExist(err) {
		t.Fatalf("the taken-over PostgreSQL still runs after SIGTERM: %v", err)
	}
}

func TestUsersCommandsOnTheirOwn(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	if _, errs, code := api(t, "correct horse\n", "users", "add", "bob", "--state-dir", dir); code != 0 {
		t.Fatalf("add: %s", errs)
	}
	for _, step := range [][]string{{"disable", "bob"}, {"enable", "bob"}, {"passwd", "bob"}} {
		if _, errs, code := api(t, "new password\n", append([]string{"users"}, append(step, "--state-dir", dir)...)...); code != 0 {
			t.Fatalf("%v: %s", step, errs)
		}
	}
	// Box limits: read, set one (the other kept), read back as JSON; a
	// refused value changes nothing.
	limits := []struct {
		args []string
		code int
		want string
	}{
		{nil, 0, "bob: max_boxes 1, max_running 1\n"},
		{[]string{"--max-boxes", "3"}, 0, "bob: max_boxes 3, max_running 1\n"},
		{[]string{"--max-running", "70"}, 2, ""},
		{[]string{"--max-running", "2", "--json"}, 0, `{"max_boxes":3,"max_running":2}` + "\n"},
		{[]string{"--json"}, 0, `{"max_boxes":3,"max_running":2}` + "\n"},
	}
	for _, l := range limits {
		out, errs, code := api(t, "", append([]string{"users", "limits", "bob", "--state-dir", dir}, l.args...)...)
		if code != l.code || out != l.want {
			t.Errorf("users limits bob %v: exit %d, out %q, err %q; want exit %d, out %q", l.args, code, out, errs, l.code, l.want)
		}
	}
	// NAME between the flags: those after it count too (they were dropped,
	// so --state-dir after NAME went unread).
	if out, errs, code := api(t, "", "users", "limits", "--max-boxes", "4", "bob", "--state-dir", dir); code != 0 || out != "bob: max_boxes 4, max_running 2\n" {
		t.Errorf("users limits --max-boxes 4 bob --state-dir: exit %d, out %q, err %q", code, out, errs)
	}
	if _, errs, code := api(t, "", "users", "limits", "nobody", "--state-dir", dir); code != 1 || !strings.Contains(errs, `no such user: "nobody"`) {
		t.Errorf("limits of an unknown user: exit %d, %s", code, errs)
	}
	// --state-dir before the verb (it was refused as an unknown verb), and
	// the verb's own flags after it still override nothing they did not name.
	if out, errs, code := api(t, "", "users", "--state-dir", dir, "limits", "bob"); code != 0 || out != "bob: max_boxes 4, max_running 2\n" {
		t.Errorf("users --state-dir DIR limits bob: exit %d, out %q, err %q", code, out, errs)
	}
	if _, errs, code := api(t, "", "users", "--state-dir", dir+"/typo", "list"); code != 1 || !strings.Contains(errs, "no state directory "+dir+"/typo") {
		t.Errorf("users --state-dir TYPO list: exit %d, err %q; want the missing directory named", code, errs)
	}
	out, _, _ := api(t, "", "users", "list", "--json", "--state-dir", dir)
	if !strings.Contains(out, `"name": "bob"`) || !strings.Contains(out, `"disabled": false`) {
		t.Fatalf("list --json:\n%s", out)
	}
	if _, _, code := api(t, "", "users", "delete", "bob", "--confirm", "--state-dir", dir); code != 0 {
		t.Fatal("delete failed")
	}
	if _, errs, code := api(t, "", "users", "delete", "bob", "--confirm", "--state-dir", dir); code != 1 || !strings.Contains(errs, `no such user: "bob"`) {
		t.Fatalf("second delete: exit %d, %s", code, errs)
	}
}

// Bad input: each is refused naming the rule, before anything is made.
func TestBadInputIsRefusedBeforeAnythingStarts(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	conf := filepath.Join(t.TempDir(), "api.yaml")
	os.WriteFile(conf, []byte("listen: 127.0.0.1:0\ndatabse:\n  url: x\n"), 0o644)
	// Issue 45: serve takes its port before it builds its database, so a
	// port in use fails at once, with no state directory made.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{"serve", "--config", conf, "--state-dir", dir}, 1, `line 2: unknown key "databse"`},
		{"", []string{"serve", "--listen", busy.Addr().String(), "--state-dir", dir}, 1, "listen on " + busy.Addr().String()},
		{"", []string{"serve", "--listen", "nohost", "--state-dir", dir}, 1, `listen: "nohost" is not host:port`},
		{"", []string{"serve", "--bogus"}, 2, "unknown flag: --bogus"},
		{"correct horse\n", []string{"users", "add", "Bad Name", "--state-dir", dir}, 1, "a user name is 1 to 39"},
		{"short\n", []string{"users", "add", "carol", "--state-dir", dir}, 1, "a password is 8 to 1024 bytes"},
		{"", []string{"users", "add", "carol", "--state-dir", dir}, 1, "no password on standard input"},
		// Issue 45: the real limit, not the bytes the bounded read kept (1026).
		{strings.Repeat("x", 5000) + "\n", []string{"users", "add", "carol", "--state-dir", dir}, 1, "a password is 8 to 1024 bytes, the one on standard input is longer"},
		// Issue 45: delete removes the account and its boxes: not without --confirm.
		{"", []string{"users", "delete", "carol", "--state-dir", dir}, 2, `users delete "carol" needs --confirm`},
		{"", []string{"users", "add", "--state-dir", dir}, 2, "users add needs a NAME"},
		{"", []string{"users", "frob", "x"}, 2, `unknown users subcommand "frob"`},
		{"", []string{"users", "--state-dir", dir}, 2, "users needs a subcommand"},
		{"", []string{"users", "--json", "list"}, 2, "--json goes after the verb: users list|limits NAME --json"},
		{"", []string{"users", "--admin", "add", "x"}, 2, "--admin goes after the verb: users add NAME --admin"},
		{"", []string{"users", "--state-dir", "", "list"}, 2, `invalid argument "" for "--state-dir" flag: empty: name a directory`},
		{"", []string{"users", "list", "--config="}, 2, `invalid argument "" for "--config" flag: empty: name a file`},
		{"", []string{"users", "limits", "carol", "--max-boxes", "65", "--state-dir", dir}, 2, `invalid argument "65" for "--max-boxes" flag: a limit is 0 to 64`},
		{"", []string{"users", "limits", "carol", "--max-running", "-1", "--state-dir", dir}, 2, `invalid argument "-1" for "--max-running" flag: a limit is 0 to 64`},
		{"", []string{"users", "limits", "carol", "--max-boxes", "99999999999999999999", "--state-dir", dir}, 2, `for "--max-boxes" flag: a limit is 0 to 64`},
		{"", []string{"users", "limits", "Bad/Name", "--state-dir", dir}, 1, `bad user name "Bad/Name"`},
		{"", []string{"users", "list", "--state-dir", dir}, 1, "no state directory " + dir + ": users add makes one"},
		{"", []string{"users", "list", "--max-boxes", "2", "--state-dir", dir}, 2, "unknown flag: --max-boxes"},
		{"", []string{"users", "limits", "carol", "extra", "--state-dir", dir}, 2, `unexpected argument "extra" after NAME "carol"`},
		{"", []string{"users", "limits", "carol", "--max-boxes", "two", "--state-dir", dir}, 2, `invalid argument "two" for "--max-boxes" flag: not a whole number`},
	}
	for _, c := range cases {
		_, errs, code := api(t, c.stdin, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
		// The error once, not the flag package's line and then main's.
		if n := strings.Count(errs, c.want); n > 1 {
			t.Errorf("%v: the error printed %d times:\n%s", c.args, n, errs)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("refused commands made the state directory: %v", err)
	}
}

func TestHelpAnswers(t *testing.T) {
	out, _, code := api(t, "", "--help")
	if code != 0 || !strings.Contains(out, "users") || !strings.Contains(out, "--state-dir") {
		t.Fatalf("--help (exit %d):\n%s", code, out)
	}
	out, _, code = api(t, "", "serve", "--help")
	if code != 0 || !strings.Contains(out, "--listen") {
		t.Fatalf("serve --help (exit %d):\n%s", code, out)
	}
}

// Embedded database cold start: serve on an empty state directory until /healthz is 200.
func BenchmarkServeColdStartToHealthy(b *testing.B) {
	for b.Loop() {
		s := startServe(b, stateDir(b))
		b.StopTimer()
		s.stop(b)
		b.StartTimer()
	}
}

// Embedded database warm start: serve on a state directory made before.
func BenchmarkServeWarmStartToHealthy(b *testing.B) {
	dir := stateDir(b)
	startServe(b, dir).stop(b)
	for b.Loop() {
		s := startServe(b, dir)
		b.StopTimer()
		s.stop(b)
		b.StartTimer()
	}
}

// TestMasterKeyIsMadeOnceAndAShortOneRefusesTheStart: the first start makes
// the master key (0600) under the state directory and the next keeps it;
// a configured file of 31 bytes, or a missing one, refuses the start
// naming the path.
func TestMasterKeyIsMadeOnceAndAShortOneRefusesTheStart(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	s := startServe(t, dir)
	s.stop(t)
	key := filepath.Join(dir, "master.key")
	first, err := os.ReadFile(key)
	st, _ := os.Stat(key)
	if err != nil || len(first) != 32 || st.Mode().Perm() != 0o600 {
		t.Fatalf("master key after the first start: %d bytes, %v, %v", len(first), st.Mode(), err)
	}
	startServe(t, dir).stop(t)
	if again, _ := os.ReadFile(key); !bytes.Equal(again, first) {
		t.Fatal("the second start replaced the master key")
	}
	short := filepath.Join(t.TempDir(), "short.key")
	os.WriteFile(short, make([]byte, 31), 0o600)
	for file, want := range map[string]string{short: "holds 31 bytes, not 32", short + ".missing": "is missing"} {
		conf := filepath.Join(t.TempDir(), "api.yaml")
		os.WriteFile(conf, []byte("secrets:\n  master_key_file: "+file+"\n"), 0o644)
		_, errs, code := api(t, "", "serve", "--config", conf, "--state-dir", dir, "--listen", freeAddr(t))
		if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, file) {
			t.Errorf("serve with master key %s: exit %d, %q; want 1 and %q naming the path", file, code, errs, want)
		}
	}
}
