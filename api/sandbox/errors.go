package sandbox

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/client"
)

// The kinds of failure every Supervisor wraps.
var (
	// ErrNotFound: no machine, save or image of that name.
	ErrNotFound = errors.New("not found")
	// ErrExists: a machine or save of that id is already there.
	ErrExists = errors.New("already exists")
	// ErrInvalid: a request breaks a rule (an *InvalidError says which).
	ErrInvalid = errors.New("invalid request")
	// ErrState: the machine is not in a state the call needs.
	ErrState = errors.New("wrong state")
	// ErrCapExceeded: the tenant holds max_claims machines already.
	ErrCapExceeded = errors.New("tenant cap exceeded")
	// ErrUnavailable: the supervisor cannot do it now (try again).
	ErrUnavailable = errors.New("unavailable")
)

// InvalidError names the input and the rule it broke; its Error is
// "field: rule". Every Check and CheckX of this package returns one, and
// errors.Is(err, ErrInvalid) holds for it.
type InvalidError struct {
	Field string // "spec.id", "file.path", "exec.args", ...
	Rule  string // the rule, with the value that broke it quoted
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Rule }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// Invalid returns an *InvalidError for field, its rule formatted as
// fmt.Sprintf(format, args...); supervisors use it for their own checks.
func Invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

var (
	idRule     = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)
	tenantRule = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	saveRule   = regexp.MustCompile(`^save-[0-9a-f]{16}$`)
)

// CheckID checks a machine id (the rule of Spec.ID), naming field in the
// *InvalidError it returns for a bad one.
func CheckID(field, id string) error {
	if !idRule.MatchString(id) {
		return Invalid(field, "%q must be 1 to 63 of [a-z0-9-], start with a letter and not end with '-'", id)
	}
	return nil
}

// CheckSaveID checks a save id ("save-" and 16 lowercase hex digits, as
// Save makes them), naming field in the *InvalidError it returns.
func CheckSaveID(field, id string) error {
	if !saveRule.MatchString(id) {
		return Invalid(field, "%q must be save- and 16 lowercase hex digits", id)
	}
	return nil
}

// Check checks every field of a Spec; the *InvalidError of the first bad
// one names it (spec.id, spec.tenant, spec.image).
func (s Spec) Check() error {
	if err := CheckID("spec.id", s.ID); err != nil {
		return err
	}
	if !tenantRule.MatchString(s.Tenant) {
		return Invalid("spec.tenant", "%q must be 1 to 64 of [A-Za-z0-9_.-]", s.Tenant)
	}
	if s.Image != "" {
		if _, err := ParseImageRef(s.Image); err != nil {
			return err
		}
	}
	return nil
}

// ParseImageRef reads "cbdesk:vN-TIER" (N 1 to 999999, TIER a lowercase
// word of at most 16); anything else is an *InvalidError of field image.
func ParseImageRef(ref string) (Image, error) {
	m := client.ImageRef.FindStringSubmatch(ref) // the CLI's rule too
	if m == nil {
		return Image{}, Invalid("image", "%q %s", ref, client.ImageRefRule)
	}
	n, _ := strconv.Atoi(m[1])
	return Image{Ref: ref, Version: n, Tier: m[2]}, nil
}

// Check checks a File's path, size (MaxFileSize), mode (permission bits
// only) and owner; the *InvalidError names the field (file.path, ...).
func (f File) Check() error {
	if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
		return Invalid("file.path", "%q must be an absolute, clean path of a file", f.Path)
	}
	if len(f.Data) > MaxFileSize {
		return Invalid("file.data", "%d bytes is more than %d", len(f.Data), MaxFileSize)
	}
	if f.Mode&^0o7777 != 0 {
		return Invalid("file.mode", "%o holds more than permission bits", uint32(f.Mode))
	}
	if f.Owner != "" && !ownerRule.MatchString(f.Owner) {
		return Invalid("file.owner", "%q must be user or user:group, each [a-z_][a-z0-9_-]*", f.Owner)
	}
	return nil
}

// MachineIDRule is a machine id as systemd writes /etc/machine-id
// (machine-id(5); Contract: Journal) and Machine.MachineID carries it: 32
// lowercase hex digits, without the file's newline.
var MachineIDRule = regexp.MustCompile(`^[0-9a-f]{32}$`)

var ownerRule = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}(:[a-z_][a-z0-9_-]{0,31})?$`)

// CheckFirst checks Boot's first commands: at most MaxFirstCommands, each
// with Args as ExecRequest.Check takes them and at most MaxCommandStdin
// bytes of stdin; the *InvalidError names the field (boot.first).
func CheckFirst(cmds []Command) error {
	if len(cmds) > MaxFirstCommands {
		return Invalid("boot.first", "%d commands is more than %d", len(cmds), MaxFirstCommands)
	}
	for i, c := range cmds {
		if err := (ExecRequest{Args: c.Args}).Check(); err != nil {
			return Invalid("boot.first", "command %d: %v", i, err)
		}
		if len(c.Stdin) > MaxCommandStdin {
			return Invalid("boot.first", "command %d: %d bytes of stdin is more than %d", i, len(c.Stdin), MaxCommandStdin)
		}
	}
	return nil
}

// Check checks an ExecRequest (Args, Env entries as NAME=value, User, Dir,
// TTY); the *InvalidError names the field (exec.args, ...).
func (r ExecRequest) Check() error {
	if len(r.Args) == 0 || r.Args[0] == "" {
		return Invalid("exec.args", "the command is empty: give at least a program")
	}
	for i, a := range r.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return Invalid("exec.args", "argument %d holds a NUL byte", i)
		}
	}
	for _, e := range r.Env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || name == "" || strings.IndexByte(e, 0) >= 0 {
			return Invalid("exec.env", "%q must be NAME=value without NUL", e)
		}
	}
	if r.User != "" && !ownerRule.MatchString(r.User) || strings.Contains(r.User, ":") {
		return Invalid("exec.user", "%q must be a user name, [a-z_][a-z0-9_-]*", r.User)
	}
	if r.Login && r.User == "" {
		return Invalid("exec.login", "a login shell needs a user")
	}
	if r.Dir != "" && !path.IsAbs(r.Dir) {
		return Invalid("exec.dir", "%q must be absolute", r.Dir)
	}
	if r.TTY != nil {
		if err := r.TTY.Check(); err != nil {
			return err
		}
	}
	return nil
}

// Check refuses a size with zero rows or columns (an *InvalidError of
// field tty.size).
func (w WindowSize) Check() error {
	if w.Rows == 0 || w.Cols == 0 {
		return Invalid("tty.size", "%dx%d: rows and columns must both be at least 1", w.Rows, w.Cols)
	}
	return nil
}

// CheckPort checks a relayed TCP port (1 to 65535; an *InvalidError of
// field port).
func CheckPort(port int) error {
	if port < 1 || port > 65535 {
		return Invalid("port", "%d must be 1 to 65535", port)
	}
	return nil
}
