package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/packer"
)

// Contract: Offload, Watching: "Before Hibernate or Rebase of a running
// box, the app and the CLI call offload status; a working session gets a
// warning to confirm (hibernate pauses it; an upgrade restarts it from its
// last hand-over)."

// watchEffect is what the subcommand does to a working session.
var watchEffect = map[string]string{
	"hibernate": "hibernate pauses it until the box wakes",
	"upgrade":   "upgrade restarts it from its last hand-over, the turn in progress lost",
}

// workingJSON is the --json line of a refusal: the box and its working
// sessions, as offload status gives them.
type workingJSON struct {
	BoxID   string           `json:"box_id"`
	Name    string           `json:"name"`
	Working []map[string]any `json:"working"`
	Error   string           `json:"error"`
}

// watch runs `cocoonbox-agent offload status` in the box (Session.Exec,
// as its owner, the way the packer does) before a hibernate or upgrade of
// a running box, and refuses (exit 2, nothing changed) when a session is
// working. A box not running, an image without the verb (older than
// cbdesk:v22) or no working session: nil. A status that cannot be read is
// said on stderr and does not stop the command.
func (m mutation) watch(ctx context.Context, st *state, client controlv1connect.BoxesClient, stdout io.Writer, asJSON bool) error {
	what := describe("box "+m.sub, m.name)
	resp, err := client.Status(ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: m.name}))
	if err != nil {
		return nil // the call itself says what is wrong with the box
	}
	b := resp.Msg.Box
	if b == nil || b.State != controlv1.BoxState_BOX_STATE_RUNNING {
		return nil
	}
	p, err := st.packer(packer.Dirs{}, packer.BoxInfo{ID: b.BoxId, Name: b.Name, Image: b.Image}, asJSON)
	if err != nil {
		return err
	}
	// The box's stderr stays there: an older image's shell saying it has
	// no cocoonbox-agent is no news to the person.
	p.Progress = packer.Progress{}
	sessions, err := p.Sessions(ctx)
	switch {
	case errors.Is(err, packer.ErrNoOffload):
		return nil
	case err != nil:
		fmt.Fprintf(os.Stderr, "cocoonbox: %s: could not read the box's offload status (%v); going on\n", what, err)
		return nil
	}
	var working []map[string]any
	var names []string
	for _, s := range sessions {
		if s["status"] == offload.StatusWorking {
			working = append(working, s)
			names = append(names, fmt.Sprintf("%v %v of repo %v (tmux %v)", s["cli"], s["offload_id"], s["repo"], s["tmux"]))
		}
	}
	if len(working) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: the offload session %s is working: %s; --yes to go on", what, strings.Join(names, ", "), watchEffect[m.sub])
	if asJSON {
		line, _ := json.Marshal(workingJSON{BoxID: b.BoxId, Name: b.Name, Working: working, Error: msg})
		fmt.Fprintf(stdout, "%s\n", line)
		return jsonPrinted{exitError{code: 2, msg: msg}}
	}
	return exitError{code: 2, msg: msg}
}
