// Package harness runs the api as its users do: the cocoonbox-api and
// cocoonbox binaries built from this tree, a server process on a loopback
// port (its embedded database, or a shared one given by URL), the admin
// commands, and the CLI signing in through real headless Chromium. The
// end-to-end tests beside it (api/e2e/...), the booted api packages and
// `make demo` all drive it.
//
// Contract: Browser sign-in and device tokens.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/syncbuf"
)

// Binaries are the commands the tests run: the api, the CLI and the box
// supervisor's daemon.
type Binaries struct {
	API, CLI, Sandboxd string
}

// built is this test process's one build (Build).
var built struct {
	sync.Mutex
	done bool
	dir  string
	bins Binaries
	err  error
}

// Build answers cocoonbox-api, cocoonbox and cocoonbox-sandboxd compiled
// from this module, built on the first call of the test process into a
// directory of its own and shared by every later call (a failed build is
// answered again, not retried). Main removes them at the run's end; a
// TestMain of its own calls RemoveBuilt.
func Build(ctx context.Context) (Binaries, error) {
	built.Lock()
	defer built.Unlock()
	if built.done {
		return built.bins, built.err
	}
	built.done = true
	built.bins, built.err = build(ctx)
	return built.bins, built.err
}

func build(ctx context.Context) (Binaries, error) {
	root, err := moduleRoot()
	if err != nil {
		return Binaries{}, err
	}
	if built.dir, err = os.MkdirTemp("", "cocoonbox-bin-"); err != nil {
		return Binaries{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", built.dir+"/", "./cmd/cocoonbox-api", "./cmd/cocoonbox", "./cmd/cocoonbox-sandboxd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("go build the api, the CLI and sandboxd: %w\n%s", err, out)
	}
	return Binaries{API: filepath.Join(built.dir, "cocoonbox-api"), CLI: filepath.Join(built.dir, "cocoonbox"),
		Sandboxd: filepath.Join(built.dir, "cocoonbox-sandboxd")}, nil
}

// RemoveBuilt removes what Build built (nothing when it was not called).
func RemoveBuilt() {
	built.Lock()
	defer built.Unlock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// moduleRoot is the api module's directory (where go.mod is), found from
// this source tree's go env.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cocoonbox/cocoonbox/api").Output()
	if err != nil {
		return "", fmt.Errorf("find the api module: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// API is one cocoonbox-api serve process.
type API struct {
	URL      string // http://127.0.0.1:PORT, also the issuer
	StateDir string
	Config   string // the api.yaml it was started with
	bin      string
	cmd      *exec.Cmd
	log      *syncbuf.Buffer
	exited   chan struct{}
}

// Options say how to start an api: its state directory (made when missing)
// and the database.url to share (empty: the embedded cluster).
type Options struct {
	StateDir    string
	DatabaseURL string
	// Sandbox, when set, is api.yaml's sandbox mapping as YAML text
	// ("sandbox:\n  hosts: {...}\n"); empty keeps the defaults.
	Sandbox string
	// MaxConns, when set, is database.max_conns.
	MaxConns int
	// More is more of api.yaml as YAML text, for the sections the
	// defaults do not fit ("console:\n  sign_in: {per_user: 1000}\n").
	More string
	// OAuth turns OAuth for agents on with the api's own URL as
	// oauth.public_url (the issuer), which Start picks.
	OAuth bool
}

// Start runs `cocoonbox-api serve` on a free loopback port and waits until
// /healthz answers ok. Its log is kept for Log.
func Start(ctx context.Context, bin string, o Options) (*API, error) {
	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	a := &API{URL: "http://" + port, StateDir: o.StateDir, bin: bin, log: &syncbuf.Buffer{}, exited: make(chan struct{})}
	yaml := fmt.Sprintf("listen: %s\nstate_dir: %s\n", port, o.StateDir)
	if o.DatabaseURL != "" || o.MaxConns != 0 {
		yaml += "database:\n"
	}
	if o.DatabaseURL != "" {
		yaml += fmt.Sprintf("  url: %q\n", o.DatabaseURL)
	}
	if o.MaxConns != 0 {
		yaml += fmt.Sprintf("  max_conns: %d\n", o.MaxConns)
	}
	if o.OAuth {
		yaml += fmt.Sprintf("oauth:\n  public_url: %s\n", a.URL)
	}
	yaml += o.Sandbox + o.More
	a.Config = filepath.Join(o.StateDir, "api.yaml")
	if err := os.WriteFile(a.Config, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	a.cmd = exec.Command(bin, "serve", "--config", a.Config)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start cocoonbox-api: %w", err)
	}
	go func() { a.cmd.Wait(); close(a.exited) }()
	if err := a.waitHealthy(ctx); err != nil {
		a.Stop()
		return nil, err
	}
	return a, nil
}

func (a *API) waitHealthy(ctx context.Context) error {
	for {
		resp, err := http.Get(a.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-a.exited:
			return fmt.Errorf("cocoonbox-api exited before it was healthy (%v):\n%s", a.cmd.ProcessState, a.Log())
		case <-ctx.Done():
			return fmt.Errorf("cocoonbox-api not healthy at %s: %w\n%s", a.URL, ctx.Err(), a.Log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// PID is the api process's id (its memory is in /proc/PID/status).
func (a *API) PID() int { return a.cmd.Process.Pid }

// Log is what the api printed so far.
func (a *API) Log() string {
	if a == nil {
		return "" // not started (a TestMain's SetUp failed before it)
	}
	return a.log.String()
}

// Admin runs `cocoonbox-api ARGS... --config FILE` (an admin command on
// this api's database) with stdin.
func (a *API) Admin(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, a.bin, append(args, "--config", a.Config)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("cocoonbox-api %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// AddUser makes an account with the admin command (password on stdin).
func (a *API) AddUser(ctx context.Context, name, password string) error {
	_, err := a.Admin(ctx, password+"\n", "users", "add", name)
	return err
}

// Kill ends the api with SIGKILL, as a crash would, and waits for it.
func (a *API) Kill() {
	a.cmd.Process.Kill()
	<-a.exited
}

// Stop sends SIGTERM and waits for the api to end (it stops its database).
func (a *API) Stop() error {
	select {
	case <-a.exited:
		return nil
	default:
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
		return nil
	case <-time.After(30 * time.Second):
		a.cmd.Process.Kill()
		<-a.exited
		return errors.New("cocoonbox-api did not stop within 30 s of SIGTERM; killed")
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// CLI is the cocoonbox CLI with its own cli.json directory.
type CLI struct {
	Bin       string
	ConfigDir string   // XDG_CONFIG_HOME
	Env       []string // more of its environment ("COCOONBOX_TOKEN=...")
}

// Run runs the CLI and answers its standard output and error together.
func (c CLI) Run(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+c.ConfigDir), c.Env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var authorizeURL = regexp.MustCompile(`https?://\S+/cb/oauth/authorize\?\S+`)

// Login runs `cocoonbox login --endpoint URL --no-browser`, opens the URL it
// prints in the browser, signs in to the console as user with password,
// clicks Allow, and waits for the CLI to finish. It answers the CLI's output.
func (c CLI) Login(ctx context.Context, b *webdriver.Browser, endpoint, user, password string, extra ...string) (string, error) {
	return c.LoginWith(ctx, b, SignInAndAllow, endpoint, user, password, extra...)
}

// LoginDenied is Login clicking Deny.
func (c CLI) LoginDenied(ctx context.Context, b *webdriver.Browser, endpoint, user, password string, extra ...string) (string, error) {
	return c.LoginWith(ctx, b, SignInAndDeny, endpoint, user, password, extra...)
}

// Decide answers the browser's side of a login: b at the authorize URL u,
// signing in as user with password and choosing (SignInAndAllow,
// SignInAndDeny, or a test's own steps).
type Decide func(ctx context.Context, b *webdriver.Browser, u, user, password string) error

// LoginWith is Login with the browser's steps given by click.
func (c CLI) LoginWith(ctx context.Context, b *webdriver.Browser, click Decide, endpoint, user, password string, extra ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Bin, append([]string{"login", "--endpoint", endpoint, "--no-browser"}, extra...)...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+c.ConfigDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	var out bytes.Buffer
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stdout, &out))
		for sc.Scan() {
			if u := authorizeURL.FindString(sc.Text()); u != "" {
				found <- u
			}
		}
		close(found)
	}()
	fail := func(err error) (string, error) {
		cmd.Process.Kill()
		cmd.Wait()
		return out.String() + stderr.String(), err
	}
	var u string
	select {
	case u = <-found:
	case <-ctx.Done():
		return fail(fmt.Errorf("cocoonbox login printed no authorize URL: %w", ctx.Err()))
	}
	if u == "" {
		return fail(errors.New("cocoonbox login ended without printing an authorize URL"))
	}
	if err := click(ctx, b, u, user, password); err != nil {
		return fail(err)
	}
	err = cmd.Wait()
	return out.String() + stderr.String(), err
}

// SignInAndAllow opens the consent page at u, signs in to the console when
// it asks (user, password), and clicks Allow.
func SignInAndAllow(ctx context.Context, b *webdriver.Browser, u, user, password string) error {
	return signInAndClick(ctx, b, u, user, password, "#allow")
}

// SignInAndDeny is SignInAndAllow clicking Deny.
func SignInAndDeny(ctx context.Context, b *webdriver.Browser, u, user, password string) error {
	return signInAndClick(ctx, b, u, user, password, "#deny")
}

func signInAndClick(ctx context.Context, b *webdriver.Browser, u, user, password, button string) error {
	if err := b.Go(ctx, u); err != nil {
		return err
	}
	if err := b.WaitFor(ctx, "the sign-in form or the consent", func(_, text string) bool {
		return strings.Contains(text, "Sign in to cocoonbox") || strings.Contains(text, "Allow")
	}); err != nil {
		return err
	}
	if text, _ := b.Text(ctx); strings.Contains(text, "Sign in to cocoonbox") {
		if err := b.Type(ctx, "#user", user); err != nil {
			return err
		}
		if err := b.Type(ctx, "#password", password); err != nil {
			return err
		}
		if err := b.Click(ctx, "#signin-submit"); err != nil {
			return err
		}
	}
	if err := b.WaitFor(ctx, "the consent question", func(_, text string) bool {
		return strings.Contains(text, "Sign in the cocoonbox CLI on")
	}); err != nil {
		return err
	}
	return b.Click(ctx, button)
}
