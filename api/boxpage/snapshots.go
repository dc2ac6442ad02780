package boxpage

import (
	"errors"
	"net/http"
	"path"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// The Boxes page's snapshots of a box (issue 42, Deliver 4, "the console
// lists a box's snapshots"; docs/state.md, "The user's view"): the same
// Boxes service calls as cocoonbox box snapshots, box ls and box restore
// (Snapshots, BrowseSnapshot, RestorePaths), for the session's user, the
// box's owner:
//
//	GET  /cb/api/boxes/{box}/snapshots                         200 {snapshots: [{name, created_ms, files, bytes}]}, oldest first
//	GET  /cb/api/boxes/{box}/snapshots/{snapshot}?path=P       200 {snapshot, path, entries: [{path, name, type, size, modified_ms, target}]}
//	POST /cb/api/boxes/{box}/snapshots/{snapshot}/restore      {path, to, confirm}; 200 {snapshot, entries, bytes}
//
// P is a directory of the snapshot under /home/user or /workspace
// (/home/user when empty); entries are what is directly under it. A
// restore writes path, with all under it, into the running box: in place,
// or under to (a directory under /home/user or /workspace, each path's
// whole path kept, as box restore --to). In place it overwrites the box's
// files, so it needs confirm true. Refusals are {error, message} (with
// field "path" or "to" for the restore form's fields): 400 invalid or
// confirm, 404 not_found (no such box, snapshot or path), 409 state (the
// box is not running), 503 unavailable (no state store, or the box's host
// out of reach), 401 without a session.

// snapshotsMounted puts the calls on mux.
func (c *Console) snapshotsMounted(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/boxes/{box}/snapshots", c.session.Calls(c.snapshots))
	mux.Handle("GET /cb/api/boxes/{box}/snapshots/{snapshot}", c.session.Calls(c.browse))
	mux.Handle("POST /cb/api/boxes/{box}/snapshots/{snapshot}/restore", c.session.Calls(c.restore))
}

type snapshotJSON struct {
	Name      string `json:"name"`
	CreatedMs int64  `json:"created_ms"`
	Files     int64  `json:"files"`
	Bytes     int64  `json:"bytes"`
}

func (c *Console) snapshots(w http.ResponseWriter, r *http.Request, userID string) {
	name := r.PathValue("box")
	svc, ok := c.service(w)
	if !ok {
		return
	}
	list, err := svc.Snapshots(r.Context(), userID, name)
	if err != nil {
		c.snapshotRefused(w, r, name, "The snapshots of "+name+" could not be read", err)
		return
	}
	out := []snapshotJSON{}
	for _, s := range list {
		out = append(out, snapshotJSON{s.Name, s.Created.UnixMilli(), s.Files, s.Bytes})
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"snapshots": out})
}

type entryJSON struct {
	Path       string `json:"path"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	ModifiedMs int64  `json:"modified_ms"`
	Target     string `json:"target,omitempty"`
}

func (c *Console) browse(w http.ResponseWriter, r *http.Request, userID string) {
	name, snap, p := r.PathValue("box"), r.PathValue("snapshot"), r.URL.Query().Get("path")
	svc, ok := c.service(w)
	if !ok {
		return
	}
	got, entries, err := svc.BrowseSnapshot(r.Context(), userID, name, snap, p)
	if err != nil {
		c.snapshotRefused(w, r, name, "The snapshot could not be read", err)
		return
	}
	out := []entryJSON{}
	for _, e := range entries[1:] { // [0] is p itself
		target := e.Target
		if e.Link != "" { // a hard link: the path it shares
			target = "/" + e.Link
		}
		out = append(out, entryJSON{Path: "/" + e.Path, Name: path.Base(e.Path), Type: e.Type, Size: e.Size,
			ModifiedMs: e.MtimeNS / 1e6, Target: target})
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"snapshot": got, "path": "/" + entries[0].Path, "type": entries[0].Type, "entries": out})
}

func (c *Console) restore(w http.ResponseWriter, r *http.Request, userID string) {
	name, snap := r.PathValue("box"), r.PathValue("snapshot")
	var req struct {
		Path    string `json:"path"`
		To      string `json:"to"`
		Confirm bool   `json:"confirm"`
	}
	if !console.ReadCall(w, r, 8<<10, &req) {
		return
	}
	if req.Path == "" {
		server.WriteJSON(w, http.StatusBadRequest, fieldRefusal{"invalid", "path", "Path: name the file or directory to restore."})
		return
	}
	if req.To == "" && !req.Confirm {
		refuse(w, http.StatusBadRequest, "confirm", "Confirm first: a restore in place replaces what "+name+" holds at "+req.Path+" now.")
		return
	}
	svc, ok := c.service(w)
	if !ok {
		return
	}
	got, stats, err := svc.RestorePaths(r.Context(), userID, name, snap, []string{req.Path}, req.To)
	if err != nil {
		c.snapshotRefused(w, r, name, "The restore into "+name+" did not work", err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"snapshot": got, "entries": stats.Entries, "bytes": stats.Bytes})
}

// service answers the Boxes service, or refuses the call and answers false.
func (c *Console) service(w http.ResponseWriter) (*boxes.Service, bool) {
	svc, err := c.boxes()
	if err != nil {
		refuse(w, http.StatusServiceUnavailable, "unavailable", "Boxes are not available on this api now. Try again later.")
		return nil, false
	}
	return svc, true
}

// snapshotRefused answers a snapshot call's error as a sentence a person
// reads; failed says what did not work, for an error of the api's own.
func (c *Console) snapshotRefused(w http.ResponseWriter, r *http.Request, name, failed string, err error) {
	var bad *sandbox.InvalidError
	switch {
	case errors.As(err, &bad):
		field, label := "path", "Path"
		switch {
		case bad.Field == "to":
			field, label = "to", "Restore under"
		case bad.Field == "snapshot":
			refuse(w, http.StatusNotFound, "not_found", "There is no such snapshot of "+name+". Reload the page.")
			return
		case bad.Field == "name":
			refuse(w, http.StatusNotFound, "not_found", "You have no box called "+name+". Reload the page.")
			return
		}
		server.WriteJSON(w, http.StatusBadRequest, fieldRefusal{"invalid", field, label + ": " + strings.TrimSuffix(bad.Rule, ".") + "."})
	case errors.Is(err, boxes.ErrInvalid):
		refuse(w, http.StatusBadRequest, "invalid", "The request breaks a rule of the Boxes service. Reload the page.")
	case errors.Is(err, boxes.ErrNotFound):
		// The service's words name the snapshot or path it lacks; its
		// hint is the CLI's, which the page has no use for.
		msg, _, _ := strings.Cut(strings.TrimSuffix(err.Error(), ": "+boxes.ErrNotFound.Error()), " (")
		if strings.Contains(msg, " has no ") { // "box main has no snapshot", "snapshot … of main has no /home/user/x"
			msg = strings.ToUpper(msg[:1]) + msg[1:]
		} else {
			msg = "You have no box called " + name
		}
		refuse(w, http.StatusNotFound, "not_found", msg+".")
	case errors.Is(err, boxes.ErrNotRunning):
		refuse(w, http.StatusConflict, "state", "The box "+name+" is not running, and a restore writes into the running box. Wake it first.")
	case errors.Is(err, boxes.ErrUnavailable):
		refuse(w, http.StatusServiceUnavailable, "unavailable", "The snapshots of "+name+" cannot be reached now: this api keeps none, or the machine holding the box is out of reach. Try again later.")
	default:
		c.log.ErrorContext(r.Context(), "console snapshot call failed", "box", name, "err", err)
		refuse(w, http.StatusInternalServerError, "internal", failed+". Try again.")
	}
}
