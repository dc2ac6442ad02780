//go:build booted

package offload

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/internal/wait"
	"github.com/cocoonbox/cocoonbox/tests/offload/offloadbox"
)

// The idle test's own api and box network: the package's api keeps user
// boxes' idle hibernate off, as the other tests' shared box needs.
const (
	idleBridge  = "cboffidle0"
	idleGateway = "10.237.0.1/16"
	idleBox     = "idler"
)

// Must show (Contract: OAuth for agents, Idle user boxes): on an api with
// oauth.user_idle_hibernate 20s checked every second, a user's own box
// whose offload session works (the stand-in holding its turn, offloaded
// with `cocoonbox offload` through the api) stays up past the threshold
// with no client call: the api asks `cocoonbox-agent offload status` at
// each check and leaves it running. The control: once the turn is
// released and the session idle, the box is saved live and hibernated.
func TestAnIdleUserBoxStaysUpWhileAnOffloadSessionWorks(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(testRoot, "idle")
	idle, err := harness.Start(ctx, bins.API, harness.Options{StateDir: filepath.Join(root, "api"),
		Sandbox: harness.LocalSandbox(filepath.Join(testRoot, "images"), filepath.Join(root, "machines"), idleBridge, idleGateway),
		More:    "oauth:\n  user_idle_hibernate: 20s\n  idle_check_every: 1s\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the idle api's log:\n%s", idle.Log())
		}
		idle.Stop()
	}()
	cfgDir := filepath.Join(root, "config")
	_, token, err := idle.SignInCLI(ctx, bins.CLI, cfgDir, "idler", password, "offloade2e-idle")
	if err != nil {
		t.Fatal(err)
	}
	id, err := idle.CreateBox(ctx, token, idleBox, image)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := idle.DeleteBox(dctx, token, idleBox); err != nil {
			t.Error(err)
		}
	}()
	standin, err := offloadbox.BuildStandin()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(standin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := harness.InBox(idleBridge, id, bin, "install -d -o user -g user /home/user/.local /home/user/.local/bin && "+
		"cat >/home/user/.local/bin/claude && chown user:user /home/user/.local/bin/claude && chmod 755 /home/user/.local/bin/claude"); err != nil {
		t.Fatal(err)
	}
	// The CLI signed in to the idle api.
	run := func(dir, data string, args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(bins.CLI, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+data, "XDG_CONFIG_HOME="+cfgDir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("cocoonbox %v: %v\nstderr:\n%s", args, err, errb.String())
		}
		return parse(t, args, out.String(), errb.String())
	}
	data := t.TempDir()
	top := newRepo(t, "idled", [2]string{"a.txt", "one\n"})
	path := strings.TrimSpace(run(top, data, "offload", "handover-path")["stdout"].(string))
	write(t, filepath.Dir(path), filepath.Base(path), offloadtest.Handover("a long turn", "standin: hold"))
	run(top, data, "offload", "--box", idleBox, "--yes", "--json")
	// The session's status read inside the box (nsenter, no api call, so
	// the waits below make no client call).
	session := func() string {
		out, err := harness.InBox(idleBridge, id, nil, "runuser -u user -- sh -lc 'cocoonbox-agent offload status'")
		if err != nil {
			return err.Error()
		}
		for _, s := range []string{"working", "idle"} {
			if strings.Contains(out, `"status":"`+s+`"`) {
				return s
			}
		}
		return out
	}
	wait.Eventually(t, 2*time.Minute, "the session working (the stand-in holding)", func() (bool, string) { s := session(); return s == "working", s })

	logged := func(msg string) int {
		n := 0
		for _, line := range strings.Split(idle.Log(), "\n") {
			if strings.Contains(line, msg) && strings.Contains(line, "box="+id) {
				n++
			}
		}
		return n
	}
	const kept = `msg="boxes: idle box stays up: an offload session works"`
	from := logged(kept)
	wait.Eventually(t, 2*time.Minute, "three idle checks keeping the box up for its working session", func() (bool, string) {
		n := logged(kept) - from
		return n >= 3 || logged(`msg="boxes: idle box hibernating"`) > 0, fmt.Sprint(n)
	})
	if n := logged(`msg="boxes: idle box hibernating"`); n != 0 {
		t.Fatalf("the box with a working session was hibernated %d times", n)
	}
	if s := session(); s != "working" {
		t.Fatalf("the session is %s", s)
	}

	// The control: the turn released, the session idle, the box is saved
	// and hibernated.
	if _, err := harness.InBox(idleBridge, id, nil, "runuser -u user -- touch /home/user/.standin/release"); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 2*time.Minute, "the session idle after the release", func() (bool, string) { s := session(); return s == "idle", s })
	wait.Eventually(t, 3*time.Minute, "the idle box saved and hibernated", func() (bool, string) {
		n := logged(`msg="boxes: idle box hibernating"`)
		return n > 0, fmt.Sprint(n)
	})
	if err := idle.WaitBox(ctx, token, idleBox, controlv1.BoxState_BOX_STATE_HIBERNATED); err != nil {
		t.Fatal(err)
	}
	st, err := harness.Boxes(idle.URL, token).Status(ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: idleBox}))
	if err != nil {
		t.Fatal(err)
	}
	if st.Msg.Box.GetLastSavedAtMs() == 0 {
		t.Fatal("the idle box hibernated without its live save")
	}
}
