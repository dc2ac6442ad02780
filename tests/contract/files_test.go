//go:build booted

package contract

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// agentEnvKeys are the keys of /etc/cocoonbox/agent.env the contract lists,
// with the values it gives (placeholders in the image).
var agentEnvKeys = map[string]string{
	"GW_BASE_URL":    "http://10.203.0.1:18090/v1",
	"GW_API_KEY":     "unprovisioned",
	"MODEL_MAIN":     "deepseek/deepseek-v4.1-flash",
	"MODEL_COMPUTER": "anthropic/claude-sonnet-5",
	"AGENT_LISTEN":   "127.0.0.1:7443",
	"CONNECT_URL":    "http://10.203.0.1:18091/mcp",
}

// parseEnv reads KEY=VALUE lines, skipping comments and blank lines.
func parseEnv(s string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// Contract: Loop. /etc/cocoonbox/agent.env is root:cbagent 0640 with the
// contract's keys: cbagent reads it, user does not.
func TestLoopAgentEnvIsRootCbagent0640WithTheContractKeys(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	wantStat(t, b, "/etc/cocoonbox/agent.env", "640 root:cbagent regular file")
	out, err := b.RunAs("cbagent", "cat", "/etc/cocoonbox/agent.env")
	if err != nil {
		t.Fatalf("cbagent cannot read agent.env: %v", err)
	}
	env := parseEnv(out)
	for k, want := range agentEnvKeys {
		if env[k] != want {
			t.Errorf("agent.env %s=%q, want %q", k, env[k], want)
		}
	}
	if _, err := b.RunAs("user", "cat", "/etc/cocoonbox/agent.env"); err == nil {
		t.Error("user can read agent.env; it is for root and cbagent only")
	}
}

// Contract: Loop. The agent's state directory /var/lib/cocoonbox is
// cbagent 0700.
func TestLoopStateDirectoryIsCbagent0700(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	wantStat(t, b, "/var/lib/cocoonbox", "700 cbagent:cbagent directory")
	b.Must(t, "runuser", "-u", "cbagent", "--", "touch", "/var/lib/cocoonbox/probe")
	if _, err := b.RunAs("user", "ls", "/var/lib/cocoonbox"); err == nil {
		t.Error("user can list /var/lib/cocoonbox")
	}
}

// Contract: Tool host / Desktop restart. /run/cocoonbox is user:cbagent
// 2750: what user makes inside (shuttle's desk.sock) gets group cbagent
// from the setgid bit, cbagent can look in, nobody else can.
func TestToolHostRunDirectoryIsUserCbagent2750(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	wantStat(t, b, "/run/cocoonbox", "2750 user:cbagent directory")
	// A file user makes there (as shuttle makes desk.sock).
	b.Must(t, "runuser", "-u", "user", "--", "touch", "/run/cocoonbox/probe")
	if got := stat(t, b, "/run/cocoonbox/probe"); !strings.HasPrefix(got, "644 user:cbagent ") {
		t.Errorf("a file user made in /run/cocoonbox: %q, want group cbagent (setgid directory)", got)
	}
	if _, err := b.RunAs("cbagent", "ls", "/run/cocoonbox"); err != nil {
		t.Errorf("cbagent cannot list /run/cocoonbox: %v", err)
	}
	if _, err := b.RunAs("nobody", "ls", "/run/cocoonbox"); err == nil {
		t.Error("nobody can list /run/cocoonbox")
	}
}

// Runtime directories: /run/cocoonbox-x holds the X cookie of :0
// (XAUTHORITY=/run/cocoonbox-x/Xauthority), for user's processes only.
func TestXRuntimeDirectoryIsUser0700(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	wantStat(t, b, "/run/cocoonbox-x", "700 user:user directory")
}

// Contract: Box identity. /run/cocoonbox-identity is a root 0755
// directory on tmpfs, made at boot.
func TestBoxIdentityDirectoryIsRoot0755OnTmpfs(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	wantStat(t, b, "/run/cocoonbox-identity", "755 root:root directory")
	if fs := strings.TrimSpace(b.Must(t, "stat", "-f", "-c", "%T", "/run/cocoonbox-identity")); fs != "tmpfs" {
		t.Errorf("/run/cocoonbox-identity is on %s, want tmpfs", fs)
	}
}

// Contract: Workspace. /workspace is owned by user, and put right again
// at boot (a restored or hand-changed owner does not stick).
func TestWorkspaceIsOwnedByUser(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	wantStat(t, b, "/workspace", "755 user:user directory")
	b.Must(t, "runuser", "-u", "user", "--", "touch", "/workspace/probe")
	b.Must(t, "chown", "root:root", "/workspace")
	b.Must(t, "systemd-tmpfiles", "--create", "--prefix=/workspace")
	wantStat(t, b, "/workspace", "755 user:user directory")
}

// Contract: Screen executor. /etc/systemd/user/cua-driver.service links to
// /dev/null, so a wants link in a restored home cannot start the driver.
// The home gets a driver unit and a wants link beside a control unit that
// is wired the same way; after the user manager restarts, the control
// unit runs and the driver does not.
func TestScreenExecutorCuaDriverIsMaskedForEveryUser(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	if target := strings.TrimSpace(b.Must(t, "readlink", "/etc/systemd/user/cua-driver.service")); target != "/dev/null" {
		t.Fatalf("/etc/systemd/user/cua-driver.service links to %q, want /dev/null", target)
	}
	unit := "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n[Install]\nWantedBy=default.target\n"
	setup := `set -e
d=/home/user/.local/share/systemd/user
w=/home/user/.config/systemd/user/default.target.wants
mkdir -p "$d" "$w"
cat >"$d/cua-driver.service"
cp "$d/cua-driver.service" "$d/cbtest-control.service"
ln -sf "$d/cua-driver.service" "$w/cua-driver.service"
ln -sf "$d/cbtest-control.service" "$w/cbtest-control.service"
chown -R user:user /home/user/.local /home/user/.config`
	if _, err := b.Exec(box.Cmd{Args: []string{"runuser", "-u", "root", "--", "sh", "-c", setup}, Stdin: strings.NewReader(unit)}); err != nil {
		t.Fatal(err)
	}
	b.Must(t, "systemctl", "restart", "user@1000.service")
	// The restart can return while the user manager still runs the
	// control unit's start (seen: "activating"): wait for it.
	var out string
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err = b.RunAs("user", userManager("show", "-P", "ActiveState", "cbtest-control.service")...)
		if st := strings.TrimSpace(out); st != "activating" || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || strings.TrimSpace(out) != "active" {
		t.Fatalf("control unit wired like the driver is %q (%v): the user manager did not start the home's wants, so the mask proves nothing", out, err)
	}
	out, _ = b.RunAs("user", userManager("show", "-P", "LoadState,ActiveState", "cua-driver.service")...)
	if got := strings.Fields(out); len(got) != 2 || got[0] != "masked" || got[1] != "inactive" {
		t.Errorf("cua-driver.service in user's manager: %q, want masked and inactive", out)
	}
	res, err := b.Exec(box.Cmd{User: "user", Args: userManager("start", "cua-driver.service")})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "masked") {
		t.Errorf("systemctl --user start cua-driver.service: exit %d %q, want refused as masked", res.ExitCode, res.Stderr)
	}
}

// Contract: Desk runtime. SHUTTLE_SOCKET=/run/cocoonbox/desk.sock reaches
// user's systemd manager (/etc/environment.d/20-desk.conf) and the XFCE
// session (the 20-desk.conf drop-in), and /etc/cocoonbox/desk.env (root
// 0644) holds GW_BASE_URL as agent.env has it.
func TestDeskRuntimeEnvReachesTheSessionAndUserManager(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	const want = "SHUTTLE_SOCKET=/run/cocoonbox/desk.sock"
	out, err := b.RunAs("user", userManager("show-environment")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, want+"\n") {
		t.Errorf("user's manager environment lacks %s:\n%s", want, out)
	}
	if d := show(t, b, session, "DropInPaths"); !strings.Contains(d, "/cocoonbox-session.service.d/20-desk.conf") {
		t.Errorf("%s DropInPaths=%q, want 20-desk.conf", session, d)
	}
	// The session's own process has it, not only the unit's text. (Bug
	// found here: the box can be running while MainPID is still systemd's
	// child opening the PAM session, before exec, and holding pid 1's
	// environment. systemd names that child "(command)"; wait for the exec.
	// Type=exec would make the start wait instead, but hangs with PAMName=.)
	pid := show(t, b, session, "MainPID")
	box.Eventually(t, 30*time.Second, "the session's process (pid "+pid+") exec'd", func() (bool, string) {
		comm := b.Must(t, "cat", "/proc/"+pid+"/comm")
		return !strings.HasPrefix(comm, "("), strings.TrimSpace(comm)
	})
	environ := (b.Must(t, "cat", "/proc/"+pid+"/environ"))
	if !strings.Contains("\x00"+environ, "\x00"+want+"\x00") {
		t.Errorf("the session's process (pid %s) lacks %s", pid, want)
	}
	wantStat(t, b, "/etc/cocoonbox/desk.env", "644 root:root regular file")
	desk := parseEnv((b.Must(t, "cat", "/etc/cocoonbox/desk.env")))
	agent := parseEnv((b.Must(t, "cat", "/etc/cocoonbox/agent.env")))
	if desk["GW_BASE_URL"] == "" || desk["GW_BASE_URL"] != agent["GW_BASE_URL"] {
		t.Errorf("desk.env GW_BASE_URL=%q, agent.env has %q", desk["GW_BASE_URL"], agent["GW_BASE_URL"])
	}
	if len(desk) != 1 {
		t.Errorf("desk.env holds %v; it is world-readable and must hold GW_BASE_URL only", desk)
	}
}

// Contract: Browser. Chrome's managed and recommended policies, and the
// same for Chromium, as JSON Chrome reads (root-owned, not writable by
// anyone else, so no user can lift them).
func TestBrowserPoliciesAreManagedAndRecommended(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	managed := map[string]any{"PasswordManagerEnabled": false, "MetricsReportingEnabled": false, "PromotionsEnabled": false}
	recommended := map[string]any{"RestoreOnStartup": float64(1)}
	for _, dir := range []string{"/etc/opt/chrome/policies", "/etc/chromium/policies"} {
		for kind, want := range map[string]map[string]any{"managed": managed, "recommended": recommended} {
			path := dir + "/" + kind + "/cocoonbox.json"
			wantStat(t, b, path, "644 root:root regular file")
			wantStat(t, b, dir+"/"+kind, "755 root:root directory")
			var got map[string]any
			if err := json.Unmarshal([]byte(b.Must(t, "cat", path)), &got); err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			if len(got) != len(want) {
				t.Errorf("%s = %v, want exactly %v", path, got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %s = %v, want %v", path, k, got[k], v)
				}
			}
		}
	}
}

// Contract: Journal. Persistent under /var/log/journal: journald writes
// the system journal there, under the box's machine id.
func TestJournalIsPersistentUnderVarLogJournal(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	b.Must(t, "journalctl", "--flush")
	id := strings.TrimSpace((b.Must(t, "cat", "/etc/machine-id")))
	b.Must(t, "test", "-s", "/var/log/journal/"+id+"/system.journal")
	out := b.Must(t, "journalctl", "--header", "--file", "/var/log/journal/"+id+"/system.journal")
	if !strings.Contains(out, id) {
		t.Errorf("the persistent journal file's header does not name machine id %s", id)
	}
}
