package toolrequest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// responsesDir is the root-owned 0755 directory the consumer reads answers in.
const responsesDir = "responses"

// respond creates responses/<id>.json of the spool at dir atomically and
// idempotently (Contract: request-spool leases, "The trusted dispatcher
// atomically creates a correlated <request_id>.json owned by consumer_uid
// at mode 0400, so the consumer can read but cannot replace it"): a temp
// file in responses/, fchown and fchmod on its descriptor, fsync, then
// renameat2 RENAME_NOREPLACE and a directory fsync. A file already there
// with the sameResponse bytes is success (a re-run after a crash); any other is a
// terminal refusal (rule response-correlation).
func respond(dir, id string, response []byte, consumerUID uint32) error {
	name := id + ".json"
	where := dir + "/" + responsesDir + "/" + name
	sfd, err := rundir.OpenPath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("spool %s: %w", dir, err)
	}
	defer unix.Close(sfd)
	rfd, err := rundir.OpenBeneath(sfd, responsesDir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("spool %s: %s: %w", dir, responsesDir, err)
	}
	defer unix.Close(rfd)
	err = durable.WriteAt(rfd, name, durable.File{Data: response, Mode: 0o400, Chown: true, UID: int(consumerUID), GID: -1,
		Temp: fmt.Sprintf(".%s.%d.tmp", name, os.Getpid()), NoReplace: true})
	switch {
	case errors.Is(err, durable.ErrNotSynced):
		return err
	case errors.Is(err, unix.EEXIST):
		return sameResponse(rfd, name, where, response)
	case err != nil:
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// sameResponse accepts an existing response only when it holds exactly response.
func sameResponse(rfd int, name, where string, response []byte) error {
	fd, err := rundir.OpenBeneath(rfd, name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return branchbox.Refuse(branchbox.RuleResponseCorrelation, where, "exists and cannot be opened as a regular file: %v", err)
	}
	f := os.NewFile(uintptr(fd), where)
	defer f.Close()
	got, err := io.ReadAll(io.LimitReader(f, MaxRequest+1))
	if err != nil || !bytes.Equal(got, response) {
		return branchbox.Refuse(branchbox.RuleResponseCorrelation, where, "already holds another response")
	}
	return nil
}
