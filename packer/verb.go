package packer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// BoxInfo is the box an offload goes to, as Boxes.List names it.
type BoxInfo struct {
	ID, Name string
	// Image is the box's image ref, cbdesk:vN-TIER.
	Image string
}

// verbResult is one box verb's answer: its JSON line and exit status
// (Contract: Offload, Verbs: 0 done, 1 failed, 2 usage, 3 refused, 4 the
// inbox is not running).
type verbResult struct {
	resp map[string]any
	code int
}

func (v verbResult) str(k string) string { s, _ := v.resp[k].(string); return s }

// err is the verb's failure as the packer's: a refusal stays one.
func (v verbResult) err(step string) error {
	msg := v.str("error")
	switch v.code {
	case 0:
		return nil
	case 3:
		return &Refusal{Msg: step + " refused in the box: " + msg}
	case 4:
		return &Failure{Step: step, Err: errors.New("the box's offload inbox is not running (cocoonbox-offload-inbox.service of user): " + msg)}
	}
	return &Failure{Step: step, Err: fmt.Errorf("exit %d: %s", v.code, msg)}
}

// verb runs cocoonbox-agent offload ARGS in the box; its stderr (progress,
// never a secret) goes to the person's progress.
func (p *Packer) verb(ctx context.Context, stdin io.Reader, args ...string) (verbResult, error) {
	wctx, stop := p.watchBox(ctx)
	cmd := p.Transport.Command(wctx, append([]string{"cocoonbox-agent", "offload"}, args...)...)
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout = stdin, &out
	if p.Progress.W != nil {
		cmd.Stderr = p.Progress.W
	}
	err := cmd.Run()
	if serr := stop(); serr != nil && (err != nil || cmd.ProcessState.ExitCode() != 0) {
		return verbResult{}, fmt.Errorf("offload %s in the box: %w", args[0], serr)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return verbResult{}, fmt.Errorf("offload %s in the box: %w", args[0], err)
	}
	res := verbResult{code: cmd.ProcessState.ExitCode()}
	line := strings.TrimSpace(out.String())
	if json.Unmarshal([]byte(line), &res.resp) != nil || strings.Contains(line, "\n") {
		return res, fmt.Errorf("offload %s in the box (exit %d): stdout is not one JSON line: %q", args[0], res.code, first1k(line))
	}
	return res, nil
}

func first1k(s string) string {
	if len(s) > 1024 {
		return s[:1024] + "…"
	}
	return s
}

// Status is the box's offload status of the repo key: its sessions
// (Contract: Offload, Verbs, status).
func (p *Packer) Status(ctx context.Context, key string) ([]map[string]any, error) {
	return p.sessions(ctx, "status", "--repo", key)
}

// ErrNoOffload is a box whose image has no offload verbs: older than
// cbdesk:v22, it has no cocoonbox-agent (the shell's exit 127) or one
// without offload (exit 2, the usage, no JSON line).
var ErrNoOffload = errors.New("the box's image has no cocoonbox-agent offload (older than cbdesk:v22)")

// Sessions is every offload session in the box, of every repo (status
// without --repo), for the Watching rule (Contract: Offload, Watching);
// ErrNoOffload when the image has no offload verbs.
func (p *Packer) Sessions(ctx context.Context) ([]map[string]any, error) {
	return p.sessions(ctx, "status")
}

func (p *Packer) sessions(ctx context.Context, args ...string) ([]map[string]any, error) {
	r, err := p.verb(ctx, nil, args...)
	if err != nil && r.resp == nil && (r.code == 127 || r.code == 2) {
		return nil, fmt.Errorf("%w: %v", ErrNoOffload, err)
	}
	if err == nil {
		err = r.err("status")
	}
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, s := range anyList(r.resp["sessions"]) {
		if m, ok := s.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, nil
}
