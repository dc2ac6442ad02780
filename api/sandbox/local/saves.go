package local

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// Saves live in StateDir/saves: ID.tar (the machine's upper layer) and
// ID.json (its SaveInfo), the record written last, so a save without one
// is a crashed half and ignored.

func newSaveID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("save-%x", b)
}

func (s *Supervisor) savePath(id, ext string) string {
	return filepath.Join(s.cfg.StateDir, "saves", id+ext)
}

// Save implements sandbox.Supervisor: a running machine's file systems
// are flushed first (e2b users lost files written just before a pause).
func (s *Supervisor) Save(ctx context.Context, id, saveID string) (sandbox.SaveInfo, error) {
	if saveID == "" {
		saveID = newSaveID()
	} else if err := sandbox.CheckSaveID("save_id", saveID); err != nil {
		return sandbox.SaveInfo{}, err
	}
	m, err := s.find(id)
	if err != nil {
		return sandbox.SaveInfo{}, err
	}
	defer m.op.Unlock()
	// The machine's op lock orders its saves: a repeated name replaces
	// the one its first call made, and nobody else's.
	if old, err := s.readSave(saveID); err == nil && old.Machine != m.ID {
		return sandbox.SaveInfo{}, fmt.Errorf("save %s is machine %s's: %w", saveID, old.Machine, sandbox.ErrExists)
	} else if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return sandbox.SaveInfo{}, err
	}
	// A running machine is flushed from inside, then frozen while its disk
	// is read, so the save is one instant of it (no file changes under tar)
	// and the box goes on where it was.
	thaw, err := quiesce(ctx, m, "its save")
	if err != nil {
		return sandbox.SaveInfo{}, err
	}
	defer thaw()
	if err := syncFS(m.dir); err != nil {
		return sandbox.SaveInfo{}, err
	}
	info := sandbox.SaveInfo{ID: saveID, Machine: m.ID, Tenant: m.Tenant, Image: m.Image, Created: time.Now().UTC()}
	tmp := s.savePath(info.ID, ".tar.part")
	if err := tarUpper(m.dir, tmp); err != nil {
		os.Remove(tmp)
		return sandbox.SaveInfo{}, err
	}
	st, err := os.Stat(tmp)
	if err != nil {
		return sandbox.SaveInfo{}, err
	}
	info.Size = st.Size()
	// The tar is fsynced before it takes its name, and the record after
	// it (whose write fsyncs the directory, both renames with it), so a
	// record never names a torn or empty tar.
	if err := durable.SyncFile(tmp); err != nil {
		os.Remove(tmp)
		return sandbox.SaveInfo{}, err
	}
	if err := os.Rename(tmp, s.savePath(info.ID, ".tar")); err != nil {
		return sandbox.SaveInfo{}, err
	}
	data, _ := json.Marshal(info)
	if err := durable.WriteFile(s.savePath(info.ID, ".json"), data, 0o600); err != nil {
		os.Remove(s.savePath(info.ID, ".tar"))
		return sandbox.SaveInfo{}, err
	}
	return info, nil
}

func (s *Supervisor) readSave(id string) (sandbox.SaveInfo, error) {
	if err := sandbox.CheckSaveID("save_id", id); err != nil {
		return sandbox.SaveInfo{}, err
	}
	data, err := os.ReadFile(s.savePath(id, ".json"))
	if errors.Is(err, os.ErrNotExist) {
		return sandbox.SaveInfo{}, fmt.Errorf("save %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return sandbox.SaveInfo{}, err
	}
	var info sandbox.SaveInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return sandbox.SaveInfo{}, fmt.Errorf("save %s: unreadable record: %w", id, err)
	}
	return info, nil
}

// Restore implements sandbox.Supervisor.
func (s *Supervisor) Restore(ctx context.Context, saveID string, spec sandbox.Spec) (sandbox.Machine, error) {
	info, err := s.readSave(saveID)
	if err != nil {
		return sandbox.Machine{}, err
	}
	if spec.Image == "" {
		spec.Image = info.Image
	}
	tarFile := s.savePath(saveID, ".tar")
	return s.newMachine(spec, func(m *machine) error { return untarUpper(tarFile, m.dir) })
}

// DeleteSave implements sandbox.Supervisor.
func (s *Supervisor) DeleteSave(ctx context.Context, saveID string) error {
	if _, err := s.readSave(saveID); err != nil {
		return err
	}
	if err := os.Remove(s.savePath(saveID, ".json")); err != nil {
		return err
	}
	return os.Remove(s.savePath(saveID, ".tar"))
}
