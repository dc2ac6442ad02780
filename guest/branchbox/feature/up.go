package feature

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/devcontainer"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/toolrequest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/workspace"
)

// upTimeout bounds the Dev Containers CLI's up.
const upTimeout = 10 * time.Minute

// Options are a launch's places.
type Options struct {
	// CLI is the Dev Containers CLI (@devcontainers/cli's devcontainer).
	CLI string
	// Facade is BranchBox's own directory for the generated files.
	Facade string
	// Step, when set, is told each step as Up passes it ("prepared",
	// "cleared", "volumes", "copied", "verified": the sources checked
	// again just before the CLI runs, "up", "started": all of it up,
	// before Up returns): where a test races a swapped source or kills
	// the launch.
	Step func(step string)
}

func (o Options) step(s string) {
	if o.Step != nil {
		o.Step(s)
	}
}

// Result is a started managed launch.
type Result struct {
	Project   string `json:"project"`
	Container string `json:"container"`
	// User and UID are the provider user as resolved and checked.
	User string `json:"user"`
	UID  uint32 `json:"uid"`
	// Volumes maps each BranchBox volume to its directory in the engine.
	Volumes map[string]string `json:"volumes"`
	// Proxy is the port proxy's container id ("" without published ports).
	Proxy string `json:"port_proxy,omitempty"`
	// Cleared is what an unfinished launch of the run had left in the
	// engine and this launch removed first ("volume NAME", ...).
	Cleared []string `json:"cleared,omitempty"`
}

// Up launches run r's managed Dev Container from its checked-out
// workspace ws, in this order, each step failing closed: Prepare (the
// gate, the repository's files, the service binding, the local image
// inspection, the facade); what an unfinished launch of the run left in
// the engine removed (clearUnfinished: a launch starts clean; the caller
// holds the run's lock and the run has no launch record); the run's volumes created (the workspace and
// one per tool-request lease) and the workspace copied into its volume,
// owned by the signed container consumer; `devcontainer up` of the
// facade; the final inspection (engine.CheckContainer against
// devcontainer.Expected) and of every container of the project
// (engine.CheckProject: HostConfig, binds, volume driver options), the
// binds' inodes against the sources held since the check; the provider
// user (engine.ProviderUser: the kernel's UID equal to the owner of the
// workspace copy, hence every tool-request consumer_uid); each spool initialized (toolrequest.Init, the
// capability read again from its digest-checked materialization); the
// port proxy when ports are published. Any failure once something exists
// in the engine removes all of the run's there (engine.RemoveRun) before
// Up returns the error. It returns the launch's record (for WriteRecord).
func Up(ctx context.Context, c *client.Client, r *rundir.Run, ws string, o Options) (*Record, error) {
	a := r.Assignment
	in, f, err := Prepare(ctx, c, a, ws, o.Facade)
	if err != nil {
		return nil, err
	}
	o.step("prepared")
	uid, err := containerConsumer(a)
	if err != nil {
		return nil, err
	}
	rec := &Record{Result: Result{Project: devcontainer.ProjectName(a.RunID), Volumes: map[string]string{}},
		Service: in.Config.Service, RemoteUser: in.Config.RemoteUser, ContainerUser: in.Config.ContainerUser}
	if rec.Cleared, err = clearUnfinished(ctx, c, a.RunID, rec.Project); err != nil {
		return nil, err
	}
	o.step("cleared")
	if err := rec.up(ctx, c, r, in, f, ws, uid, o); err != nil {
		// What the removal could not remove is named: it would block
		// the run's next launch (its clearing meets it again).
		rs, rerr := engine.RemoveRun(context.WithoutCancel(ctx), c, a.RunID, rec.Project)
		_, failed := split(rs)
		if rerr != nil {
			failed = append(failed, rerr.Error())
		}
		if len(failed) > 0 {
			err = fmt.Errorf("%w (tearing the launch down did not remove: %s)", err, strings.Join(failed, "; "))
		}
		return nil, err
	}
	return rec, nil
}

func (res *Record) up(ctx context.Context, c *client.Client, r *rundir.Run, in *devcontainer.Input, f *devcontainer.Facade, ws string, uid uint32, o Options) error {
	a := r.Assignment
	wsVol := devcontainer.WorkspaceVolume(a.RunID)
	dir, err := engine.CreateVolume(ctx, c, wsVol, a.RunID)
	if err != nil {
		return err
	}
	res.Volumes[wsVol] = dir
	for _, l := range a.Leases {
		if l.Scope == branchbox.ScopeToolRequest {
			name := devcontainer.VolumeName(a.RunID, l.LeaseID)
			if res.Volumes[name], err = engine.CreateVolume(ctx, c, name, a.RunID); err != nil {
				return err
			}
		}
	}
	o.step("volumes")
	if err := workspace.CopyTree(ws, dir, int(uid), int(uid)); err != nil {
		return err
	}
	o.step("copied")
	// The engine mounts the sources by name: each is checked again, as
	// the inode Load opened and holds, as late as BranchBox can; what the
	// engine did mount is compared with the same inode after up.
	want := devcontainer.Expected(a, in.Config.WorkspaceFolder)
	for i, b := range want.Binds {
		dev, ino, ok := r.Held(b.Source)
		if !ok {
			return fmt.Errorf("lease source %s was not opened by the run's check", b.Source)
		}
		want.Binds[i].Dev, want.Binds[i].Ino = dev, ino
	}
	if err := r.Verify(); err != nil {
		return err
	}
	o.step("verified")
	if res.Container, err = devcontainerUp(ctx, o.CLI, ws, filepath.Join(f.Dir, devcontainer.ConfigFile)); err != nil {
		return withStartErrors(ctx, c, res.Project, err)
	}
	o.step("up")
	ct, err := engine.CheckProject(ctx, c, res.Project, res.Container, want, f.Others, f.Shares)
	if err != nil {
		return err
	}
	if ct.Config.Labels["com.docker.compose.project"] != res.Project || ct.Config.Labels["com.docker.compose.service"] != in.Config.Service {
		return branchbox.Refuse(branchbox.RuleFinalInspection, "container "+res.Container, "is not service %s of project %s", in.Config.Service, res.Project)
	}
	// The provider must be the owner of the workspace copy (uid: every
	// tool-request consumer_uid, else the workspace consumer), or it can
	// neither read nor write its workspace (vscode-remote-release #2228).
	if res.User, res.UID, _, err = engine.ProviderUser(ctx, c, res.Container, in.Config.RemoteUser, in.Config.ContainerUser, ct.Config.User, []uint32{uid}); err != nil {
		return err
	}
	for i := range a.Leases {
		l := &a.Leases[i]
		if l.Scope != branchbox.ScopeToolRequest {
			continue
		}
		capability, err := r.Value(l, l.Materializations[0])
		if err != nil {
			return err
		}
		if err := toolrequest.Init(res.Volumes[devcontainer.VolumeName(a.RunID, l.LeaseID)], toolrequest.BindingOf(a, l), capability); err != nil {
			return err
		}
	}
	if len(a.PublishedPorts) > 0 {
		var ports []engine.Port
		for _, p := range a.PublishedPorts {
			ports = append(ports, engine.Port{Host: int(p.Host), Runtime: int(p.Runtime)})
		}
		// A primary in another service's network namespace answers
		// at that service's name.
		target := in.Config.Service
		if other := f.Shares[target]; other != "" {
			target = other
		}
		if res.Proxy, err = engine.StartProxy(ctx, c, a.RunID, a.PortProxyImage, res.Project+"_default", target, ports); err != nil {
			return err
		}
	}
	o.step("started")
	return nil
}

// spoolUIDs are the consumer_uid of every tool-request lease of a.
func spoolUIDs(a *branchbox.Assignment) []uint32 {
	var uids []uint32
	for _, l := range a.Leases {
		if l.Scope == branchbox.ScopeToolRequest {
			uids = append(uids, *l.ConsumerUID)
		}
	}
	return uids
}

// containerConsumer is the UID the workspace copy is given: the signed
// consumer_uid of the tool-request leases (which must agree: one provider
// user), else the version 3 workspace consumer. The provider user's UID
// (the kernel's) is checked against it after up.
func containerConsumer(a *branchbox.Assignment) (uint32, error) {
	uids := spoolUIDs(a)
	for _, u := range uids {
		if u != uids[0] {
			return 0, branchbox.Refuse(branchbox.RuleProviderUser, "leases", "the tool-request leases sign consumer_uid %d and %d; one container has one provider user", uids[0], u)
		}
	}
	if len(uids) > 0 {
		return uids[0], nil
	}
	return *a.Workspace.ConsumerUID, nil
}
