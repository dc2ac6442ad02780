package rundir

import (
	"fmt"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// valueReason says why data may not be a provider-environment value, or ""
// (Contract: Security contract, "Value files are bounded, UTF-8, and
// control-free"): at most maxValueSize bytes, valid UTF-8, no C0 or C1
// control character and no DEL. A trailing newline is a control character
// too: the value is exactly the file's bytes.
func valueReason(data []byte) string {
	if len(data) > maxValueSize {
		return fmt.Sprintf("is %d bytes; a value is at most %d", len(data), maxValueSize)
	}
	if !utf8.Valid(data) {
		return "is not valid UTF-8"
	}
	for i, r := range string(data) {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f {
			return fmt.Sprintf("has the control character %U at byte %d (a NUL, a newline?); values are control-free", r, i)
		}
	}
	return ""
}

// Value reads the provider-environment value of the lease leaseID for
// variable name again, immediately before it is used (Contract: Security
// contract: "reads them immediately before provider execution, recomputes
// the digest from the bytes it will use"): the run directory is opened
// anew, and every check of Load is made on the new descriptors; the digest
// is computed over the returned bytes.
func (r *Run) Value(lease *branchbox.Lease, m branchbox.Materialization) ([]byte, error) {
	dfd, err := OpenPath(r.Dir, openDirFlags)
	if err != nil {
		return nil, placeError(branchbox.RuleRunDirectory, r.Dir, err)
	}
	defer unix.Close(dfd)
	if err := r.checkRunDir(dfd); err != nil {
		return nil, err
	}
	data, _, err := r.readFile(dfd, m.SourcePath[len(r.Dir)+1:], m.SourcePath, m.SHA256)
	if err != nil {
		return nil, err
	}
	if reason := valueReason(data); reason != "" {
		return nil, branchbox.Refuse(branchbox.RuleValueFile, m.SourcePath, "%s", reason)
	}
	return data, nil
}
