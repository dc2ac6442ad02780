package packer

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
)

// withHosts runs the calling test again in a child process whose
// /etc/hosts is hosts (its own mount namespace: unshare --mount, then a
// bind mount), so the real resolver answers the test's names and the
// host's file is left alone. It answers true in the child, where the
// caller runs its body, and false in the parent, which fails unless the
// child passed.
func withHosts(t *testing.T, hosts string) bool {
	t.Helper()
	if os.Getenv("COCOONBOX_TEST_HOSTS_CHILD") == t.Name() {
		return true
	}
	f := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(f, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`,
		f, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "COCOONBOX_TEST_HOSTS_CHILD="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("the test under its own /etc/hosts (needs root for unshare --mount): %v\n%s", err, out)
	}
	return false
}

// Contract: Offload, Preflight, "VPN-only hosts" (the Mac's scutil --dns
// and the address ranges; here the system resolver and resolvectl's
// routing domains): a remote's host and a .env host that resolve to a
// private range (10/8) or CGNAT (100.64/10, a Tailscale address) are
// warnings naming the host and its address; a host with a public address
// is not; a host under a split resolver's domain is a warning naming the
// link.
func TestVPNOnlyHosts(t *testing.T) {
	if !withHosts(t, "10.77.0.5 db.corp.cocoonbox.test\n100.100.1.1 git.tail.cocoonbox.test\n"+
		"203.0.113.10 api.public.cocoonbox.test\n127.0.0.1 localhost\n") {
		return
	}
	top := t.TempDir()
	git(t, top, "init", "-q")
	git(t, top, "remote", "add", "origin", "git@git.tail.cocoonbox.test:team/app.git")
	write(t, top, ".gitignore", ".env\n")
	write(t, top, ".env", "DATABASE_URL=postgres://db.corp.cocoonbox.test:5432/app\nAPI=https://api.public.cocoonbox.test/v1\n")
	write(t, top, "config/deploy.yaml", "registry: https://registry.vpn-only.example/team\n")
	rf, err := listFiles(top)
	if err != nil {
		t.Fatal(err)
	}
	split := parseDomains("Global: ~.\nLink 2 (eth0):\nLink 5 (wg0): ~vpn-only.example\n")
	table := FindingsTable(vpnFindings(rf, split))
	for _, want := range []string{
		"db.corp.cocoonbox.test resolves to 10.77.0.5, a private range",
		"git.tail.cocoonbox.test resolves to 100.100.1.1, a private range",
		"registry.vpn-only.example resolves only through the split-DNS resolver of Link 5 (wg0) (domain vpn-only.example)",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("no VPN-only finding %q in:\n%s", want, table)
		}
	}
	if strings.Contains(table, "api.public") {
		t.Errorf("a host with a public address is reported:\n%s", table)
	}
	if n := strings.Count(table, "VPN-only hosts"); n != 3 {
		t.Errorf("%d VPN-only findings, want 3:\n%s", n, table)
	}
}

// resolvectl's `domain` lines: a link's search and routing-only (~)
// domains, the default route (~.) and the Global line left out.
func TestParseResolvectlDomains(t *testing.T) {
	got := parseDomains("Global: ~.\nLink 2 (eth0): lan\nLink 5 (wg0): ~Corp.Example ~.\nLink 7 (tun0):\n")
	want := map[string][]string{"Link 2 (eth0)": {"lan"}, "Link 5 (wg0)": {"corp.example"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parseDomains: %v, want %v", got, want)
	}
}

// Contract: Offload, Preflight, "Local services": a docker compose
// project of the repository running here (a real engine, the project
// started by docker compose up) is a warning naming it; another
// repository's project is not this one's.
func TestRunningComposeProjectOfTheRepo(t *testing.T) {
	enginetest.Start(t)
	img := enginetest.ShellImage(t)
	top, other := t.TempDir(), t.TempDir()
	for _, dir := range []string{top, other} {
		git(t, dir, "init", "-q")
	}
	write(t, top, "compose.yaml", fmt.Sprintf(`services:
  sleeper:
    image: %s
    pull_policy: never
    command: ["sleep", "600"]
    network_mode: none
`, img))
	project := fmt.Sprintf("cbpreflight%d", time.Now().UnixNano()%1e9)
	compose := func(args ...string) {
		t.Helper()
		cmd := exec.Command("docker", append([]string{"compose", "-p", project}, args...)...)
		cmd.Dir = top
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker compose %v: %v\n%s", args, err, out)
		}
	}
	compose("up", "-d")
	t.Cleanup(func() { compose("down", "-t", "0") })
	want := fmt.Sprintf("the docker compose project %s of this repository is running here", project)
	fs, err := HostFindings(top, offloadtest.Handover("t"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if table := FindingsTable(fs); !strings.Contains(table, want) || !strings.Contains(table, "Local services") {
		t.Errorf("no finding %q in:\n%s", want, table)
	}
	fs, err = HostFindings(other, offloadtest.Handover("t"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if table := FindingsTable(fs); strings.Contains(table, project) {
		t.Errorf("another repository's offload reports this one's project:\n%s", table)
	}
}
