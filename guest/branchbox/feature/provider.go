// The provider (provider.go) prepares the start of a provider for a consumer
// (Contract: BranchBox managed runtime manifest, Security contract: "A
// provider starts only when the requested executable and inherited
// environment exactly match one live model-identity lease", "Provider
// execution starts from an empty process environment, adding only a fixed
// safe PATH, the exact signed inherited names, and the exact digest-bound
// provider-environment bindings").

package feature

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// safePath is the fixed PATH a provider gets, and the only place its
// executable is looked up.
const safePath = "/usr/local/bin:/usr/bin:/bin"

// ProviderRequest is what the caller asks to start.
type ProviderRequest struct {
	Consumer   string
	Executable string
	// Inherit names the caller's variables the provider inherits; it must
	// equal the lease's inherited_environment as a set.
	Inherit []string
	// Args are the provider's arguments (after its name).
	Args []string
}

// Command is a provider ready to exec.
type Command struct {
	// Path is the executable found in safePath; Argv[0] is the bare name.
	Path string
	Argv []string
	// Env is the whole environment, "NAME=value" each: PATH first, then
	// the inherited names in lease order, then the values in assignment order.
	Env []string
	// Lease is the model-identity lease matched.
	Lease *branchbox.Lease
	// UID and GID run the provider: the version 3 workspace consumer, else
	// the run's owner. Dir is the workspace when it exists, else "/".
	UID, GID uint32
	Dir      string
}

// PrepareProvider matches req against the run's live model-identity leases and
// builds the provider's environment. getenv reads the caller's environment
// (os.LookupEnv). Provider-environment values of the lease's consumer are
// read again from disk now, with every file check and their digests
// recomputed over the bytes returned (rundir.Run.Value).
//
// Errors: a *branchbox.RuleError with RuleProvider when nothing matches
// exactly or an inherited name is unset; the value file's refusal when a
// value changed after signing (RuleDigest) or its file moved.
func PrepareProvider(r *rundir.Run, req ProviderRequest, getenv func(string) (string, bool), now time.Time) (*Command, error) {
	a := r.Assignment
	lease, err := match(a, req, now)
	if err != nil {
		return nil, err
	}
	path, err := lookPath(req.Executable)
	if err != nil {
		return nil, err
	}
	env := []string{"PATH=" + safePath}
	for _, name := range lease.InheritedEnvironment {
		v, ok := getenv(name)
		if !ok {
			return nil, branchbox.Refuse(branchbox.RuleProvider, "leases."+lease.LeaseID, "the signed inherited variable %s is not set in branchbox's environment", name)
		}
		env = append(env, name+"="+v)
	}
	for i := range a.Leases {
		l := &a.Leases[i]
		if l.Scope != branchbox.ScopeProviderEnvironment || l.Consumer != lease.Consumer || !live(l, now) {
			continue
		}
		for _, m := range l.Materializations {
			v, err := r.Value(l, m)
			if err != nil {
				return nil, err
			}
			env = append(env, m.EnvironmentName+"="+string(v))
		}
	}
	c := &Command{Path: path, Argv: append([]string{req.Executable}, req.Args...), Env: env, Lease: lease,
		UID: r.Owner, GID: r.Owner, Dir: "/"}
	if w := a.Workspace; w.ConsumerUID != nil && a.Version == "3" {
		c.UID, c.GID = *w.ConsumerUID, *w.ConsumerGID
	}
	if st, err := os.Lstat(a.Workspace.Path); err == nil && st.IsDir() {
		c.Dir = a.Workspace.Path
	}
	return c, nil
}

// match finds the one live model-identity lease that req names exactly.
func match(a *branchbox.Assignment, req ProviderRequest, now time.Time) (*branchbox.Lease, error) {
	want := slices.Clone(req.Inherit)
	slices.Sort(want)
	for i := range a.Leases {
		l := &a.Leases[i]
		if l.Scope != branchbox.ScopeModelIdentity || l.Consumer != req.Consumer {
			continue
		}
		where := "leases." + l.LeaseID
		if l.Executable != req.Executable {
			return nil, branchbox.Refuse(branchbox.RuleProvider, where, "consumer %s may start %s, not %s", l.Consumer, l.Executable, req.Executable)
		}
		signed := slices.Clone(l.InheritedEnvironment)
		slices.Sort(signed)
		if !slices.Equal(signed, want) {
			return nil, branchbox.Refuse(branchbox.RuleProvider, where, "the inherited environment asked, %v, is not exactly the signed %v", want, signed)
		}
		if !live(l, now) {
			return nil, branchbox.Refuse(branchbox.RuleExpiry, where, "lease %s expired at %s", l.LeaseID, l.ExpiresAt)
		}
		return l, nil
	}
	return nil, branchbox.Refuse(branchbox.RuleProvider, "leases", "no model-identity lease for consumer %q", req.Consumer)
}

func live(l *branchbox.Lease, now time.Time) bool {
	exp, err := time.Parse(time.RFC3339, l.ExpiresAt)
	return err == nil && exp.After(now)
}

// lookPath finds name in safePath only: a regular file with an execute bit.
func lookPath(name string) (string, error) {
	for _, dir := range strings.Split(safePath, ":") {
		p := dir + "/" + name
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", branchbox.Refuse(branchbox.RuleExecutable, name, "is not an executable in the safe PATH %s", safePath)
}

// String is the command for a log line: never the environment's values.
func (c *Command) String() string {
	names := make([]string, len(c.Env))
	for i, kv := range c.Env {
		names[i], _, _ = strings.Cut(kv, "=")
	}
	return fmt.Sprintf("%s as uid %d in %s with %v", c.Path, c.UID, c.Dir, names)
}
