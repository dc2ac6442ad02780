// Package journal is how every cocoonbox helper logs: one structured entry
// per event, sent to journald with a MESSAGE_ID per kind of event and fields
// naming the box and the file concerned, so an admin reads a wake's story
// with `journalctl -m -t <helper>` and can filter by MESSAGE_ID=.
//
// Outside a box (no journald socket, as in unit tests) the entries go to
// stderr as one line each, "PRIORITY: message key=value ...". Run by hand
// in a terminal, a helper's warnings and errors go to the journal and to
// the terminal too (the command-line convention of package cli).
package journal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/coreos/go-systemd/v22/journal"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/identity"
)

// Priority is a syslog priority (journal.PriErr, PriWarning, PriInfo, ...).
type Priority = journal.Priority

// The priorities the helpers use.
const (
	Err     = journal.PriErr
	Warning = journal.PriWarning
	Notice  = journal.PriNotice
	Info    = journal.PriInfo
)

// Logger sends entries tagged with one SYSLOG_IDENTIFIER (the helper's
// name) and fields common to all its entries.
type Logger struct {
	// Identifier is the SYSLOG_IDENTIFIER, e.g. "cocoonbox-hostname".
	Identifier string
	// Fields go with every entry (e.g. COCOONBOX_BOX_ID once it is known).
	Fields map[string]string
	// Stderr receives the entries when journald is not there; nil is os.Stderr.
	Stderr io.Writer
	// Echo, when not nil, also receives every entry of priority Warning or
	// more severe that reached the journal, as the same one line. New
	// sets it to os.Stderr when that is a terminal: an admin running a
	// helper by hand sees its refusals.
	Echo io.Writer

	mu sync.Mutex
}

// New returns a Logger for the named helper; an empty name takes the
// program's own.
func New(identifier string) *Logger {
	if identifier == "" {
		identifier = filepath.Base(os.Args[0])
	}
	l := &Logger{Identifier: identifier, Fields: map[string]string{}}
	if isTerminal(os.Stderr) {
		l.Echo = os.Stderr
	}
	return l
}

// isTerminal reports whether f is a terminal (a TCGETS ioctl succeeds).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Set adds a field sent with every later entry. Field names are journal
// field names: upper case letters, digits and '_'.
func (l *Logger) Set(field, value string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Fields[field] = value
}

// Unset removes a field Set added.
func (l *Logger) Unset(field string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.Fields, field)
}

// TagBox sets COCOONBOX_BOX_ID and COCOONBOX_WAKE_ID to the box identity as
// it is now (identity.Load), or removes them while there is none or it is
// refused (Contract: Journal; a wake's story reads by box id). A helper
// calls it at the start of each run, so a long-running one names the box
// of that run: not the box of its start, before the api wrote the
// identity, or before a clone.
func (l *Logger) TagBox() {
	id, err := identity.Load()
	if err != nil {
		l.Unset("COCOONBOX_BOX_ID")
		l.Unset("COCOONBOX_WAKE_ID")
		return
	}
	l.Set("COCOONBOX_BOX_ID", id.BoxID)
	l.Set("COCOONBOX_WAKE_ID", id.WakeID)
}

// Send logs one event. messageID is a 128-bit id in 32 lower-case hex digits
// (MESSAGE_ID, made once per kind of event with `systemd-id128 new`);
// fields are pairs of name and value. An odd trailing name is dropped.
// Errors of the journal itself are not returned: logging never stops a
// helper; the entry goes to stderr instead.
func (l *Logger) Send(pri Priority, messageID, message string, fields ...string) {
	l.mu.Lock()
	vars := make(map[string]string, len(l.Fields)+len(fields)/2+2)
	for k, v := range l.Fields {
		vars[k] = v
	}
	l.mu.Unlock()
	vars["SYSLOG_IDENTIFIER"] = l.Identifier
	if messageID != "" {
		vars["MESSAGE_ID"] = messageID
	}
	for i := 0; i+1 < len(fields); i += 2 {
		vars[fields[i]] = fields[i+1]
	}
	if journaldHere() {
		if err := journal.Send(message, pri, vars); err == nil {
			if l.Echo != nil && pri <= Warning {
				l.write(l.Echo, pri, message, vars)
			}
			return
		}
	}
	w := l.Stderr
	if w == nil {
		w = os.Stderr
	}
	l.write(w, pri, message, vars)
}

// journaldHere says whether journald takes entries; a variable so the
// fallback's test runs on a host where journald does too.
var journaldHere = journal.Enabled

// write puts one entry on w as one line.
func (l *Logger) write(w io.Writer, pri Priority, message string, vars map[string]string) {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		if k != "SYSLOG_IDENTIFIER" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", priorityNames[pri], message)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%q", k, vars[k])
	}
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(w, b.String())
}

var priorityNames = map[Priority]string{
	journal.PriEmerg: "emerg", journal.PriAlert: "alert", journal.PriCrit: "crit",
	journal.PriErr: "error", journal.PriWarning: "warning", journal.PriNotice: "notice",
	journal.PriInfo: "info", journal.PriDebug: "debug",
}
