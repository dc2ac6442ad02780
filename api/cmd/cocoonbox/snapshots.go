package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// The user's view of a box's snapshots (issue 42, Deliver 4; docs/state.md,
// "The user's view"): box snapshots, box ls and box restore.

// splitSnapshot splits NAME[@SNAPSHOT], checking NAME's grammar.
func splitSnapshot(sub, arg string) (name, snap string, err error) {
	name, snap, _ = strings.Cut(arg, "@")
	if name == "" {
		return "", "", command.UsageError{Msg: fmt.Sprintf("box %s needs the box's NAME", sub)}
	}
	return name, snap, checkBoxArgs(sub, name, "")
}

type snapshotJSON struct {
	Name      string `json:"name"`
	CreatedMs int64  `json:"created_ms"`
	Files     int64  `json:"files"`
	Bytes     int64  `json:"bytes"`
}

// boxSnapshots is `cocoonbox box snapshots NAME [--json]`.
func boxSnapshots(fs *command.Flags) runner {
	return reading(fs, func(ctx context.Context, pos []string, asJSON bool, st *state, client controlv1connect.BoxesClient, stdout io.Writer) error {
		name, _, err := splitSnapshot("snapshots", optional(pos))
		if err != nil {
			return err
		}
		resp, err := client.Snapshots(ctx, connect.NewRequest(&controlv1.BoxSnapshotsRequest{Box: name}))
		if err != nil {
			return st.explainBox(describe("box snapshots", name), err)
		}
		out := []snapshotJSON{}
		for _, s := range resp.Msg.Snapshots {
			out = append(out, snapshotJSON{Name: s.Name, CreatedMs: s.Created.AsTime().UnixMilli(), Files: s.Files, Bytes: s.Bytes})
		}
		if asJSON {
			return printJSON(stdout, map[string]any{"snapshots": out})
		}
		if len(out) == 0 {
			fmt.Fprintf(stdout, "No snapshot of %s yet: cocoonbox box save %s makes one.\n", name, name)
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SNAPSHOT\tCREATED\tFILES\tBYTES")
		for _, s := range resp.Msg.Snapshots {
			fmt.Fprintf(tw, "%s@%s\t%s\t%d\t%d\n", name, s.Name, s.Created.AsTime().Local().Format(time.DateTime), s.Files, s.Bytes)
		}
		return tw.Flush()
	})
}

type entryJSON struct {
	Path       string `json:"path"`
	Type       string `json:"type"`
	Mode       string `json:"mode"`
	UID        uint32 `json:"uid"`
	GID        uint32 `json:"gid"`
	Size       int64  `json:"size"`
	ModifiedMs int64  `json:"modified_ms"`
	Target     string `json:"target,omitempty"`
}

// boxLs is `cocoonbox box ls NAME[@SNAPSHOT] [PATH] [--json]`.
func boxLs(fs *command.Flags) runner {
	return reading(fs, func(ctx context.Context, pos []string, asJSON bool, st *state, client controlv1connect.BoxesClient, stdout io.Writer) error {
		name, snap, err := splitSnapshot("ls", optional(pos))
		if err != nil {
			return err
		}
		path := ""
		if len(pos) > 1 {
			path = pos[1]
		}
		resp, err := client.BrowseSnapshot(ctx, connect.NewRequest(&controlv1.BrowseSnapshotRequest{Box: name, Snapshot: snap, Path: path}))
		if err != nil {
			return st.explainBox(describe("box ls", name), err)
		}
		out := []entryJSON{}
		for _, e := range resp.Msg.Entries {
			out = append(out, entryJSON{Path: e.Path, Type: e.Type, Mode: fmt.Sprintf("%04o", e.Mode), UID: e.Uid, GID: e.Gid,
				Size: e.Size, ModifiedMs: e.Modified.AsTime().UnixMilli(), Target: e.Target})
		}
		if asJSON {
			return printJSON(stdout, map[string]any{"snapshot": resp.Msg.Snapshot, "entries": out})
		}
		fmt.Fprintf(stdout, "%s@%s\n", name, resp.Msg.Snapshot)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		for _, e := range resp.Msg.Entries {
			line := e.Path
			if e.Target != "" {
				line += " -> " + e.Target
			}
			fmt.Fprintf(tw, "%s\t%d:%d\t%d\t%s\t%s\n", modeString(e.Type, e.Mode), e.Uid, e.Gid, e.Size,
				e.Modified.AsTime().Local().Format(time.DateTime), line)
		}
		return tw.Flush()
	})
}

// modeString is ls -l's mode column of an entry.
func modeString(typ string, mode uint32) string {
	m := fs.FileMode(mode & 0o777)
	if mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch typ {
	case "dir":
		m |= fs.ModeDir
	case "symlink":
		m |= fs.ModeSymlink
	}
	return m.String()
}

// boxRestore is `cocoonbox box restore NAME[@SNAPSHOT] PATH... [--to DIR]`.
func boxRestore(fs *command.Flags) runner {
	to := fs.String("to", "", "restore under this `DIR` of the box (under /home/user or /workspace), each path's whole path kept, instead of in place")
	return reading(fs, func(ctx context.Context, pos []string, asJSON bool, st *state, client controlv1connect.BoxesClient, stdout io.Writer) error {
		name, snap, err := splitSnapshot("restore", optional(pos))
		if err != nil {
			return err
		}
		if len(pos) < 2 {
			return command.UsageError{Msg: fmt.Sprintf("box restore %s needs at least one PATH (under /home/user or /workspace)", name)}
		}
		resp, err := client.RestorePaths(ctx, connect.NewRequest(&controlv1.RestorePathsRequest{Box: name, Snapshot: snap, Paths: pos[1:], To: *to}))
		if err != nil {
			return st.explainBox(describe("box restore", name), err)
		}
		if asJSON {
			return printJSON(stdout, map[string]any{"snapshot": resp.Msg.Snapshot, "entries": resp.Msg.Entries, "bytes": resp.Msg.Bytes})
		}
		where := "in place"
		if *to != "" {
			where = "under " + *to
		}
		fmt.Fprintf(stdout, "Restored %d entries (%d bytes) of %s@%s %s.\n", resp.Msg.Entries, resp.Msg.Bytes, name, resp.Msg.Snapshot, where)
		return nil
	})
}
