// The spool (claim.go, init.go, respond.go, staged.go) is the trusted side of a tool-request spool (Contract:
// BranchBox managed runtime manifest, "Shared directory, tool endpoint,
// and request-spool leases" and the Security contract's request-spool
// rules). claimRequest moves one finalized request from requests/ into the
// root-only .processing/ before reading it, then checks what it moved on
// the descriptor.

package toolrequest

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// The spool's layout and quotas (Security contract: at most 16 pending
// files, 256 KiB per request, 1 MiB total).
const (
	RequestsDir   = "requests"
	ProcessingDir = ".processing"
	MaxPending    = 16
	MaxTotal      = 1 << 20
)

// ErrNotPending says no finalized request of that id is in requests/: the
// one retryable outcome (the dispatcher waits, then exits 75).
var ErrNotPending = errors.New("no finalized request is pending")

// claimRequest moves requests/<id>.json of the spool at dir into
// .processing/<id>.json (renameat2 RENAME_NOREPLACE: an earlier claim of
// the id is never overwritten) and returns its bytes once the moved file
// passes: a regular file (a symlink is moved as itself and refused, never
// followed), owned by consumerUID, mode exactly 0600, one link, at most
// MaxRequest bytes. Before the move the pending files must be
// within the quotas. Errors: ErrNotPending (retryable), a
// *branchbox.RuleError (request-file, request-quota: terminal), or I/O.
func claimRequest(dir, id string, consumerUID uint32) ([]byte, error) {
	name := id + ".json"
	where := dir + "/" + RequestsDir + "/" + name
	sfd, err := rundir.OpenPath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", dir, err)
	}
	defer unix.Close(sfd)
	rfd, err := rundir.OpenBeneath(sfd, RequestsDir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("spool %s: %s: %w", dir, RequestsDir, err)
	}
	defer unix.Close(rfd)
	pfd, err := rundir.OpenBeneath(sfd, ProcessingDir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("spool %s: %s: %w", dir, ProcessingDir, err)
	}
	defer unix.Close(pfd)
	if err := checkQuota(rfd, where); err != nil {
		return nil, err
	}
	if err := unix.Renameat2(rfd, name, pfd, name, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, ErrNotPending
		}
		return nil, fmt.Errorf("%s: claiming into %s: %w", where, ProcessingDir, err)
	}
	if err := unix.Fsync(pfd); err != nil {
		return nil, fmt.Errorf("%s: %w", ProcessingDir, err)
	}
	return readClaimed(pfd, name, where, consumerUID)
}

// readClaimed re-checks the moved file on its descriptor and reads it.
func readClaimed(pfd int, name, where string, consumerUID uint32) ([]byte, error) {
	fd, err := rundir.OpenBeneath(pfd, name, unix.O_RDONLY|unix.O_NONBLOCK)
	if errors.Is(err, unix.ELOOP) {
		return nil, branchbox.Refuse(branchbox.RuleRequestFile, where, "is a symlink; requests are regular files")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	f := os.NewFile(uintptr(fd), where)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, branchbox.Refuse(branchbox.RuleRequestFile, where, "is not a regular file")
	case st.Uid != consumerUID:
		return nil, branchbox.Refuse(branchbox.RuleRequestFile, where, "is owned by UID %d, not the consumer's %d", st.Uid, consumerUID)
	case st.Mode&0o7777 != 0o600:
		return nil, branchbox.Refuse(branchbox.RuleRequestFile, where, "has mode %04o, not 0600", st.Mode&0o7777)
	case st.Nlink != 1:
		return nil, branchbox.Refuse(branchbox.RuleRequestFile, where, "has %d links; a request has exactly one", st.Nlink)
	case st.Size > MaxRequest:
		return nil, branchbox.Refuse(branchbox.RuleRequestQuota, where, "is %d bytes, over %d", st.Size, MaxRequest)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRequest+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(data) > MaxRequest {
		return nil, branchbox.Refuse(branchbox.RuleRequestQuota, where, "grew past %d bytes", MaxRequest)
	}
	return data, nil
}

// checkQuota holds requests/ to MaxPending entries and MaxTotal bytes
// (sizes from fstatat without following links).
func checkQuota(rfd int, where string) error {
	// A duplicate to list: the os.File closes it, not rfd.
	dup, err := unix.Dup(rfd)
	if err != nil {
		return fmt.Errorf("%s: %w", RequestsDir, err)
	}
	d := os.NewFile(uintptr(dup), RequestsDir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("%s: %w", RequestsDir, err)
	}
	if len(names) > MaxPending {
		return branchbox.Refuse(branchbox.RuleRequestQuota, where, "%s holds %d pending files, over %d", RequestsDir, len(names), MaxPending)
	}
	var total int64
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(rfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // renamed away meanwhile
		}
		total += st.Size
	}
	if total > MaxTotal {
		return branchbox.Refuse(branchbox.RuleRequestQuota, where, "%s holds %d bytes, over %d", RequestsDir, total, MaxTotal)
	}
	return nil
}
