package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/guest/offload/inbox"
)

// watchVerb is `cocoonbox-agent offload watch`, the api's feed for
// Session.Events (Contract: Offload, the inbox's watch op and "Event."):
// first a line per session with its current status (entry and seq unset,
// as a status change's), then the inbox's watch lines as they come,
// {"repo","name","cli","offload_id","entry","seq","status"}, never a
// body. The watch is opened before the status is asked, so a change in
// between is printed (perhaps twice), never lost. It ends when the inbox
// goes: the usual error line, code inbox, exit 4.
func watchVerb(paths offload.Paths, args []string) (map[string]any, error) {
	f := newFlags("watch", "")
	if help, err := f.parse(args, 0); help || err != nil {
		return nil, err
	}
	conn, err := net.DialTimeout("unix", paths.Socket, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w (%s: %v)", offload.ErrInboxDown, paths.Socket, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(`{"op":"watch"}` + "\n")); err != nil {
		return nil, fmt.Errorf("%w (write to %s: %v)", offload.ErrInboxDown, paths.Socket, err)
	}
	resp, err := callInbox(paths)(&offload.Request{Op: "status"}, 30*time.Second)
	if err != nil {
		return nil, err
	}
	out := bufio.NewWriter(os.Stdout)
	for _, s := range anyList(resp["sessions"]) {
		m, _ := s.(map[string]any)
		str := func(k string) string { v, _ := m[k].(string); return v }
		printLine(out, inbox.WatchEvent{Repo: str("repo"), Name: str("name"), CLI: str("cli"), OffloadID: str("offload_id"), Status: str("status")})
	}
	if out.Flush() != nil {
		return nil, nil // the reader went
	}
	rd := bufio.NewReaderSize(conn, 64<<10)
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%w (the watch on %s ended: %v)", offload.ErrInboxDown, paths.Socket, err)
		}
		// Re-encoded through WatchEvent, so only its fields pass.
		var ev inbox.WatchEvent
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		printLine(out, ev)
		if out.Flush() != nil {
			return nil, nil
		}
	}
}

func printLine(w *bufio.Writer, ev inbox.WatchEvent) {
	data, _ := json.Marshal(ev)
	w.Write(append(data, '\n'))
}
