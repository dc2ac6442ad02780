package toolrequest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// The spool's immutable files.
const (
	BindingFile    = ".binding.json"
	CapabilityFile = ".capability"
)

// SpoolBinding is .binding.json: the non-secret facts of a spool from the signed
// assignment (Contract: request-spool leases, ".binding.json ... containing
// the non-secret run, lease, consumer, request and response paths, filename
// convention, quotas, and optional replay policy"). Paths are as the
// consumer sees them, below the lease's request_spool_target.
type SpoolBinding struct {
	EnvelopeVersion string `json:"envelope_version"`
	RunID           string `json:"run_id"`
	LeaseID         string `json:"lease_id"`
	Consumer        string `json:"consumer"`
	ConsumerUID     uint32 `json:"consumer_uid"`
	Requests        string `json:"requests"`
	Responses       string `json:"responses"`
	// Filename is the convention: write a temporary file of mode 0600 in
	// requests/, then rename it to <request_id>.json.
	Filename     string `json:"filename"`
	MaxPending   int    `json:"max_pending"`
	MaxRequest   int    `json:"max_request_bytes"`
	MaxTotal     int    `json:"max_total_bytes"`
	ReplayPolicy string `json:"replay_policy,omitempty"`
}

// BindingOf is the binding of tool-request lease l of assignment a.
func BindingOf(a *branchbox.Assignment, l *branchbox.Lease) SpoolBinding {
	return SpoolBinding{EnvelopeVersion: Version, RunID: a.RunID, LeaseID: l.LeaseID, Consumer: l.Consumer,
		ConsumerUID: *l.ConsumerUID, Requests: l.RequestSpoolTarget + "/" + RequestsDir,
		Responses: l.RequestSpoolTarget + "/" + responsesDir, Filename: "<request_id>.json",
		MaxPending: MaxPending, MaxRequest: MaxRequest, MaxTotal: MaxTotal, ReplayPolicy: l.ReplayPolicy}
}

// Init lays out a fresh spool in dir, the root of the lease's named volume
// as the engine holds it (Contract: request-spool leases, the list of
// paths): .binding.json and .capability root's 0444, requests/ 0700 of
// b.ConsumerUID, responses/ root's 0755, .processing/ root's 0700; dir
// itself root's 0755, so the consumer can replace none of them. Every entry
// is made on descriptors (openat2, no symlink followed) and synced, then
// dir. A dir that already holds anything is refused (rule request-spool):
// it is not the fresh volume of this run. Run as root.
func Init(dir string, b SpoolBinding, capability []byte) error {
	dfd, err := rundir.OpenPath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("spool %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	if err := empty(dfd, dir); err != nil {
		return err
	}
	if err := unix.Fchown(dfd, 0, 0); err != nil {
		return fmt.Errorf("spool %s: %w", dir, err)
	}
	if err := unix.Fchmod(dfd, 0o755); err != nil {
		return fmt.Errorf("spool %s: %w", dir, err)
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := create(dfd, dir, BindingFile, append(data, '\n')); err != nil {
		return err
	}
	if err := create(dfd, dir, CapabilityFile, capability); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		mode uint32
		uid  uint32
	}{{ProcessingDir, 0o700, 0}, {responsesDir, 0o755, 0}, {RequestsDir, 0o700, b.ConsumerUID}} {
		if err := mkdir(dfd, dir, d.name, d.mode, d.uid); err != nil {
			return err
		}
	}
	return unix.Fsync(dfd)
}

// empty refuses a directory with any entry in it.
func empty(dfd int, dir string) error {
	dup, err := unix.Dup(dfd)
	if err != nil {
		return fmt.Errorf("spool %s: %w", dir, err)
	}
	d := os.NewFile(uintptr(dup), dir)
	defer d.Close()
	names, err := d.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("spool %s: %w", dir, err)
	}
	if len(names) > 0 {
		return branchbox.Refuse(branchbox.RuleRequestSpool, dir, "already holds %s; a spool is initialized only in its fresh volume", names[0])
	}
	return nil
}

// create writes a root-owned 0444 file name in dfd, synced.
func create(dfd int, dir, name string, data []byte) error {
	if err := durable.CreateAt(dfd, name, durable.File{Data: data, Mode: 0o444}); err != nil {
		return fmt.Errorf("spool %s/%s: %w", dir, name, err)
	}
	return nil
}

// mkdir makes directory name in dfd with mode (exactly: no umask) and
// owner uid (group the sameResponse).
func mkdir(dfd int, dir, name string, mode, uid uint32) error {
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return fmt.Errorf("spool %s/%s: %w", dir, name, err)
	}
	fd, err := rundir.OpenBeneath(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("spool %s/%s: %w", dir, name, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, int(uid), int(uid)); err != nil {
		return fmt.Errorf("spool %s/%s: %w", dir, name, err)
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("spool %s/%s: %w", dir, name, err)
	}
	return unix.Fsync(fd)
}
