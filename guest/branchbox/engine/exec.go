package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// execTimeout bounds every command BranchBox runs in a container
// (Security contract: "Docker exec ... operations are time-bounded").
const execTimeout = 10 * time.Second

// Exec runs argv in container id as user ("" is the container's own) and
// returns its standard output, at most 64 KiB; a non-zero exit is an
// error with its standard error. It gives up after execTimeout.
func Exec(ctx context.Context, c *client.Client, id, user string, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
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
// user from remoteUser/containerUser or Docker's inspected Config.User
// ... and rejects root or any mismatch with the signed consumer_uid"):
// remoteUser, else containerUser, else Config.User. Its UID and GID are
// the kernel's, never a command's output: a process started in the
// container as that user (docker exec of cat, held on its standard
// input) is read in /proc/<pid>/status through the engine's pid (checked
// to be in the container's PID namespace), its real, effective, saved
// and file-system UIDs all equal. A repository that replaces /bin/id
// (with remoteUser root) no longer passes for UID 1000. The UID must not
// be 0 and must equal each of uids (the tool-request leases' consumer_uid
// and the owner of the workspace copy). It returns the user, UID and GID.
// Refusals are rule provider-user.
func ProviderUser(ctx context.Context, c *client.Client, id, remoteUser, containerUser, configUser string, uids []uint32) (string, uint32, uint32, error) {
	user := remoteUser
	if user == "" {
		user = containerUser
	}
	if user == "" {
		user = configUser
	}
	refuse := func(detail string, args ...any) error {
		return branchbox.Refuse(branchbox.RuleProviderUser, "container "+id, detail, args...)
	}
	uid, gid, err := kernelUser(ctx, c, id, user)
	if err != nil {
		return "", 0, 0, refuse("the provider user %q: %v", user, err)
	}
	if uid == 0 {
		return "", 0, 0, refuse("the provider user %q is root (the kernel says UID 0); a managed consumer is never root", user)
	}
	for _, want := range uids {
		if uid != want {
			return "", 0, 0, refuse("the provider user %q is UID %d (the kernel's), not the signed consumer UID %d", user, uid, want)
		}
	}
	return user, uid, gid, nil
}

// kernelUser starts `cat` in container id as user, holding its standard
// input open, and reads the process's UID and GID lines from
// /proc/<pid>/status (ExecInspect's pid, a host pid), then lets it end.
func kernelUser(ctx context.Context, c *client.Client, id, user string) (uint32, uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	ex, err := c.ExecCreate(ctx, id, client.ExecCreateOptions{User: user, Cmd: []string{"cat"}, AttachStdin: true, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, 0, fmt.Errorf("exec as %q: %w", user, err)
	}
	att, err := c.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("exec as %q: %w", user, err)
	}
	defer att.Close()
	ct, err := c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil || ct.Container.State == nil {
		return 0, 0, fmt.Errorf("inspecting container: %v", err)
	}
	var pid int
	for pid == 0 {
		st, err := c.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		switch {
		case err != nil:
			return 0, 0, fmt.Errorf("exec as %q: %w", user, err)
		case st.Running && st.PID != 0:
			pid = st.PID
		case !st.Running && st.PID != 0, ctx.Err() != nil:
			return 0, 0, fmt.Errorf("the process started as %q ended before its credentials could be read (exit %d)", user, st.ExitCode)
		}
	}
	if err := samePIDNamespace(pid, ct.Container.State.Pid); err != nil {
		return 0, 0, err
	}
	uids, err := statusIDs(pid, "Uid:")
	if err != nil {
		return 0, 0, err
	}
	gids, err := statusIDs(pid, "Gid:")
	if err != nil {
		return 0, 0, err
	}
	for _, u := range uids[1:] {
		if u != uids[0] {
			return 0, 0, fmt.Errorf("process %d has UIDs %v (real, effective, saved, file system differ)", pid, uids)
		}
	}
	return uids[1], gids[1], nil
}

// samePIDNamespace checks that pid runs in the PID namespace of the
// container's own process (its engine pid): the exec's pid is that
// container's.
func samePIDNamespace(pid, containerPid int) error {
	a, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return err
	}
	b, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", containerPid))
	if err != nil {
		return err
	}
	if a != b {
		return fmt.Errorf("process %d is in PID namespace %s, not the container's %s", pid, a, b)
	}
	return nil
}

// statusIDs reads the four IDs of a "Uid:" or "Gid:" line of
// /proc/<pid>/status (real, effective, saved, file system).
func statusIDs(pid int, field string) ([]uint32, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, field)
		if !ok {
			continue
		}
		var ids []uint32
		for _, f := range strings.Fields(rest) {
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("/proc/%d/status %s %q", pid, field, rest)
			}
			ids = append(ids, uint32(n))
		}
		if len(ids) != 4 {
			return nil, fmt.Errorf("/proc/%d/status %s %q", pid, field, rest)
		}
		return ids, nil
	}
	return nil, fmt.Errorf("/proc/%d/status has no %s line", pid, field)
}
