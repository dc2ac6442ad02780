package sandboxtest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/guest/identity"
)

// identityWriter is the guest's identity writer, the one program a box
// in memory has (Contract: Box identity).
const identityWriter = "/usr/local/lib/cocoonbox/identity"

// Exec runs a command in a running machine as the box would answer it,
// for the one kind of command the api runs there: `sh -c SCRIPT sh HOST
// MARK [ID]` whose script runs the identity writer, waits for the
// hostname and reads /etc/machine-id back. Such a script here:
//   - takes the record on stdin as the guest's writer does
//     (identity.Parse: a bad record exits 1 with its fault) and prints
//     "written";
//   - when the script writes /etc/machine-id before the record and ID is
//     given, makes ID the machine's id (a wake's new id);
//   - fails, as the hostname wait does, when HOST is not the record's
//     hostname;
//   - prints the machine id when the script reads /etc/machine-id.
//
// It also answers what a restore of a snapshot's paths runs (issue 42,
// Deliver 4): `tar --extract ... -C DIR` writes each regular file of the
// tar on stdin to the disk under DIR, as PutFile does (File reads it
// back), and `mkdir -p -- DIR` exits 0.
//
// Any other command exits 127 saying so. Cancelling ctx kills the
// command (exit 137, SIGKILL).
func (s *Supervisor) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	_, err := s.in(id, sandbox.Running)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	p := &process{stdin: inW, stdout: outR, stderr: errR, tty: req.TTY != nil, done: make(chan struct{})}
	stop := context.AfterFunc(ctx, func() { inR.CloseWithError(ctx.Err()) })
	go func() {
		defer close(p.done)
		defer stop()
		stdin, rerr := io.ReadAll(inR)
		var stdout, stderr string
		switch {
		case rerr != nil && ctx.Err() != nil:
			p.status = sandbox.ExitStatus{Code: 137, Signal: "SIGKILL"}
		default:
			s.mu.Lock()
			if m, err := s.in(id, sandbox.Running); err != nil {
				stderr, p.status.Code = err.Error(), 1
			} else {
				stdout, stderr, p.status.Code = m.run(req.Args, stdin)
			}
			s.mu.Unlock()
		}
		if p.tty { // a terminal carries stderr in stdout
			stdout, stderr = stdout+stderr, ""
		}
		_, _ = io.WriteString(outW, stdout)
		outW.Close()
		_, _ = io.WriteString(errW, stderr)
		errW.Close()
	}()
	return p, nil
}

// run is what the box answers args with stdin: stdout, stderr and the
// exit code (see Exec); s.mu held.
func (m *machine) run(args []string, stdin []byte) (stdout, stderr string, code int) {
	switch {
	case len(args) > 2 && args[0] == "tar" && args[1] == "--extract":
		return m.extract(args[len(args)-1], stdin)
	case len(args) == 4 && args[0] == "mkdir" && args[1] == "-p" && args[2] == "--":
		return "", "", 0
	}
	if len(args) < 5 || args[0] != "sh" || args[1] != "-c" {
		return "", fmt.Sprintf("%s: %v", args[0], errNoProgram), 127
	}
	script, host := args[2], args[4] // args[3] is $0
	writer := strings.Index(script, identityWriter+" write")
	reads := strings.Contains(script, "</etc/machine-id")
	if writer < 0 && !reads {
		return "", fmt.Sprintf("sh -c %.40q: %v", script, errNoProgram), 127
	}
	var out strings.Builder
	if writer >= 0 {
		rec, err := identity.Parse(stdin)
		if err == nil {
			m.hostname, err = rec.Hostname()
		}
		if err != nil {
			return "", "identity write: " + err.Error(), 1
		}
		m.identity = append([]byte(nil), stdin...)
		if newID := strings.Index(script, "/etc/machine-id"); newID >= 0 && newID < writer && len(args) > 6 {
			if !sandbox.MachineIDRule.MatchString(args[6]) {
				return "", fmt.Sprintf("machine-id: %q is not 32 hex digits", args[6]), 1
			}
			m.diskID, m.MachineID = args[6], args[6]
		}
		out.WriteString("written\n")
	}
	if m.hostname != host {
		return out.String(), fmt.Sprintf("the hostname did not follow the identity within 10 s: it is %s, not %s", m.hostname, host), 1
	}
	if reads {
		out.WriteString(m.diskID + "\n")
	}
	return out.String(), "", 0
}

// process is a command Exec started.
type process struct {
	stdin          io.WriteCloser
	stdout, stderr io.Reader
	tty            bool
	done           chan struct{}
	status         sandbox.ExitStatus
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

// Resize takes any size of a terminal's (ErrInvalid without one).
func (p *process) Resize(_ context.Context, size sandbox.WindowSize) error {
	if !p.tty {
		return fmt.Errorf("resize: the command has no terminal: %w", sandbox.ErrInvalid)
	}
	return size.Check()
}

// Wait answers how the command ended.
func (p *process) Wait() (sandbox.ExitStatus, error) {
	<-p.done
	return p.status, nil
}

// extract writes the regular files of the tar in stdin to the disk
// under dir, as GNU tar -C dir would; a tar it cannot read exits 2, as
// tar does.
func (m *machine) extract(dir string, stdin []byte) (stdout, stderr string, code int) {
	r := tar.NewReader(bytes.NewReader(stdin))
	for {
		h, err := r.Next()
		if err == io.EOF {
			return "", "", 0
		}
		if err != nil {
			return "", "tar: " + err.Error(), 2
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return "", "tar: " + err.Error(), 2
		}
		m.disk[path.Join(dir, h.Name)] = data
	}
}
