package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

// TestMain runs the test binary as branchbox itself when asked, so exec's
// replacement of the process is tested for real; with
// BRANCHBOX_TEST_KILL_AT=STEP a launch SIGKILLs itself at that step
// (feature.Options.Step), as a crash: no deferred cleanup runs.
func TestMain(m *testing.M) {
	if os.Getenv("BRANCHBOX_TEST_AS_MAIN") == "1" {
		if at := os.Getenv("BRANCHBOX_TEST_KILL_AT"); at != "" {
			launchStep = func(step string) {
				if step == at {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
			}
		}
		main()
	}
	os.Exit(m.Run())
}

// runChild runs the real command in a child process with env (and
// nothing else) as its environment.
func runChild(t testing.TB, env []string, args ...string) (stdout, stderr []byte, code int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append([]string{"BRANCHBOX_TEST_AS_MAIN=1"}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.Bytes(), errb.Bytes(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), errb.Bytes(), 0
}

func runIn(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestCheckAcceptsTheExample(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	out, errs, code := runIn("feature", "check", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	var rep checkReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Status != "valid" || !rep.ManagedLaunch.Allowed || len(rep.Leases) != 5 || len(rep.Sources) != 4 {
		t.Fatalf("%s", out)
	}
	out, _, code = runIn("feature", "check", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root)
	if code != 0 || !strings.Contains(out, "managed Dev Containers launch: allowed") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestCheckRefusalNamesRuleAndPath(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	path := filepath.Join(r.Dir, "assignment.json")
	os.Chmod(path, 0o640)
	out, _, code := runIn("feature", "check", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json")
	var rep map[string]any
	json.Unmarshal([]byte(out), &rep)
	if code != exitUnsafe || rep["rule"] != "owner-only-regular-file" || rep["where"] != path {
		t.Fatalf("exit %d: %s", code, out)
	}
	os.Chmod(path, 0o600)
	if _, errs, code := runIn("feature", "check", "other-feature", "--run", branchboxtest.RunID, "--root", r.Root); code != exitUnsafe || !strings.Contains(errs, `not "other-feature"`) {
		t.Fatalf("another feature's NAME: exit %d: %s", code, errs)
	}
	if _, _, code := runIn("feature", "check", "coding-demo", "--run", "run-none", "--root", r.Root); code != exitNoInput {
		t.Fatalf("a missing run: exit %d", code)
	}
	if _, errs, code := runIn("feature", "check", "coding-demo", "--run", "../run-demo", "--root", r.Root); code != exitInvalid || !strings.Contains(errs, "--run: \"../run-demo\" is not a run_id") {
		t.Fatalf("a run id climbing out: exit %d: %s", code, errs)
	}
}

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{nil, exitUsage}, {[]string{"--help"}, exitOK}, {[]string{"feature", "--help"}, exitOK},
		{[]string{"feature", "frobnicate", "x", "--run", "r"}, exitUsage},
		{[]string{"feature", "check", "x"}, exitUsage},
		{[]string{"feature", "check", "x", "--run", "r", "--force"}, exitUsage},
		{[]string{"feature", "exec", "x", "--run", "r"}, exitUsage},
		{[]string{"--version"}, exitOK},
	} {
		out, errs, code := runIn(c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d", c.args, code, c.code)
		}
		if c.code == exitUsage && !strings.Contains(errs, "--help' for usage") || c.code == exitOK && out == "" {
			t.Errorf("%v: stdout %q stderr %q", c.args, out, errs)
		}
	}
}

// execRun lays out the example with the provider "cat" (a real program in
// the safe PATH), which prints its own /proc/self/environ.
func execRun(t *testing.T) *branchboxtest.Run {
	return branchboxtest.Lay(t, func(m map[string]any) {
		m["leases"].([]any)[0].(map[string]any)["executable"] = "cat"
	})
}

func execArgs(r *branchboxtest.Run, extra ...string) []string {
	return append([]string{"feature", "exec", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root,
		"--consumer", "coding-agent", "--executable", "cat", "--inherit", "MODEL_ACCESS_TOKEN"}, extra...)
}

// Contract: Security contract, "Provider execution starts from an empty
// process environment, adding only a fixed safe PATH, the exact signed
// inherited names, and the exact digest-bound provider-environment
// bindings." The provider's own /proc/self/environ is compared byte for
// byte; the caller's other variables (and branchbox's own) are absent.
//
// Contract: "Provider-environment values are selected only for that
// lease's exact consumer": primary-tool's value is not given to
// coding-agent's provider.
func TestSecurityContractProviderEnvironmentExact(t *testing.T) {
	r := branchboxtest.Lay(t, func(m map[string]any) {
		m["leases"].([]any)[0].(map[string]any)["executable"] = "cat"
		m["leases"] = append(m["leases"].([]any), map[string]any{"lease_id": "other_env", "scope": "provider-environment",
			"consumer": "primary-tool", "expires_at": "2099-01-01T00:00:00Z", "materializations": []any{map[string]any{
				"source_path": "/run/branchbox/managed/run-demo/materializations/other-token", "environment_name": "OTHER_TOKEN", "sha256": ""}}})
	})
	r.SetValue(t, "other-token", []byte("primary-tool-only"))
	caller := []string{"MODEL_ACCESS_TOKEN=model-secret", "CALLER_SECRET=do-not-leak", "LD_PRELOAD=/tmp/x.so", "PATH=/tmp/evil:/usr/bin", "HOME=/root"}
	out, errs, code := runChild(t, caller, execArgs(r, "--", "/proc/self/environ")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := "PATH=/usr/local/bin:/usr/bin:/bin\x00MODEL_ACCESS_TOKEN=model-secret\x00SOURCE_DELIVERY_TOKEN=example-delivery-token\x00"
	if string(out) != want {
		t.Fatalf("the provider's environ is\n%q\nwant\n%q", out, want)
	}
}

func TestSecurityContractProviderRunsAsTheWorkspaceConsumer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (make test does): it checks the drop to the version 3 consumer")
	}
	r := branchboxtest.Lay(t, func(m map[string]any) { m["leases"].([]any)[0].(map[string]any)["executable"] = "id" })
	out, errs, code := runChild(t, []string{"MODEL_ACCESS_TOKEN=x"}, "feature", "exec", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root,
		"--consumer", "coding-agent", "--executable", "id", "--inherit", "MODEL_ACCESS_TOKEN")
	if code != 0 || !strings.HasPrefix(string(out), "uid=1001 gid=1001 groups=1001") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
}

// Contract: "recomputes the digest from the bytes it will use": a value
// file changed after signing is refused by digest, and nothing starts.
func TestSecurityContractValueChangedAfterSigning(t *testing.T) {
	r := execRun(t)
	os.WriteFile(filepath.Join(r.Dir, "materializations", "delivery-token"), []byte("changed-after-signing"), 0o600)
	out, errs, code := runChild(t, []string{"MODEL_ACCESS_TOKEN=x"}, execArgs(r, "--json", "--", "/proc/self/environ")...)
	var rep map[string]any
	if err := json.Unmarshal(out, &rep); err != nil || code != exitInvalid || rep["rule"] != "materialization-digest" {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
}

// Contract: "A provider starts only when the requested executable and
// inherited environment exactly match one live model-identity lease."
func TestSecurityContractProviderLeaseMatch(t *testing.T) {
	r := execRun(t)
	for name, c := range map[string]struct {
		args []string
		rule string
	}{
		"another executable":     {[]string{"--consumer", "coding-agent", "--executable", "sh", "--inherit", "MODEL_ACCESS_TOKEN"}, "provider-lease-match"},
		"fewer inherited names":  {[]string{"--consumer", "coding-agent", "--executable", "cat"}, "provider-lease-match"},
		"more inherited names":   {[]string{"--consumer", "coding-agent", "--executable", "cat", "--inherit", "MODEL_ACCESS_TOKEN,OTHER_TOKEN"}, "provider-lease-match"},
		"a reserved name":        {[]string{"--consumer", "coding-agent", "--executable", "cat", "--inherit", "MODEL_ACCESS_TOKEN,HOME"}, "environment-name"},
		"a consumer with none":   {[]string{"--consumer", "primary-tool", "--executable", "cat", "--inherit", "MODEL_ACCESS_TOKEN"}, "provider-lease-match"},
		"inherited name not set": {[]string{"--consumer", "coding-agent", "--executable", "cat", "--inherit", "MODEL_ACCESS_TOKEN", "--root", r.Root}, "provider-lease-match"},
	} {
		env := []string{"MODEL_ACCESS_TOKEN=x", "HOME=/root"}
		if name == "inherited name not set" {
			env = nil
		}
		args := append([]string{"feature", "exec", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json"}, c.args...)
		out, _, code := runChild(t, env, append(args, "--", "/proc/self/environ")...)
		var rep map[string]any
		if err := json.Unmarshal(out, &rep); err != nil || code != exitInvalid || rep["rule"] != c.rule {
			t.Errorf("%s: exit %d: %s", name, code, out)
		}
	}
	// An expired lease refuses the whole assignment.
	r.Lease(t, "lease_model")["expires_at"] = "2020-01-01T00:00:00Z"
	r.Write(t)
	out, _, code := runChild(t, []string{"MODEL_ACCESS_TOKEN=x"}, execArgs(r, "--json", "--", "/proc/self/environ")...)
	if code != exitInvalid || !strings.Contains(string(out), "lease-expiry") {
		t.Fatalf("expired: exit %d: %s", code, out)
	}
}

// BenchmarkProviderExec: branchbox's check, match and value reads before
// the provider runs, against a bare exec of the same program.
func BenchmarkProviderExec(b *testing.B) {
	r := branchboxtest.Lay(b, func(m map[string]any) { m["leases"].([]any)[0].(map[string]any)["executable"] = "true" })
	self, _ := os.Executable()
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/usr/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("branchbox", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(self, "feature", "exec", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root,
				"--consumer", "coding-agent", "--executable", "true", "--inherit", "MODEL_ACCESS_TOKEN")
			cmd.Env = []string{"BRANCHBOX_TEST_AS_MAIN=1", "MODEL_ACCESS_TOKEN=x"}
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
}
