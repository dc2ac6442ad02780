package packer

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkHostFindings: the host half of the preflight on a clone of
// this project's own repository (the small real repository of tests/
// offload's BenchmarkFirstOffloadAndBack), the fixed cost every offload
// waits on before begin (issue 39, Deliver 4). Each check is also
// reported on its own (ms), to say where the time goes.
func BenchmarkHostFindings(b *testing.B) {
	self, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		b.Fatal(err)
	}
	top := filepath.Join(b.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", strings.TrimSpace(string(self)), top).CombinedOutput(); err != nil {
		b.Fatalf("clone: %v: %s", err, out)
	}
	handover := "# Hand-over: bench\n"
	parts := map[string]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := HostFindings(top, handover, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		t := time.Now()
		rf, err := listFiles(top)
		if err != nil {
			b.Fatal(err)
		}
		parts["list"] += time.Since(t)
		for name, f := range map[string]func(){
			"apple":    func() { appleFindings(rf, handover) },
			"services": func() { serviceFindings(rf) },
			"vpn":      func() { vpnFindings(rf, splitDomains()) },
			"secrets":  func() { secretFindings(rf, handover, nil) },
			"carried":  func() { carriedFindings(rf) },
		} {
			t := time.Now()
			f()
			parts[name] += time.Since(t)
		}
		b.StartTimer()
	}
	for k, v := range parts {
		b.ReportMetric(float64(v.Milliseconds())/float64(b.N), k+"-ms")
	}
}

// Every form of reading a variable that envReadRe knows is still found
// with readsEnv's literals before it (a file without one is skipped).
func TestEveryFormOfReadingAVariableIsFound(t *testing.T) {
	top := t.TempDir()
	git(t, top, "init", "-q")
	forms := map[string]string{
		"a.go":  `os.Getenv("CBX_UNSET_GO")` + "\n" + `os.LookupEnv("CBX_UNSET_LOOKUP")`,
		"b.rs":  `std::env::var("CBX_UNSET_STD") ; env::var("CBX_UNSET_RS")`,
		"c.py":  `os.environ.get("CBX_UNSET_ENVIRON"), os.getenv("CBX_UNSET_PY")`,
		"d.ts":  `const x = process.env.CBX_UNSET_TS`,
		"e.mjs": `process.env.CBX_UNSET_MJS`,
		"f.go":  `os.Setenv("CBX_NOT_A_READ", "x")`,
	}
	for f, text := range forms {
		write(t, top, f, text+"\n")
	}
	rf, err := listFiles(top)
	if err != nil {
		t.Fatal(err)
	}
	table := FindingsTable(secretFindings(rf, "", nil))
	for _, v := range []string{"CBX_UNSET_GO", "CBX_UNSET_LOOKUP", "CBX_UNSET_STD", "CBX_UNSET_RS", "CBX_UNSET_ENVIRON", "CBX_UNSET_PY", "CBX_UNSET_TS", "CBX_UNSET_MJS"} {
		if !strings.Contains(table, v) {
			t.Errorf("%s is not named:\n%s", v, table)
		}
	}
	if strings.Contains(table, "CBX_NOT_A_READ") {
		t.Errorf("a Setenv is named:\n%s", table)
	}
}
