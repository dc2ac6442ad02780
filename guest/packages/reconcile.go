package packages

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// MESSAGE_IDs of the journal entries, one per kind of event (filter with
// journalctl MESSAGE_ID=...).
const (
	MsgRefused     = "6e1f7ec9b07c4988882e0763bccb108f" // a list line refused
	MsgNothing     = "d53b6796231f47af839c38fbc4119bbb" // nothing missing: no apt run
	MsgInstalled   = "1811472c5c544ec7a44ae7a4a5b59229" // a listed package installed
	MsgFailed      = "f25efdc4fc114dfbb1de9d18211b184c" // a listed package failed to install
	MsgLockBusy    = "86e97a8a80c24c4c88c3ad507154353e" // the dpkg lock stayed held: exit 75
	MsgAptRun      = "0ef9646624464d43a8bb3320f4564365" // an apt-get run that succeeded
	MsgAptFailed   = "8d282485d8df4e189773a20e7ec9754e" // an apt-get run that failed, with apt's last line
	MsgNotBooted   = "2a2e761c0a684f989b0b1e793c850eac" // record skipped: not a booted system (an image build)
	MsgReplaced    = "7f54047a7ba84fbcaa733c29fa88c4cb" // the list recorded over something that stood at its name
	MsgDeferred    = "4657ca30e59541ad95e6a86b6db71d36" // reconcile ends with 75: the unit tries again
	MsgGaveUp      = "9165bbed205e48beb15041ca28f82741" // reconcile ends failed (1): no retry
	MsgRecorded    = "53fef959a1aa438bbdea335feba94de4" // the list rewritten after an apt run
	MsgRecordError = "51c7efe345fc4b4da13dcbd09e74d09f" // the list could not be recorded
	MsgListError   = "bcbf19a70d2442f38d1fc079904f55ec" // the list could not be read
	MsgMissing     = "5f93ab00cef94cf9804a140e17a2f122" // what is missing, before installing
)

// NoRecordEnv, set in apt's environment, makes the recording hook skip its
// run: the reconciler sets it, since what it installs is already listed and
// a rewrite would drop the lines that failed (so a transient failure would
// lose the user's package for good).
const NoRecordEnv = "COCOONBOX_PACKAGES_NO_RECORD"

// ErrPackageFailed reports that at least one listed package could not be
// installed; a retry will not fix it (exit 1).
var ErrPackageFailed = errors.New("a listed package failed to install")

// ErrTryLater reports a failure a later run may not have (exit 75): the
// dpkg lock held (ErrLockBusy wraps it too) or apt-get update failing.
var ErrTryLater = errors.New("try again later")

// Reconciler installs the listed packages this machine lacks.
type Reconciler struct {
	// Log receives one entry per event (nil: journal.New("cocoonbox-packages")).
	Log *journal.Logger
	// LockTimeout is how long a held dpkg or apt lock is waited for before
	// ErrLockBusy (0: 120 s, the contract's default).
	LockTimeout time.Duration
	// LockPoll is how often the locks are tested while held (0: 1 s).
	LockPoll time.Duration
	// LockFiles are the locks tested (nil: LockFiles).
	LockFiles []string
	// Output receives apt-get's output as it runs (nil: discarded).
	Output io.Writer
	// Started counts the processes each run started, by program name; the
	// no-op benchmark reads it to show exactly one dpkg-query.
	Started map[string]int
}

// Result is what one run found and did.
type Result struct {
	// Missing are the listed packages that were not installed.
	Missing []string
	// Installed and Failed split Missing by outcome.
	Installed, Failed []string
	// Updated says whether apt-get update ran.
	Updated bool
}

func (r *Reconciler) log() *journal.Logger {
	if r.Log == nil {
		r.Log = journal.New("cocoonbox-packages")
	}
	return r.Log
}

// Reconcile installs the names (validated by Parse) this machine lacks:
// one dpkg-query call finds them; only when some are missing, apt-get
// update runs, then one non-interactive apt-get install of all of them,
// and after a failed bulk install one install per package. Each package's
// outcome goes to the journal. It returns ErrLockBusy (and so ErrTryLater)
// when a lock stays held past LockTimeout, ErrTryLater when apt-get update
// fails, and ErrPackageFailed when a package could not be installed.
func (r *Reconciler) Reconcile(ctx context.Context, names []string) (Result, error) {
	var res Result
	if len(names) == 0 {
		r.log().Send(journal.Info, MsgNothing, "no packages listed: nothing to install", "COCOONBOX_LISTED", "0")
		return res, nil
	}
	missing, err := r.Missing(ctx, names)
	if err != nil {
		return res, err
	}
	res.Missing = missing
	if len(missing) == 0 {
		r.log().Send(journal.Info, MsgNothing, fmt.Sprintf("all %d listed packages are installed: nothing to do", len(names)),
			"COCOONBOX_LISTED", fmt.Sprint(len(names)))
		return res, nil
	}
	r.log().Send(journal.Notice, MsgMissing, fmt.Sprintf("%d of %d listed packages are missing: %s", len(missing), len(names), strings.Join(missing, " ")),
		"COCOONBOX_LISTED", fmt.Sprint(len(names)), "COCOONBOX_MISSING", strings.Join(missing, " "))

	if err := r.waitForLocks(ctx); err != nil {
		return res, err
	}
	if _, err := r.apt(ctx, "update"); err != nil {
		return res, err
	}
	res.Updated = true

	bulkErr := error(nil)
	if _, bulkErr = r.apt(ctx, append([]string{"install"}, missing...)...); errors.Is(bulkErr, ErrLockBusy) {
		return res, bulkErr
	}
	if bulkErr == nil {
		// apt-get succeeded; dpkg-query says what is there now (a name
		// apt resolved to another package, e.g. a virtual one, is not).
		still, err := r.Missing(ctx, missing)
		if err != nil {
			return res, err
		}
		for _, name := range missing {
			if contains(still, name) {
				r.failed(&res, name, "apt-get install succeeded but dpkg does not list it as installed (a virtual package?)")
			} else {
				r.installed(&res, name, "bulk")
			}
		}
	} else {
		for _, name := range missing {
			out, err := r.apt(ctx, "install", name)
			switch {
			case errors.Is(err, ErrLockBusy):
				return res, err
			case err != nil:
				r.failed(&res, name, lastLine(out))
			default:
				r.installed(&res, name, "one by one, after the bulk install failed")
			}
		}
	}
	if len(res.Failed) > 0 {
		return res, fmt.Errorf("%w: %s", ErrPackageFailed, strings.Join(res.Failed, " "))
	}
	return res, nil
}

func (r *Reconciler) installed(res *Result, name, how string) {
	res.Installed = append(res.Installed, name)
	r.log().Send(journal.Notice, MsgInstalled, fmt.Sprintf("installed listed package %s (%s)", name, how), "COCOONBOX_PACKAGE", name)
}

func (r *Reconciler) failed(res *Result, name, why string) {
	res.Failed = append(res.Failed, name)
	r.log().Send(journal.Err, MsgFailed, fmt.Sprintf("listed package %s failed to install: %s", name, why), "COCOONBOX_PACKAGE", name)
}

func (r *Reconciler) lockTimeout() time.Duration {
	if r.LockTimeout <= 0 {
		return 120 * time.Second
	}
	return r.LockTimeout
}

func (r *Reconciler) waitForLocks(ctx context.Context) error {
	files, poll := r.LockFiles, r.LockPoll
	if files == nil {
		files = LockFiles
	}
	if poll <= 0 {
		poll = time.Second
	}
	err := WaitForLocks(ctx, files, r.lockTimeout(), poll)
	if errors.Is(err, ErrLockBusy) {
		r.log().Send(journal.Warning, MsgLockBusy, err.Error()+": try again later")
		return fmt.Errorf("%w (%w)", err, ErrTryLater)
	}
	return err
}

// Missing returns the names that are not installed, in the order given,
// from a single dpkg-query call. A bare name is installed when the package
// of the native architecture (or "all") is; "name:arch" when the package of
// that architecture is ("all" counting as native, as apt counts it;
// "name:any" takes any architecture). The native architecture is dpkg's own, so "dpkg" is
// asked for in the same call.
func (r *Reconciler) Missing(ctx context.Context, names []string) ([]string, error) {
	args := append([]string{"-W", "-f", "${Package}\t${Architecture}\t${db:Status-Abbrev}\n", "--", "dpkg"}, names...)
	cmd := exec.CommandContext(ctx, "dpkg-query", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	r.count("dpkg-query")
	out, err := cmd.Output()
	// Exit 1 only says some name matched no package: those are missing.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return nil, fmt.Errorf("dpkg-query: %w: %s", err, lastLine(stderr.String()))
	}
	present := map[string][]string{} // package → installed architectures
	native := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 || len(f[2]) < 2 {
			continue
		}
		// db:Status-Abbrev: want, status, error; status i, W and t are
		// installed (the last two waiting for triggers).
		if !strings.ContainsRune("iWt", rune(f[2][1])) {
			continue
		}
		if f[0] == "dpkg" {
			native = f[1]
		}
		present[f[0]] = append(present[f[0]], f[1])
	}
	var missing []string
	for _, n := range names {
		name, arch, qualified := strings.Cut(n, ":")
		ok := false
		for _, a := range present[name] {
			switch {
			case !qualified || arch == "native":
				ok = ok || a == native || a == "all"
			default:
				// apt takes an "all" package as the native one's.
				ok = ok || a == arch || arch == "any" || (a == "all" && arch == native)
			}
		}
		if !ok {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

func (r *Reconciler) count(prog string) {
	if r.Started == nil {
		r.Started = map[string]int{}
	}
	r.Started[prog]++
}

// apt runs one non-interactive apt-get command and logs it. Its output goes
// to Output and is returned (the last 4 KiB). A lock apt could not get is
// ErrLockBusy; a failed update is ErrTryLater.
func (r *Reconciler) apt(ctx context.Context, args ...string) (string, error) {
	secs := int(math.Ceil(r.lockTimeout().Seconds()))
	full := []string{"-q", "-y",
		// apt waits this long for a lock taken after WaitForLocks looked.
		"-o", fmt.Sprintf("DPkg::Lock::Timeout=%d", secs),
		// Keep changed config files and never ask (no terminal here).
		"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
	}
	if args[0] == "install" {
		// Never remove a package to make room for a listed one.
		full = append(full, "--no-remove", "install", "--")
		full = append(full, args[1:]...)
	} else {
		full = append(full, args...)
	}
	cmd := exec.CommandContext(ctx, "apt-get", full...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "APT_LISTCHANGES_FRONTEND=none", NoRecordEnv+"=1")
	tail := &tailBuffer{max: 4096}
	w := io.Writer(tail)
	if r.Output != nil {
		w = io.MultiWriter(r.Output, tail)
	}
	cmd.Stdout, cmd.Stderr = w, w
	r.count("apt-get")
	start := time.Now()
	err := cmd.Run()
	out := tail.String()
	took := time.Since(start).Round(time.Millisecond).String()
	line := "apt-get " + strings.Join(full, " ")
	if err == nil {
		r.log().Send(journal.Info, MsgAptRun, fmt.Sprintf("%s: done in %s", line, took), "COCOONBOX_COMMAND", line)
		return out, nil
	}
	r.log().Send(journal.Warning, MsgAptFailed, fmt.Sprintf("%s: %v after %s: %s", line, err, took, lastLine(out)), "COCOONBOX_COMMAND", line)
	switch {
	case ctx.Err() != nil:
		return out, ctx.Err()
	case strings.Contains(out, "Could not get lock"):
		e := fmt.Errorf("%w: apt-get %s: %s (%w)", ErrLockBusy, args[0], lastLine(out), ErrTryLater)
		r.log().Send(journal.Warning, MsgLockBusy, e.Error())
		return out, e
	case args[0] == "update":
		return out, fmt.Errorf("%w: apt-get update failed: %s", ErrTryLater, lastLine(out))
	}
	return out, fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// lastLine is the last non-empty line of s, for a one-line message.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }
