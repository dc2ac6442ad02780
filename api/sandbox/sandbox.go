// Package sandbox is what the api asks of a box supervisor (sandboxd):
// machines booted from cbdesk images for tenants, files and claim env
// entries put into them, commands run and TCP ports relayed inside them,
// hibernation with memory kept, saves, restores, clones and rebases, and a
// stream of their state changes.
//
// Contract: Boxes (api) ↔ sandboxd. The contract lost that section's table;
// this package and its wire form (api/proto/cocoonbox/sandbox/v1, served and
// spoken by package wire) are the definition, written down in docs/boxes.md
// (the section of the same name). Two supervisors implement it: package local
// (systemd-nspawn on this host, the embedded default) and wire.Client (a
// cocoonbox-sandboxd daemon reached over connect-go).
//
// The records the guest reads are not defined here: the identity file is
// guest/identity's, the claim env records guest/vault's. A supervisor only
// carries bytes into the box (PutFile) and renders /run/silkd.env.
package sandbox

import (
	"context"
	"io"
	"io/fs"
	"net"
	"time"
)

// Supervisor boots and keeps machines. Every method is safe for concurrent
// use; two calls on one machine are serialised by the supervisor (the later
// waits), so a caller never sees a half-done operation. Errors wrap one of
// ErrNotFound, ErrExists, ErrInvalid, ErrState, ErrCapExceeded or
// ErrUnavailable where they apply, so callers map them to their own codes
// with errors.Is.
type Supervisor interface {
	// Images lists the images this supervisor can boot, oldest first.
	Images(ctx context.Context) ([]Image, error)
	// SetTenantCap sets how many machines (claims) a tenant may hold at once:
	// Create, Restore and Clone beyond it fail with ErrCapExceeded. A tenant
	// never set has DefaultMaxClaims. Lowering the cap below what the tenant
	// holds keeps its machines and refuses new ones.
	SetTenantCap(ctx context.Context, tenant string, maxClaims int) error

	// Create makes a stopped machine from an image: its own disk (the image
	// below a writable layer), nothing booted yet.
	Create(ctx context.Context, spec Spec) (Machine, error)
	// Boot starts a stopped machine and returns once its systemd reports
	// running (or degraded). As soon as the machine's init runs, beside the
	// rest of its boot, the supervisor renders the guest-visible claim env
	// entries set before into /run/silkd.env and then runs first's commands
	// (CheckFirst) as root, in order; Boot waits for both before it
	// answers, and fails, the machine stopped, when one exits non-zero. So
	// what they write is in place when Boot answers, and usually before
	// the units that read it start (a unit that must see it watches it).
	Boot(ctx context.Context, id string, first ...Command) (Machine, error)
	// Get returns one machine; List every machine of a tenant ("" for all).
	Get(ctx context.Context, id string) (Machine, error)
	List(ctx context.Context, tenant string) ([]Machine, error)

	// PutFile writes a file inside a running machine atomically (a
	// temporary file in the same directory, renamed over the old one), so a
	// reader in the box sees the old or the new file, never half of one.
	PutFile(ctx context.Context, id string, f File) error
	// SetClaimEnv replaces the machine's claim env entries. The guest-visible
	// ones are rendered into /run/silkd.env (atomically, at once when the
	// machine runs, and again at every boot); the others stay with the
	// supervisor and never enter the box.
	SetClaimEnv(ctx context.Context, id string, entries []ClaimEntry) error
	// Exec starts a command inside a running machine. The returned Process
	// carries its streams; its end is Wait's.
	Exec(ctx context.Context, id string, req ExecRequest) (Process, error)
	// Dial opens a TCP connection to 127.0.0.1:port inside a running
	// machine: the port relay (Contract: Agent listen, 7443; VNC, 5900).
	Dial(ctx context.Context, id string, port int) (net.Conn, error)

	// Hibernate freezes a running machine: every process stops where it is,
	// memory kept. Wake thaws it. Neither reboots anything.
	Hibernate(ctx context.Context, id string) (Machine, error)
	Wake(ctx context.Context, id string) (Machine, error)

	// Save records the machine's disk state (running or stopped; a running
	// one's file systems are flushed first) and returns the save with its
	// size in bytes. A save outlives its machine. saveID names it
	// ("save-" and 16 hex digits, CheckSaveID), or "" for a name the
	// supervisor picks; a save of that name of the same machine is replaced,
	// so a caller that names its saves and calls again after a crash holds
	// one save, not two. A name another machine's save holds is ErrExists.
	Save(ctx context.Context, id, saveID string) (SaveInfo, error)
	// Restore makes a stopped machine from a save, for spec's tenant; the
	// image is the save's unless spec names one.
	Restore(ctx context.Context, saveID string, spec Spec) (Machine, error)
	// DeleteSave removes a save.
	DeleteSave(ctx context.Context, saveID string) error
	// Clone makes a stopped machine with a copy of another's disk and an
	// empty /etc/machine-id, so its systemd makes a new one (Contract:
	// Journal: every clone gets a new machine id).
	Clone(ctx context.Context, sourceID string, spec Spec) (Machine, error)
	// Rebase moves a machine onto another image, keeping /home/user and
	// /workspace and dropping every other change to its disk. A running
	// machine is shut down, rebased and booted again.
	Rebase(ctx context.Context, id, image string) (Machine, error)
	// Delete stops a machine and removes it and its disk (not its saves).
	Delete(ctx context.Context, id string) error

	// Watch streams state changes with a sequence number greater than
	// after (0 for all the supervisor still holds), then every new one,
	// until ctx ends. A subscriber too slow to keep up is dropped: its
	// channel closes, and it watches again from the last Seq it saw.
	Watch(ctx context.Context, after uint64) (<-chan Event, error)
}

// DefaultMaxClaims is the tenant cap before SetTenantCap: the user's
// default max_boxes (1) plus the Rebase overlap (Contract: OAuth for agents,
// "max_boxes + the agent boxes + 1").
const DefaultMaxClaims = 2

// State is where a machine is in its life.
type State string

// The machine states. Absent is only ever seen in an Event: the machine was
// deleted.
const (
	Stopped    State = "stopped"
	Starting   State = "starting"
	Running    State = "running"
	Hibernated State = "hibernated"
	Failed     State = "failed"
	Absent     State = "absent"
)

// Spec says what a new machine is.
type Spec struct {
	// ID names the machine: 1 to 63 of [a-z0-9-], starting with a letter
	// and not ending with '-' (a hostname label; the api uses box ids,
	// cb-…). It is the caller's, so a retried Create finds the first one
	// (ErrExists).
	ID string
	// Tenant owns it: 1 to 64 of [A-Za-z0-9_.-].
	Tenant string
	// Image is an image's Ref ("cbdesk:v1-desk").
	Image string
}

// Machine is what the supervisor says of one machine.
type Machine struct {
	// ID, Tenant and Image are its Spec's.
	ID, Tenant, Image string
	State             State
	// Address is the machine's IPv4 address on the box network (empty
	// while it is not booted).
	Address string
	// Leader is the host PID of the machine's PID 1 while it is booted.
	Leader int
	// Booted is when it last reached running.
	Booted time.Time
	// MachineID is the machine id (32 lowercase hex digits) the machine's
	// systemd took at its last boot (Contract: Journal), while it is
	// booted: the one its disk held, or one the supervisor chose for a disk
	// that held none. Empty when the supervisor does not know it (the box
	// made its /etc/machine-id something other than an id, or a supervisor
	// older than this field): the caller reads it in the box then. A change
	// made inside the box after the boot (a wake's new id) is not followed.
	MachineID string
}

// Image is one bootable image.
type Image struct {
	// Ref is "cbdesk:vN-TIER", e.g. "cbdesk:v1-desk".
	Ref string
	// Version is N, Tier the tier.
	Version int
	Tier    string
}

// File is one file for PutFile.
type File struct {
	// Path is absolute, clean (no "." or ".." parts) and not "/".
	Path string
	Data []byte
	// Mode is the permission bits (0644 when zero).
	Mode fs.FileMode
	// Owner is "user" or "user:group" as the box names them ("root" when
	// empty). The parent directory must exist.
	Owner string
}

// MaxFileSize bounds File.Data (16 MiB).
const MaxFileSize = 16 << 20

// ClaimEntry is one claim env entry (Contract: Box API keys; Key vault).
type ClaimEntry struct {
	// Name is a variable name, [A-Za-z_][A-Za-z0-9_]*.
	Name string
	// Value is its value. For COCOONBOX_VAULT and COCOONBOX_CONNECT it is a
	// list of guest/vault records, checked with that package.
	Value string
	// Guest says it lands in the box's /run/silkd.env. false keeps it on the
	// host (a vault key's real value, CBV_<id>, that the egress proxy will
	// swap for its placeholder on Hosts).
	Guest bool
	// Hosts and How say, for a host-only entry, where and how its value is
	// sent: host names and "Header: template" or "?param={}", as in a
	// guest/vault record. Both empty for a guest entry.
	Hosts []string
	How   string
}

// ExecRequest is one command for Exec.
type ExecRequest struct {
	// Args is the program and its arguments; at least one, the first not
	// empty.
	Args []string
	// Env adds NAME=value entries to the box's base environment (PATH,
	// HOME, LANG, TERM).
	Env []string
	// User runs it as that box user ("" is root); Login through that user's
	// login shell (runuser -l), Args joined with spaces as one shell line.
	User  string
	Login bool
	// Dir is the working directory ("" is the user's home, or /).
	Dir string
	// TTY, when set, gives the command a terminal of that size; stderr is
	// then part of stdout, as on any terminal.
	TTY *WindowSize
}

// Command is one of Boot's first commands: Args as ExecRequest's, run as
// root with Stdin (at most MaxCommandStdin bytes) and no terminal; its
// output is dropped, but for the end of its stderr in Boot's error.
type Command struct {
	Args  []string
	Stdin []byte
}

// MaxFirstCommands and MaxCommandStdin bound Boot's first commands.
const (
	MaxFirstCommands = 8
	MaxCommandStdin  = 64 << 10
)

// WindowSize is a terminal's size in character cells; both at least 1.
type WindowSize struct {
	Rows, Cols uint16
}

// Process is a command started by Exec.
type Process interface {
	// Stdin feeds the command; Close sends end of file.
	Stdin() io.WriteCloser
	// Stdout and Stderr are its output (Stderr is empty with a TTY). Read
	// them to their end before Wait returns what is left.
	Stdout() io.Reader
	Stderr() io.Reader
	// Resize changes the terminal's size (ErrInvalid without a TTY).
	Resize(ctx context.Context, size WindowSize) error
	// Wait returns how the command ended, once it has and its output is
	// drained. Cancelling Exec's ctx kills it.
	Wait() (ExitStatus, error)
}

// ExitStatus is how a command ended.
type ExitStatus struct {
	// Code is its exit code, or 128+N when signal N killed it (the
	// shell's convention, so a SIGINT is 130).
	Code int
	// Signal names the signal that killed it ("SIGINT"), else "".
	Signal string
}

// SaveInfo is one save of a machine's disk.
type SaveInfo struct {
	// ID is "save-" and 16 hex digits (CheckSaveID).
	ID string
	// Machine, Tenant and Image are the saved machine's.
	Machine, Tenant, Image string
	// Size is the save's size on disk, in bytes.
	Size int64
	// Created is when Save made it (UTC).
	Created time.Time
}

// Event is one state change.
type Event struct {
	// Seq increases by one per event of this supervisor.
	Seq uint64
	// Machine and Tenant name the machine; State is the one it entered.
	Machine string
	Tenant  string
	State   State
	// Time is when it did, by the supervisor's clock (UTC).
	Time time.Time
	// Detail says why, for a failure.
	Detail string
}
