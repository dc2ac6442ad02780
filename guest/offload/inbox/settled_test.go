package inbox_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
)

// A status of a repo answers after a send of that repo still running,
// not before (the bug: a packer killed at send left the send's verb
// running in the box; the rerun's status saw no session yet, cleared its
// record and began again, and the box refused the begin: "the copy is
// busy", TestOffloadAndBack/KilledAtEachStep/send in CI). The send here
// holds its stream open until a status is blocked on the repo's lock
// (/proc/locks shows it waiting), then finishes; the status must show the
// session the send started.
func TestStatusWaitsForASendStillRunning(t *testing.T) {
	e := newEnv(t)
	host := e.hostRepo("proj")
	begin := e.mustVerb(nil, "begin", "--repo", "k1", "--name", "proj", "--kind", "claude", "--id", "off1")
	copyDir, _ := begin["dir"].(string)
	stream := offloadtest.MacStream(t, host, "off1", Handover("a test task"), begin, func(args []string) {
		if out, err := exec.Command("rsync", append(args, host+"/", copyDir+"/")...).CombinedOutput(); err != nil {
			t.Fatalf("rsync: %v: %s", err, out)
		}
	})

	pr, pw, err := os.Pipe()
	must(t, err)
	send := exec.Command(filepath.Join(e.bin, "cocoonbox-agent"), "offload", "send", "--repo", "k1", "--kind", "claude", "--id", "off1")
	send.Stdin = pr
	var sendOut bytes.Buffer
	send.Stdout, send.Stderr = &sendOut, &sendOut
	must(t, send.Start())
	pr.Close()
	defer func() { pw.Close(); send.Wait() }()
	if _, err := pw.Write(stream[:len(stream)/2]); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the send holding the repo's lock", func() (bool, string) {
		return lockState(t, send.Process.Pid, false), readLocks(t)
	})

	status := exec.Command(filepath.Join(e.bin, "cocoonbox-agent"), "offload", "status", "--repo", "k1")
	var statusOut bytes.Buffer
	status.Stdout, status.Stderr = &statusOut, &statusOut
	must(t, status.Start())
	done := make(chan error, 1)
	go func() { done <- status.Wait() }()
	e.waitFor("the status waiting on the repo's lock, or answering", func() (bool, string) {
		select {
		case err := <-done:
			done <- err
			return true, "answered"
		default:
		}
		return lockState(t, status.Process.Pid, true), readLocks(t)
	})

	if _, err := pw.Write(stream[len(stream)/2:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := send.Wait(); err != nil {
		t.Fatalf("send: %v: %s", err, sendOut.String())
	}
	if err := <-done; err != nil {
		t.Fatalf("status: %v: %s", err, statusOut.String())
	}
	var resp struct {
		Sessions []map[string]any `json:"sessions"`
	}
	if err := json.Unmarshal(statusOut.Bytes(), &resp); err != nil {
		t.Fatalf("status's answer %q: %v", statusOut.String(), err)
	}
	if len(resp.Sessions) != 1 || resp.Sessions[0]["offload_id"] != "off1" {
		t.Fatalf("status while a send ran answered %s, want the session of off1 the send started", statusOut.String())
	}
}

// lockState is whether pid holds an flock (waiting false) or waits for
// one (waiting true), from /proc/locks ("->" marks a waiter).
func lockState(t *testing.T, pid int, waiting bool) bool {
	for _, l := range strings.Split(readLocks(t), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		blocked := f[1] == "->"
		if blocked {
			f = append(f[:1], f[2:]...)
		}
		if f[1] == "FLOCK" && f[4] == fmt.Sprint(pid) && blocked == waiting {
			return true
		}
	}
	return false
}

func readLocks(t *testing.T) string {
	data, err := os.ReadFile("/proc/locks")
	must(t, err)
	return string(data)
}
