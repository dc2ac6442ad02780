package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// The trees of a machine for the state layer (sandbox.Trees; docs/state.md,
// "Box saves"). A machine's disk holds the box's own ids (its layers are
// idmapped only in its overlay), so a read-only overlay of its upper layer
// over its image shows /home/user as the box sees it, with the owners the
// box names: what a save on any other host must restore.

// treesDir holds ReadTrees' read-only overlays while their read runs: a
// tmpfs, so a crash leaves no mount point on a disk.
var treesDir = "/run/cocoonbox/trees"

// opaqueXattr marks an upper directory opaque: overlayfs shows nothing of
// the lower one under it.
const opaqueXattr = "trusted.overlay.opaque"

var _ sandbox.Trees = (*Supervisor)(nil)

// ReadTrees implements sandbox.Trees.
func (s *Supervisor) ReadTrees(ctx context.Context, id string, read func(root string) error) error {
	m, err := s.find(id)
	if err != nil {
		return err
	}
	defer m.op.Unlock()
	image, err := s.imageRoot(m.Image)
	if err != nil {
		return err
	}
	thaw, err := quiesce(ctx, m, "its trees' save")
	if err != nil {
		return err
	}
	defer thaw()
	if err := syncFS(m.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(treesDir, 0o700); err != nil {
		return err
	}
	root, err := os.MkdirTemp(treesDir, m.ID+"-")
	if err != nil {
		return err
	}
	defer os.Remove(root)
	unmount, err := mountTrees(filepath.Join(m.dir, "upper"), image, root)
	if err != nil {
		return fmt.Errorf("mount the trees of %s read-only: %w", m.ID, err)
	}
	defer unmount()
	return read(root)
}

// mountTrees mounts on root a read-only overlay of upper over image: two
// lower layers and no upper, whiteouts and opaque directories of upper
// applied as the box's own overlay applies them, ids as the layers hold
// them.
func mountTrees(upper, image, root string) (unmount func(), err error) {
	// index=off: with the index on, a lower layer that is another
	// overlay's upper (the running box's) is refused; off, the kernel
	// only warns, and the box is frozen while its trees are read.
	opts := fmt.Sprintf("lowerdir=%s:%s,index=off", upper, image)
	if err := unix.Mount("overlay", root, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return nil, err
	}
	return func() { _ = unix.Unmount(root, unix.MNT_DETACH) }, nil
}

// CreateFilled implements sandbox.Trees: fill writes into the new upper
// layer, and each of sandbox.TreeDirs it made is then marked opaque, so
// the image's own /home/user shows nothing through it.
func (s *Supervisor) CreateFilled(ctx context.Context, spec sandbox.Spec, fill func(root string) error) (sandbox.Machine, error) {
	return s.newMachine(spec, func(m *machine) error {
		if err := fillUpper(filepath.Join(m.dir, "upper"), fill); err != nil {
			return fmt.Errorf("fill the disk of %s: %w", m.ID, err)
		}
		return syncFS(m.dir)
	})
}

// fillUpper makes the upper layer upper with fill, then marks each of
// sandbox.TreeDirs fill made opaque.
func fillUpper(upper string, fill func(root string) error) error {
	// /home as the image has it (root, 0755): a parent fill makes would
	// otherwise shadow it with its own mode.
	if err := os.MkdirAll(filepath.Join(upper, "home"), 0o755); err != nil {
		return err
	}
	if err := os.Chmod(upper, 0o755); err != nil {
		return err
	}
	if err := fill(upper); err != nil {
		return err
	}
	for _, d := range sandbox.TreeDirs {
		p := filepath.Join(upper, d)
		st, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("/%s is not a directory", d)
		}
		if err := unix.Lsetxattr(p, opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark /%s opaque: %w", d, err)
		}
	}
	return nil
}

// quiesce flushes a running machine from inside and freezes it, so its
// disk is one instant of it while the caller reads it, and answers how to
// thaw it. A machine that is not running is left as it is (a hibernated
// one is frozen already). The caller holds m.op; why names the read in
// the errors.
func quiesce(ctx context.Context, m *machine, why string) (thaw func(), err error) {
	d, err := m.door()
	if err != nil {
		return func() {}, nil
	}
	if _, _, err := runIn(ctx, d, sandbox.ExecRequest{Args: []string{"sync"}}, nil); err != nil {
		return nil, fmt.Errorf("flush %s before %s: %w", m.ID, why, err)
	}
	m.mu.Lock()
	cg := m.run.cg
	m.mu.Unlock()
	if err := cg.SetFrozen(ctx, true); err != nil {
		_ = cg.SetFrozen(context.Background(), false)
		return nil, fmt.Errorf("freeze %s for %s: %w", m.ID, why, err)
	}
	return func() { _ = cg.SetFrozen(context.Background(), false) }, nil
}
