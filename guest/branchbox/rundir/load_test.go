package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

func options(r *branchboxtest.Run) branchbox.Options {
	return branchbox.Options{Root: r.Root, Now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
}

func mustRefuse(t *testing.T, err error, rule branchbox.Rule, path string) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if branchbox.RuleOf(err) != rule {
		t.Fatalf("refused by rule %q, want %q: %v", branchbox.RuleOf(err), rule, err)
	}
	var re *branchbox.RuleError
	if path != "" && (!errors.As(err, &re) || re.Where != path) {
		t.Fatalf("refusal does not name %s as where: %v", path, err)
	}
	t.Log(err)
}

func TestExampleLoadsFromItsRunDirectory(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	run, err := Load(options(r), branchboxtest.RunID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[Kind]int{}
	for _, s := range run.Sources {
		kinds[s.Kind]++
	}
	if kinds[KindFile] != 2 || kinds[KindDirectory] != 1 || kinds[KindSocket] != 1 {
		t.Fatalf("sources %+v", run.Sources)
	}
}

// Contract: Security contract, "The assignment and file materializations
// must be owner-only regular files."
func TestSecurityContractAssignmentOwnerOnly(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	path := filepath.Join(r.Dir, "assignment.json")
	for _, mode := range []os.FileMode{0o640, 0o604, 0o660} {
		must(t, os.Chmod(path, mode))
		_, err := Load(options(r), branchboxtest.RunID)
		mustRefuse(t, err, branchbox.RuleOwnerOnly, path)
	}
	must(t, os.Chmod(path, 0o400))
	if _, err := Load(options(r), branchboxtest.RunID); err != nil {
		t.Fatalf("control: a 0400 assignment: %v", err)
	}
}

func TestSecurityContractAssignmentOwnedByAnotherUID(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	path := filepath.Join(r.Dir, "assignment.json")
	must(t, os.Chown(path, 1000, 1000))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleOwnerOnly, path)
}

func TestSecurityContractAssignmentNotASymlink(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	path := filepath.Join(r.Dir, "assignment.json")
	must(t, os.Rename(path, filepath.Join(r.Root, "elsewhere.json")))
	must(t, os.Symlink(filepath.Join(r.Root, "elsewhere.json"), path))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleOwnerOnly, path)
}

// Contract: "The run directory and every source-directory ancestor use
// mode 0700 and the assignment owner's UID."
func TestSecurityContractRunDirectory0700(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	must(t, os.Chmod(r.Dir, 0o750))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleRunDirectory, r.Dir)
}

func TestSecurityContractSourceAncestors0700(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	must(t, os.Chmod(filepath.Join(r.Dir, "shared"), 0o755))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleSourceType, filepath.Join(r.Dir, "shared"))
}

func TestSecurityContractRunDirectoryAncestorReplaceable(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	must(t, os.Chmod(filepath.Join(r.Root, "managed"), 0o777))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleRunDirectory, filepath.Join(r.Root, "managed"))
	must(t, os.Chmod(filepath.Join(r.Root, "managed"), 0o777|os.ModeSticky))
	if _, err := Load(options(r), branchboxtest.RunID); err != nil {
		t.Fatalf("a sticky ancestor is allowed: %v", err)
	}
}

func TestSecurityContractStoredInItsRunDirectory(t *testing.T) {
	r := branchboxtest.Lay(t, func(m map[string]any) {
		m["run_id"] = "run-other"
		for _, l := range m["leases"].([]any) {
			for _, mt := range l.(map[string]any)["materializations"].([]any) {
				mt := mt.(map[string]any)
				mt["source_path"] = strings.Replace(mt["source_path"].(string), "/run-demo/", "/run-other/", 1)
			}
		}
	})
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleRunDirectory, filepath.Join(r.Dir, "assignment.json"))
	if !strings.Contains(err.Error(), `names run "run-other"`) {
		t.Fatal(err)
	}
}

func TestSecurityContractMaterializationHardLinkRefused(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	path := filepath.Join(r.Dir, "materializations", "delivery-token")
	must(t, os.Link(path, filepath.Join(r.Root, "second-name")))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleOwnerOnly, path)
}

func TestSecurityContractMaterializationGroupReadableRefused(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	path := filepath.Join(r.Dir, "materializations", "delivery-capability")
	must(t, os.Chmod(path, 0o640))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleOwnerOnly, path)
}

// Contract: file materializations "match their declared SHA-256".
func TestSecurityContractMaterializationDigest(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	path := filepath.Join(r.Dir, "materializations", "delivery-token")
	must(t, os.WriteFile(path, []byte("example-delivery-tokeN"), 0o600))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleDigest, path)
}

// Contract: "Value files are bounded, UTF-8, and control-free."
func TestSecurityContractValueFilesControlFree(t *testing.T) {
	for name, value := range map[string]string{"NUL": "tok\x00en", "newline": "token\n", "not UTF-8": "tok\xffen", "C1": "tok\u0085en", "oversize": strings.Repeat("a", maxValueSize+1)} {
		t.Run(name, func(t *testing.T) {
			r := branchboxtest.Lay(t, nil)
			r.SetValue(t, "delivery-token", []byte(value))
			_, err := Load(options(r), branchboxtest.RunID)
			want := branchbox.RuleValueFile
			if name == "oversize" {
				want = branchbox.RuleOwnerOnly
			}
			mustRefuse(t, err, want, filepath.Join(r.Dir, "materializations", "delivery-token"))
		})
	}
}

// A capability is a file materialization too: a trailing newline (what
// echo writes) is refused by check, not first by launch once the
// containers are up.
func TestSecurityContractCapabilityControlFree(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	r.SetValue(t, "delivery-capability", []byte("endpoint-only-random-value\n"))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleValueFile, filepath.Join(r.Dir, "materializations", "delivery-capability"))
}

func TestSecurityContractSharedDirectoryLeaf0755(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	leaf := filepath.Join(r.Dir, "shared", "exchange")
	must(t, os.Chmod(leaf, 0o777))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleSourceType, leaf)
}

// Contract: "source ownership or type changes".
func TestSecurityContractSourceOwnershipOrType(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	leaf := filepath.Join(r.Dir, "shared", "exchange")
	must(t, os.Chown(leaf, 1000, 1000))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleSourceType, leaf)
	must(t, os.Remove(leaf))
	must(t, os.WriteFile(leaf, nil, 0o755))
	_, err = Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleSourceType, leaf)
}

// Contract: a tool-request has "one same-consumer live socket endpoint".
func TestSecurityContractLinkedEndpointIsASocket(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	sock := filepath.Join(r.Dir, "tool-endpoints", "delivery.sock")
	r.Listener.Close()
	os.Remove(sock)
	must(t, os.Mkdir(sock, 0o700))
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleToolRequest, sock)
}

func TestSecurityContractWorkspaceConsumerDistinctFromOwner(t *testing.T) {
	r := branchboxtest.Lay(t, func(m map[string]any) { m["workspace"].(map[string]any)["consumer_uid"] = os.Geteuid() })
	if os.Geteuid() == 0 {
		// uid 0 is refused by the parser already; chown the run to 1001 instead.
		r = branchboxtest.Lay(t, nil)
		for _, p := range []string{r.Dir, filepath.Join(r.Dir, "assignment.json")} {
			must(t, os.Chown(p, 1001, 1001))
		}
	}
	_, err := Load(options(r), branchboxtest.RunID)
	mustRefuse(t, err, branchbox.RuleWorkspaceConsumer, "")
}

// TestSourceSwappedForSymlinkBetweenCheckAndUse races a rename of a
// symlink over the value file against Value, which reads it again as a
// provider starts. The symlink's target has other bytes: had Value
// followed it, the digest would fail. Every read must either get the
// signed bytes or refuse the symlink, never anything else.
func TestSourceSwappedForSymlinkBetweenCheckAndUse(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	run, err := Load(options(r), branchboxtest.RunID)
	if err != nil {
		t.Fatal(err)
	}
	lease := &run.Assignment.Leases[1]
	m := lease.Materializations[0]
	path := m.SourcePath
	signed, _ := os.ReadFile(path)
	outside := filepath.Join(r.Root, "outside-token")
	must(t, os.WriteFile(outside, []byte("attacker-chosen"), 0o600))
	fresh, link := filepath.Join(r.Dir, "materializations", "fresh"), filepath.Join(r.Root, "link")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			// The name always exists: rename(2) replaces it atomically,
			// by a new copy of the signed file, then by a symlink.
			must(t, os.WriteFile(fresh, signed, 0o600))
			must(t, os.Rename(fresh, path))
			os.Remove(link)
			must(t, os.Symlink(outside, link))
			must(t, os.Rename(link, path))
		}
	}()
	var good, refused int
	for n := 0; n < 20000 && (good < 100 || refused < 100); n++ {
		v, err := run.Value(lease, m)
		switch {
		case err == nil && string(v) == string(signed):
			good++
		case err == nil:
			stop.Store(true)
			t.Fatalf("read %q through the swap", v)
		case branchbox.RuleOf(err) == branchbox.RuleOwnerOnly && strings.Contains(err.Error(), "symlink"):
			refused++
		case branchbox.RuleOf(err) == branchbox.RuleOwnerOnly && strings.Contains(err.Error(), "has 0 hard links"):
			// Opened, then renamed over before the fstat: the
			// descriptor holds an unlinked file, refused too.
		default:
			stop.Store(true)
			wg.Wait()
			t.Fatalf("a swapped source gave another refusal (followed the link?): %v", err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if good == 0 || refused == 0 {
		t.Fatalf("the race never hit both sides: %d good reads, %d refusals", good, refused)
	}
	t.Logf("%d reads of the signed bytes, %d refusals of the swapped source", good, refused)
}

// must fails the test on any error of a setup step: one that ignored
// "not found" let a security-contract test pass whose setup never ran.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
