package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

// TestLeaseSourceSwappedAtEachStep (no time of check to time of use):
// the shared-directory source swapped for a symlink (to a directory of
// the same owner and mode) at every step between the check and the
// engine's mount is refused each time, and the launch leaves nothing in
// the engine: before the CLI runs by the sources held since the check
// (Verify, exit 73), after it by the inode the container shows at the
// target (final-inspection, exit 65); between materialize and launch a
// directory put in its place is another inode than the ledger recorded.
// A wrapper swapping exchange for a symlink to /etc just before up once
// let launch exit 0 and the provider read /etc/passwd through the lease.
func TestLeaseSourceSwappedAtEachStep(t *testing.T) {
	type swap struct {
		step string // feature.Options.Step's, "materialized" (before launch) or "cli" (in the CLI)
		dir  bool   // a directory in its place rather than a symlink
		rule string
		code int
	}
	for _, c := range []swap{
		{step: "materialized", dir: true, rule: "source-ownership-or-type", code: exitUnsafe},
		{step: "materialized", rule: "source-ownership-or-type", code: exitUnsafe},
		{step: "prepared", rule: "source-ownership-or-type", code: exitUnsafe},
		{step: "volumes", rule: "source-ownership-or-type", code: exitUnsafe},
		{step: "copied", rule: "source-ownership-or-type", code: exitUnsafe},
		{step: "verified", rule: "final-inspection", code: exitInvalid},
		{step: "cli", rule: "final-inspection", code: exitInvalid},
	} {
		name := c.step
		if c.dir {
			name += " directory"
		}
		t.Run(name, func(t *testing.T) {
			r, _ := launchable(t, composeExtra{}, nil)
			src := filepath.Join(r.Dir, "shared", "exchange")
			decoy := filepath.Join(r.Root, "decoy")
			if err := os.Mkdir(decoy, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chmod(decoy, 0o755)
			doSwap := func() {
				if err := os.Rename(src, src+"-orig"); err != nil {
					t.Fatal(err)
				}
				var err error
				if c.dir {
					err = os.Mkdir(src, 0o755)
					os.Chmod(src, 0o755)
				} else {
					err = os.Symlink(decoy, src)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			cli := devcontainerCLI
			switch c.step {
			case "materialized":
				doSwap()
			case "cli":
				cli = filepath.Join(t.TempDir(), "devcontainer")
				script := "#!/bin/sh\nset -e\nmv " + src + " " + src + "-orig\nln -s " + decoy + " " + src + "\nexec " + devcontainerCLI + " \"$@\"\n"
				if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
			default:
				launchStep = func(step string) {
					if step == c.step {
						doSwap()
					}
				}
				t.Cleanup(func() { launchStep = nil })
			}
			out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", cli, "--json")
			var rep struct{ Rule, Where, Error string }
			json.Unmarshal([]byte(out), &rep)
			if code != c.code || rep.Rule != c.rule || !strings.Contains(rep.Where+rep.Error, "exchange") {
				t.Fatalf("exit %d: %s%s; want exit %d, rule %s naming the exchange source", code, out, errs, c.code, c.rule)
			}
			if left := runObjects(t); len(left) != 0 {
				t.Fatalf("a refused launch left %v", left)
			}
			if _, err := os.Stat(filepath.Join(r.Root, "state", branchboxtest.RunID, "launch.json")); err == nil {
				t.Fatal("a refused launch left a launch record")
			}
		})
	}
}
