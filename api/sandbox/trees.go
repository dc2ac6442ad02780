package sandbox

import "context"

// TreeDirs are the paths of a machine's disk that hold the user's state,
// relative to its root: what Trees hands over and what the state layer
// saves (Contract: State objects (agent ↔ api); docs/state.md, "Box
// saves").
var TreeDirs = []string{"home/user", "workspace"}

// Trees is a supervisor that hands the caller a machine's /home/user and
// /workspace as a directory of this host, for the state layer to save
// into its store and restore from it (docs/state.md, "Box saves"). Only a
// supervisor in the api's own process implements it (package local): the
// objects are sealed under the user's state key, which stays in the api.
// A supervisor without it has its disk-level saves only.
type Trees interface {
	// ReadTrees calls read with a read-only directory whose TreeDirs are
	// the machine's as its box sees them (the image below its own
	// changes; owners as the box names them), the machine quiesced for
	// the call (a running one flushed, then frozen until read returns,
	// so the files are one instant of it). The directory is gone after.
	ReadTrees(ctx context.Context, id string, read func(root string) error) error
	// CreateFilled is Create with fill writing the machine's TreeDirs
	// under root (the new disk's root, owners as the box names them)
	// before it ever boots: what fill writes there replaces the image's
	// /home/user and /workspace whole, so a file the save lacked does
	// not come back from the image. A fill error removes the machine.
	CreateFilled(ctx context.Context, spec Spec, fill func(root string) error) (Machine, error)
}
