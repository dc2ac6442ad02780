// The process classes: the host's process ptraced, another box's files,
// processes and abstract socket, the supervisor's environment, memory and
// state directory; hold is the other box's listener.

package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

// process is one entry of /proc.
type process struct {
	pid     int
	cmdline string
}

// processes lists /proc's processes other than the probe's own.
func processes() []process {
	ents, _ := os.ReadDir("/proc")
	var out []process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		out = append(out, process{pid, strings.ReplaceAll(string(b), "\x00", " ")})
	}
	return out
}

// marked answers the visible processes whose command line holds marker.
func marked(marker string) []process {
	if marker == "" {
		return nil
	}
	var out []process
	for _, p := range processes() {
		if strings.Contains(p.cmdline, marker) {
			out = append(out, p)
		}
	}
	return out
}

// ptraceOutside seizes the host's marked process (seize does not stop
// it; the probe's exit detaches).
func ptraceOutside(c *escape.Config) (bool, string) {
	ps := marked(c.HostMarker)
	if len(ps) == 0 {
		return false, fmt.Sprintf("no process outside the box in sight (%d visible)", len(processes()))
	}
	for _, p := range ps {
		if err := unix.PtraceSeize(p.pid); err == nil {
			return true, fmt.Sprintf("seized the host's process %d", p.pid)
		}
	}
	return true, fmt.Sprintf("the host's process %d is in sight (ptrace refused)", ps[0].pid)
}

func otherDisk(c *escape.Config) (bool, string) {
	for _, t := range c.BoxFiles {
		if n, err := readAt(unix.AT_FDCWD, t); err == nil {
			return true, fmt.Sprintf("opened %s, read %d bytes", t, n)
		}
	}
	if c.BoxPath != "" {
		for _, p := range processes() {
			t := fmt.Sprintf("/proc/%d/root%s", p.pid, c.BoxPath)
			if n, err := readAt(unix.AT_FDCWD, t); err == nil {
				return true, fmt.Sprintf("opened %s, read %d bytes", t, n)
			}
		}
	}
	return false, fmt.Sprintf("none of %s, nor %s under any visible process's root", strings.Join(c.BoxFiles, ", "), c.BoxPath)
}

func otherProcesses(c *escape.Config) (bool, string) {
	ps := marked(c.BoxMarker)
	if len(ps) == 0 {
		return false, fmt.Sprintf("no process of the other box in sight (%d visible)", len(processes()))
	}
	err := unix.Kill(ps[0].pid, 0)
	return true, fmt.Sprintf("the other box's process %d is in sight (signal 0: %v)", ps[0].pid, err)
}

func otherSocket(c *escape.Config) (bool, string) {
	conn, err := net.DialTimeout("unix", "@"+c.Abstract, 2*time.Second)
	if err != nil {
		return false, fmt.Sprintf("connect @%s: %v", c.Abstract, err)
	}
	conn.Close()
	return true, fmt.Sprintf("connected to the other box's @%s", c.Abstract)
}

func supervisorEnviron(c *escape.Config) (bool, string) {
	ps := marked(c.SupervisorMarker)
	if len(ps) == 0 {
		return false, "the supervisor is not in sight"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", ps[0].pid))
	if err != nil {
		return true, fmt.Sprintf("the supervisor (%d) is in sight; environ: %v", ps[0].pid, err)
	}
	return true, fmt.Sprintf("read the supervisor's (%d) environment: %d bytes", ps[0].pid, len(b))
}

func supervisorMemory(c *escape.Config) (bool, string) {
	ps := marked(c.SupervisorMarker)
	if len(ps) == 0 {
		return false, "the supervisor is not in sight"
	}
	pid := ps[0].pid
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return true, fmt.Sprintf("the supervisor (%d) is in sight; maps: %v", pid, err)
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return true, fmt.Sprintf("the supervisor (%d) is in sight; mem: %v", pid, err)
	}
	defer mem.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "r") {
			continue
		}
		start, _, _ := strings.Cut(f[0], "-")
		addr, err := strconv.ParseUint(start, 16, 64)
		if err != nil {
			continue
		}
		if n, err := mem.ReadAt(make([]byte, 16), int64(addr)); err == nil {
			return true, fmt.Sprintf("read %d bytes of the supervisor's (%d) memory", n, pid)
		}
	}
	return true, fmt.Sprintf("the supervisor (%d) is in sight; no mapping read", pid)
}

func supervisorState(c *escape.Config) (bool, string) {
	if ents, err := os.ReadDir(c.StateDir); err == nil {
		return true, fmt.Sprintf("listed the state directory %s: %d entries", c.StateDir, len(ents))
	}
	for _, t := range c.HostFiles {
		if n, err := readAt(unix.AT_FDCWD, t); err == nil {
			return true, fmt.Sprintf("opened %s, read %d bytes", t, n)
		}
	}
	for _, p := range marked(c.SupervisorMarker) {
		if _, err := os.ReadDir(fmt.Sprintf("/proc/%d/cwd", p.pid)); err == nil {
			return true, fmt.Sprintf("listed the supervisor's (%d) working directory", p.pid)
		}
	}
	return false, fmt.Sprintf("neither %s nor a host canary by its path", c.StateDir)
}

// hold listens on the abstract socket and waits, its marker in its
// command line; it writes /run/cocoonbox-probe-hold.ready once it
// listens.
func hold(marker, abstract string) {
	ln, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.WriteFile("/run/cocoonbox-probe-hold.ready", []byte(marker+"\n"), 0o644)
	for {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
	}
}
