package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// ExecTimeout bounds every command BranchBox runs in a container
// (Security contract: "Docker exec ... operations are time-bounded").
const ExecTimeout = 10 * time.Second

// Exec runs argv in container id as user ("" is the container's own) and
// returns its standard output, at most 64 KiB; a non-zero exit is an
// error with its standard error. It gives up after ExecTimeout.
func Exec(ctx context.Context, c *client.Client, id, user string, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ExecTimeout)
	defer cancel()
	ex, err := c.ExecCreate(ctx, id, client.ExecCreateOptions{User: user, Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return nil, fmt.Errorf("exec %v in %s: %w", argv, id, err)
	}
	att, err := c.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("exec %v in %s: %w", argv, id, err)
	}
	defer att.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = att.Conn.SetDeadline(d)
	}
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, io.LimitReader(att.Reader, 64<<10)); err != nil {
		return nil, fmt.Errorf("exec %v in %s: %w", argv, id, err)
	}
	st, err := c.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("exec %v in %s: %w", argv, id, err)
	}
	if st.ExitCode != 0 {
		return nil, fmt.Errorf("exec %v in %s as %q: exit %d: %s", argv, id, user, st.ExitCode, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// ProviderUser resolves the provider user of the inspected primary
// container (Contract: Security contract: "resolves the actual provider
// user from remoteUser/containerUser or Docker's inspected Config.User,
// runs id -u in the container, and rejects root or any mismatch with the
// signed consumer_uid"): remoteUser, else containerUser, else Config.User;
// `id -u` run as that user must print a UID other than 0 and equal to each
// of uids (the tool-request leases' consumer_uid). It returns the user
// and the UID. Refusals are rule provider-user.
func ProviderUser(ctx context.Context, c *client.Client, id, remoteUser, containerUser, configUser string, uids []uint32) (string, uint32, error) {
	user := remoteUser
	if user == "" {
		user = containerUser
	}
	if user == "" {
		user = configUser
	}
	out, err := Exec(ctx, c, id, user, "id", "-u")
	if err != nil {
		return "", 0, branchbox.Refuse(branchbox.RuleProviderUser, "container "+id, "id -u as %q failed: %v", user, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 32)
	if err != nil {
		return "", 0, branchbox.Refuse(branchbox.RuleProviderUser, "container "+id, "id -u as %q printed %q", user, out)
	}
	uid := uint32(n)
	if uid == 0 {
		return "", 0, branchbox.Refuse(branchbox.RuleProviderUser, "container "+id, "the provider user %q is root; a managed consumer is never root", user)
	}
	for _, want := range uids {
		if uid != want {
			return "", 0, branchbox.Refuse(branchbox.RuleProviderUser, "container "+id, "the provider user %q is UID %d, not the signed consumer_uid %d", user, uid, want)
		}
	}
	return user, uid, nil
}
