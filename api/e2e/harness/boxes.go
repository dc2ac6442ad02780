package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/nspawn"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// What the tests of a box through a real api share (api/session,
// api/e2e/offload): api.yaml's in-process supervisor on a network of the
// test's own, a user's device token, their box made with Boxes.Create and
// waited on, and a look inside the box that does not go through the api.

// LocalSandbox is api.yaml's sandbox mapping for the api's in-process
// supervisor (docs/box-lifecycle.md, "Configuration (api.yaml)"): the image
// catalog, the machines' state directory, and a bridge and gateway of the
// caller's own, so its boxes run beside other packages' tests.
func LocalSandbox(images, stateDir, bridge, gateway string) string {
	return fmt.Sprintf("sandbox:\n  local:\n    images: %s\n    state_dir: %s\n    bridge: %s\n    gateway: %s\n",
		images, stateDir, bridge, gateway)
}

// UserToken adds the user name with password (`cocoonbox-api users add`),
// signs them in to the console and approves a device named device, as the
// CLI's sign-in does: it answers that device token.
func (a *API) UserToken(ctx context.Context, name, password, device string) (string, error) {
	if err := a.AddUser(ctx, name, password); err != nil {
		return "", err
	}
	c, err := SignIn(ctx, a.URL, name, password)
	if err != nil {
		return "", err
	}
	return c.Device(ctx, device)
}

// SignInCLI adds the user and signs a CLI of theirs in, with its own
// cli.json under configDir, as a user does without a browser: a device
// token (UserToken) pasted into `cocoonbox login --token-stdin`. It
// answers the CLI and the token.
func (a *API) SignInCLI(ctx context.Context, bin, configDir, name, password, device string) (CLI, string, error) {
	c := CLI{Bin: bin, ConfigDir: configDir}
	tok, err := a.UserToken(ctx, name, password, device)
	if err != nil {
		return c, "", err
	}
	if out, err := c.Run(ctx, tok+"\n", "login", "--token-stdin", "--endpoint", a.URL); err != nil {
		return c, "", fmt.Errorf("cocoonbox login --token-stdin as %s: %w\n%s", name, err, out)
	}
	return c, tok, nil
}

// CreateBox makes the token's user's box name of image ("" the latest)
// with Boxes.Create and waits until it runs; it answers the box's id
// (which is also its machine's).
func (a *API) CreateBox(ctx context.Context, token, name, image string) (string, error) {
	r, err := Boxes(a.URL, token).Create(ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: "create-" + name, Name: name, Image: image}))
	if err != nil {
		return "", fmt.Errorf("create the box %s: %w", name, err)
	}
	return r.Msg.GetBox().GetBoxId(), a.WaitBox(ctx, token, name, controlv1.BoxState_BOX_STATE_RUNNING)
}

// DeleteBox deletes the box name (confirmed) and waits until it is gone
// (Status answers NOT_FOUND, or the state absent).
func (a *API) DeleteBox(ctx context.Context, token, name string) error {
	_, err := Boxes(a.URL, token).Delete(ctx, connect.NewRequest(&controlv1.ConfirmedBoxRequest{RequestId: "delete-" + name, Box: name, Confirm: true}))
	if err != nil {
		return fmt.Errorf("delete the box %s: %w", name, err)
	}
	return a.waitStatus(ctx, token, name, "gone", func(r *controlv1.BoxStatusResponse, err error) bool {
		return connect.CodeOf(err) == connect.CodeNotFound || err == nil && r.GetBox().GetState() == controlv1.BoxState_BOX_STATE_ABSENT
	})
}

// WaitBox waits, until ctx's deadline (else 3 minutes), for the box name
// to be in state with no operation under way.
func (a *API) WaitBox(ctx context.Context, token, name string, state controlv1.BoxState) error {
	return a.waitStatus(ctx, token, name, state.String(), func(r *controlv1.BoxStatusResponse, err error) bool {
		return err == nil && r.GetBox().GetState() == state && r.GetOperation() == nil
	})
}

// waitStatus calls Status of the box name until done holds of its
// answer, until ctx's deadline (else 3 minutes).
func (a *API) waitStatus(ctx context.Context, token, name, what string, done func(*controlv1.BoxStatusResponse, error) bool) error {
	timeout := 3 * time.Minute
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	c := Boxes(a.URL, token)
	return wait.Until(timeout, "box "+name+" "+what, func() (bool, string) {
		r, err := c.Status(ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: name}))
		if err != nil {
			return done(nil, err), err.Error()
		}
		return done(r.Msg, nil), r.Msg.String()
	})
}

// Leader is the host PID of the box's PID 1, from the record the
// in-process supervisor on bridge keeps of the booted machine.
func Leader(bridge, box string) (int, error) {
	data, err := os.ReadFile(filepath.Join("/run/cocoonbox-sandboxd", bridge, box+".json"))
	if err != nil {
		return 0, err
	}
	var rec struct {
		NSpawn int `json:"nspawn"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return 0, fmt.Errorf("the record of box %s: %w", box, err)
	}
	pid := nspawn.Leader(rec.NSpawn)
	if pid == 0 {
		return 0, fmt.Errorf("box %s has no leader (nspawn %d)", box, rec.NSpawn)
	}
	return pid, nil
}

// InBox runs a shell line as root in the box (nsenter into its leader,
// not through the api) with stdin, and answers its standard output; a
// failure's error carries both outputs.
func InBox(bridge, box string, stdin []byte, line string) (string, error) {
	pid, err := Leader(bridge, box)
	if err != nil {
		return "", err
	}
	cmd, err := nspawn.EnterCommand(context.Background(), pid, os.Environ(), "sh", "-c", line)
	if err != nil {
		return "", fmt.Errorf("enter the box %s: %w", box, err)
	}
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("in the box %s: %q: %w: %s%s", box, line, err, out, stderr.String())
	}
	return string(out), nil
}

// ExitCode is a finished command's exit status: 0 for no error, -1 for an
// error that is not an exit (the command did not start, or a signal).
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// BootedSpare waits until the in-process supervisor whose state directory
// is stateDir, on bridge, holds a spare (docs/box-lifecycle.md, Spares)
// whose systemd has finished its boot and whose claim env is written (the
// pool holds it from then), and answers the spare's name.
func BootedSpare(ctx context.Context, stateDir, bridge string) (string, error) {
	var name string
	err := wait.Until(2*time.Minute, "a booted spare in "+stateDir, func() (bool, string) {
		entries, _ := os.ReadDir(filepath.Join(stateDir, "spares"))
		for _, en := range entries {
			data, err := os.ReadFile(filepath.Join("/run/cocoonbox-sandboxd", bridge, en.Name()+".json"))
			var rec struct{ NSpawn int }
			if err != nil || json.Unmarshal(data, &rec) != nil {
				continue
			}
			leader := nspawn.Leader(rec.NSpawn)
			if leader == 0 {
				continue
			}
			cmd, err := nspawn.EnterCommand(ctx, leader, os.Environ(), "sh", "-c",
				"systemctl is-system-running; test -e /run/silkd.env && echo claimed")
			if err != nil {
				continue
			}
			out, _ := cmd.Output()
			if st := strings.Fields(string(out)); len(st) == 2 && (st[0] == "running" || st[0] == "degraded") {
				name = en.Name()
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d spare disks, none booted", len(entries))
	})
	return name, err
}
