// Package webdriver drives Debian's headless Chromium through chromedriver's
// W3C WebDriver protocol (https://www.w3.org/TR/webdriver2/): the few
// commands the browser tests and the demo need (open a page, find an element,
// type, click, read the URL and the text, run a probe script, emulate a
// phone's viewport and dark mode), each with a wait on a condition.
//
// Chromium runs as root here, so with --no-sandbox, and with the flags that
// keep it off the network it may not reach (background networking, component
// updates, sync), in a fresh --user-data-dir removed by Close.
package webdriver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Paths of Debian's packages chromium and chromium-driver (make setup).
const (
	ChromiumPath     = "/usr/bin/chromium"
	ChromedriverPath = "/usr/bin/chromedriver"
)

// Browser is one chromedriver with one headless Chromium session.
type Browser struct {
	driver  *exec.Cmd
	base    string // http://127.0.0.1:PORT/session/ID
	dataDir string
}

var startedOn = regexp.MustCompile(`started successfully on port (\d+)`)

// Start runs chromedriver on a free loopback port and opens a session of
// headless Chromium. It fails naming the package to install when either
// binary is missing.
func Start(ctx context.Context) (*Browser, error) { return StartWith(ctx) }

// StartWith is Start with more Chromium flags, such as
// --ignore-certificate-errors-spki-list=HASH for a test's own TLS server.
func StartWith(ctx context.Context, flags ...string) (*Browser, error) {
	for path, pkg := range map[string]string{ChromiumPath: "chromium", ChromedriverPath: "chromium-driver"} {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s is missing: install Debian's %s (make setup)", path, pkg)
		}
	}
	dataDir, err := os.MkdirTemp("", "cocoonbox-chromium-")
	if err != nil {
		return nil, fmt.Errorf("make chromium's user data directory: %w", err)
	}
	b := &Browser{dataDir: dataDir}
	// A port another process took between the pick and chromedriver's
	// bind: pick again.
	for try := 1; ; try++ {
		b.driver, b.base, err = launchDriver(ctx)
		if err == nil || !errors.Is(err, errPortTaken) || try == 3 {
			break
		}
	}
	if err != nil {
		os.RemoveAll(dataDir)
		return nil, err
	}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{
			"binary": ChromiumPath,
			"args": append([]string{"--headless", "--no-sandbox", "--disable-gpu",
				"--disable-background-networking", "--disable-component-update", "--disable-sync",
				"--no-first-run", "--disable-quic", "--disable-dev-shm-usage", // a small /dev/shm (containers, CI) crashes tabs
				"--user-data-dir=" + dataDir}, flags...),
		},
	}}}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "POST", "/session", caps, &sess); err != nil {
		b.Close()
		return nil, fmt.Errorf("open a chromium session: %w", err)
	}
	b.base += "/session/" + sess.SessionID
	return b, nil
}

// errPortTaken is launchDriver's answer when chromedriver exited before it
// said its port: the port was taken by the time it bound it.
var errPortTaken = errors.New("chromedriver exited before it said its port")

// launchDriver starts chromedriver on a loopback port free on both
// 127.0.0.1 and [::1] and answers it with its base URL,
// http://127.0.0.1:PORT, once it says it listens. Not --port=0:
// chromedriver then takes a port free on [::1] alone and exits ("IPv4
// port not available") when 127.0.0.1 holds it, and a test process holds
// many (each loopback connection's own port): it failed a CI-like run.
func launchDriver(ctx context.Context) (*exec.Cmd, string, error) {
	p, err := loopbackPort()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(ChromedriverPath, "--port="+strconv.Itoa(p))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start chromedriver: %w", err)
	}
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := startedOn.FindStringSubmatch(sc.Text()); m != nil {
				port <- m[1]
			}
		}
		close(port)
	}()
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	select {
	case p, ok := <-port:
		if !ok {
			stop()
			return nil, "", errPortTaken
		}
		return cmd, "http://127.0.0.1:" + p, nil
	case <-ctx.Done():
		stop()
		return nil, "", fmt.Errorf("waiting for chromedriver: %w", ctx.Err())
	}
}

// loopbackPort answers a TCP port that neither 127.0.0.1 nor [::1] holds
// now (either family may be absent), or an error after 1000 tries. It
// draws below Linux's default ephemeral range (32768 up), from which every
// outgoing connection takes its own port, so none takes it before
// chromedriver binds it.
func loopbackPort() (int, error) {
	for range 1000 {
		p := 10000 + rand.IntN(32768-10000)
		if free("tcp4", "127.0.0.1", p) && free("tcp6", "[::1]", p) {
			return p, nil
		}
	}
	return 0, errors.New("no loopback port from 10000 to 32767 free on both 127.0.0.1 and [::1] in 1000 tries")
}

// free says whether port can be listened on at host, or host's family is
// absent (EADDRNOTAVAIL: no IPv6 on loopback; chromedriver goes on without
// it).
func free(network, host string, port int) bool {
	l, err := net.Listen(network, host+":"+strconv.Itoa(port))
	if err != nil {
		return errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT)
	}
	l.Close()
	return true
}

// Close ends the session, chromedriver and its Chromium, and removes the
// user data directory.
func (b *Browser) Close() {
	if strings.Contains(b.base, "/session/") {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b.call(ctx, "DELETE", "", nil, nil)
		cancel()
	}
	if b.driver.Process != nil {
		b.driver.Process.Kill()
		b.driver.Wait()
	}
	os.RemoveAll(b.dataDir)
}

// Go opens url and waits until the page has loaded.
func (b *Browser) Go(ctx context.Context, url string) error {
	return b.call(ctx, "POST", "/url", map[string]string{"url": url}, nil)
}

// URL is the address of the page shown now.
func (b *Browser) URL(ctx context.Context) (string, error) {
	var u string
	err := b.call(ctx, "GET", "/url", nil, &u)
	return u, err
}

// Text is the visible text of the page's body.
func (b *Browser) Text(ctx context.Context) (string, error) {
	id, err := b.find(ctx, "body")
	if err != nil {
		return "", err
	}
	var text string
	err = b.call(ctx, "GET", "/element/"+id+"/text", nil, &text)
	return text, err
}

// Type waits for the element that css selects, as Click does, and types
// text into it (WebDriver's Element Send Keys: each character a key).
func (b *Browser) Type(ctx context.Context, css, text string) error {
	id, err := b.wait(ctx, css)
	if err != nil {
		return err
	}
	return b.call(ctx, "POST", "/element/"+id+"/value", map[string]string{"text": text}, nil)
}

// Click waits for the element that css selects (a CSS selector), until
// ctx ends, and clicks it; the error of a wait that ran out names the
// selector and the page's URL.
func (b *Browser) Click(ctx context.Context, css string) error {
	id, err := b.wait(ctx, css)
	if err != nil {
		return err
	}
	return b.call(ctx, "POST", "/element/"+id+"/click", map[string]any{}, nil)
}

// WaitFor polls until ok holds of the page's URL and text, or ctx ends; the
// error then says what the page showed last.
func (b *Browser) WaitFor(ctx context.Context, what string, ok func(url, text string) bool) error {
	var url, text string
	for {
		// A read cut short by ctx's end keeps the last one seen, for the error.
		if u, err := b.URL(ctx); err == nil {
			url = u
		}
		if t, err := b.Text(ctx); err == nil {
			text = t
		}
		if ok(url, text) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: the page at %s shows %q", what, url, text)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Screenshot is a PNG of the page.
func (b *Browser) Screenshot(ctx context.Context) ([]byte, error) {
	var png []byte // WebDriver answers base64, which encoding/json decodes into []byte
	err := b.call(ctx, "GET", "/screenshot", nil, &png)
	return png, err
}

// Execute runs script in the page as a function body (W3C WebDriver
// §13.2.1 Execute Script) with args as its arguments, and decodes its
// return value into out (nil: dropped). WebDriver runs it outside the
// page's Content-Security-Policy, as a test's probe.
func (b *Browser) Execute(ctx context.Context, script string, args []any, out any) error {
	if args == nil {
		args = []any{}
	}
	return b.call(ctx, "POST", "/execute/sync", map[string]any{"script": script, "args": args}, out)
}

// ExecuteAsync is Execute for a script that answers by calling its last
// argument (§13.2.2 Execute Async Script), within the session's script
// timeout (SetScriptTimeout).
func (b *Browser) ExecuteAsync(ctx context.Context, script string, args []any, out any) error {
	if args == nil {
		args = []any{}
	}
	return b.call(ctx, "POST", "/execute/async", map[string]any{"script": script, "args": args}, out)
}

// SetScriptTimeout bounds ExecuteAsync's scripts (WebDriver's default is 30 s).
func (b *Browser) SetScriptTimeout(ctx context.Context, d time.Duration) error {
	return b.call(ctx, "POST", "/timeouts", map[string]any{"script": d.Milliseconds()}, nil)
}

// Emulate makes the page a viewport of width by height CSS pixels (at one
// device pixel each, touch-less) and, with dark, prefers-color-scheme:
// dark, through chromedriver's Chrome DevTools Protocol command
// (Emulation.setDeviceMetricsOverride and setEmulatedMedia). It lasts for
// the session, across pages.
func (b *Browser) Emulate(ctx context.Context, width, height int, dark bool) error {
	if err := b.cdp(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}); err != nil {
		return err
	}
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	return b.cdp(ctx, "Emulation.setEmulatedMedia", map[string]any{
		"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}}})
}

// cdp sends one Chrome DevTools Protocol command through chromedriver.
func (b *Browser) cdp(ctx context.Context, cmd string, params map[string]any) error {
	return b.call(ctx, "POST", "/goog/cdp/execute", map[string]any{"cmd": cmd, "params": params}, nil)
}

// SetCookie gives the browser the cookie c for the origin of the page
// shown now (W3C WebDriver's Add Cookie, which may set an HttpOnly one):
// what a server's Set-Cookie would have left, for a test that has the
// value by other means. Only name, value, path, HttpOnly, Secure and
// SameSite are sent.
func (b *Browser) SetCookie(ctx context.Context, c *http.Cookie) error {
	cookie := map[string]any{"name": c.Name, "value": c.Value, "path": c.Path, "httpOnly": c.HttpOnly, "secure": c.Secure}
	switch c.SameSite {
	case http.SameSiteStrictMode:
		cookie["sameSite"] = "Strict"
	case http.SameSiteLaxMode:
		cookie["sameSite"] = "Lax"
	case http.SameSiteNoneMode:
		cookie["sameSite"] = "None"
	}
	return b.call(ctx, "POST", "/cookie", map[string]any{"cookie": cookie}, nil)
}

// Window is the handle of the window (tab) commands go to now.
func (b *Browser) Window(ctx context.Context) (string, error) {
	var h string
	err := b.call(ctx, "GET", "/window", nil, &h)
	return h, err
}

// NewTab opens a blank tab in front of the others and sends the commands
// to it from now on; it answers its handle. The tab it covers is hidden
// (document.visibilityState) while it is in front.
func (b *Browser) NewTab(ctx context.Context) (string, error) {
	var w struct {
		Handle string `json:"handle"`
	}
	if err := b.call(ctx, "POST", "/window/new", map[string]string{"type": "tab"}, &w); err != nil {
		return "", err
	}
	return w.Handle, b.SwitchTo(ctx, w.Handle)
}

// SwitchTo brings the window (tab) handle to the front and sends the
// commands to it.
func (b *Browser) SwitchTo(ctx context.Context, handle string) error {
	return b.call(ctx, "POST", "/window", map[string]string{"handle": handle}, nil)
}

// wait polls for an element until ctx ends.
func (b *Browser) wait(ctx context.Context, css string) (string, error) {
	for {
		id, err := b.find(ctx, css)
		if err == nil {
			return id, nil
		}
		select {
		case <-ctx.Done():
			url, _ := b.URL(context.Background())
			return "", fmt.Errorf("waiting for %q on %s: %w", css, url, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *Browser) find(ctx context.Context, css string) (string, error) {
	var el map[string]string
	if err := b.call(ctx, "POST", "/element", map[string]string{"using": "css selector", "value": css}, &el); err != nil {
		return "", err
	}
	// The web element identifier (W3C WebDriver §12.2) is the one value.
	for _, id := range el {
		return id, nil
	}
	return "", fmt.Errorf("webdriver: no element reference in %v", el)
}

// call sends one WebDriver command; its value decodes into out. A WebDriver
// error ("no such element", ...) is returned with its message.
func (b *Browser) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("webdriver %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	var answer struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return fmt.Errorf("webdriver %s %s: %s: %w", method, path, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error, Message string }
		json.Unmarshal(answer.Value, &e)
		return fmt.Errorf("webdriver %s %s: %s: %s", method, path, e.Error, e.Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer.Value, out)
}
