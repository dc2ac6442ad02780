package boxes

import (
	"context"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// Snapshots answers the snapshots of a box's name, oldest first.
func (h *Handler) Snapshots(ctx context.Context, req *connect.Request[controlv1.BoxSnapshotsRequest]) (*connect.Response[controlv1.BoxSnapshotsResponse], error) {
	u, err := h.who(ctx)
	if err != nil {
		return nil, err
	}
	list, err := h.s.Snapshots(ctx, u, req.Msg.Box)
	if err != nil {
		return nil, h.status(ctx, "snapshots", err)
	}
	resp := &controlv1.BoxSnapshotsResponse{}
	for _, sn := range list {
		resp.Snapshots = append(resp.Snapshots, &controlv1.Snapshot{Name: sn.Name, Created: timestamp(sn.Created), Files: sn.Files, Bytes: sn.Bytes})
	}
	return connect.NewResponse(resp), nil
}

// BrowseSnapshot answers one path of a snapshot and what is directly
// under it.
func (h *Handler) BrowseSnapshot(ctx context.Context, req *connect.Request[controlv1.BrowseSnapshotRequest]) (*connect.Response[controlv1.BrowseSnapshotResponse], error) {
	u, err := h.who(ctx)
	if err != nil {
		return nil, err
	}
	snap, entries, err := h.s.BrowseSnapshot(ctx, u, req.Msg.Box, req.Msg.Snapshot, req.Msg.Path)
	if err != nil {
		return nil, h.status(ctx, "browse snapshot", err)
	}
	resp := &controlv1.BrowseSnapshotResponse{Snapshot: snap}
	for _, e := range entries {
		target := e.Target
		if e.Link != "" {
			target = "/" + e.Link
		}
		resp.Entries = append(resp.Entries, &controlv1.SnapshotEntry{Path: "/" + e.Path, Type: e.Type, Mode: e.Mode, Uid: e.UID, Gid: e.GID,
			Size: e.Size, Modified: timestamp(time.Unix(0, e.MtimeNS)), Target: target})
	}
	return connect.NewResponse(resp), nil
}

// RestorePaths writes paths of a snapshot back into the running box.
func (h *Handler) RestorePaths(ctx context.Context, req *connect.Request[controlv1.RestorePathsRequest]) (*connect.Response[controlv1.RestorePathsResponse], error) {
	u, err := h.who(ctx)
	if err != nil {
		return nil, err
	}
	snap, stats, err := h.s.RestorePaths(ctx, u, req.Msg.Box, req.Msg.Snapshot, req.Msg.Paths, req.Msg.To)
	if err != nil {
		return nil, h.status(ctx, "restore paths", err)
	}
	return connect.NewResponse(&controlv1.RestorePathsResponse{Snapshot: snap, Entries: int64(stats.Entries), Bytes: stats.Bytes}), nil
}
