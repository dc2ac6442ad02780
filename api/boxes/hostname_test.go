//go:build booted

package boxes

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// lateHostname is the test's supervisor with the box's hostname helper
// a second late after every boot (stopped, and started again by a timer),
// as on a loaded host where hostnamed takes its time. Boot's first
// commands (the identity) run after the helper is stopped, so the hostname
// cannot have followed them when Boot answers.
type lateHostname struct{ sandbox.Supervisor }

func (l lateHostname) Boot(ctx context.Context, id string, first ...sandbox.Command) (sandbox.Machine, error) {
	m, err := l.Supervisor.Boot(ctx, id)
	if err != nil {
		return m, err
	}
	_, err = ExecIn(ctx, l.Supervisor, id, nil, "sh", "-c", `systemctl stop cocoonbox-hostname.path cocoonbox-hostname.service &&
 systemd-run --quiet --on-active=1s --timer-property=AccuracySec=10ms systemctl start cocoonbox-hostname.path cocoonbox-hostname.service`)
	if err != nil {
		return m, fmt.Errorf("delay the hostname helper: %w", err)
	}
	for _, c := range first {
		if _, err := ExecIn(ctx, l.Supervisor, id, c.Stdin, c.Args...); err != nil {
			return m, fmt.Errorf("first command: %w", err)
		}
	}
	return m, nil
}

// Deliver: "running" means the identity is applied, the hostname
// included: the moment a create's operation ends done, the box's hostname
// (kernel, static, and its /etc/hosts line) is its name. (Create answered
// running while the hostname was still the machine's id, so a script's
// next `rsh hostname` saw that.)
func TestCreateAnswersRunningOnlyOnceTheHostnameIsTheName(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(c *Config) { c.Hosts = map[string]sandbox.Supervisor{"local": lateHostname{sup}} })
	u := e.user("late", 1, 1)
	b := e.create(u, "late-name")
	got := strings.Fields(sh(t, b.ID, "cat /proc/sys/kernel/hostname /etc/hostname; grep -c 'late-name.*# cocoonbox-hostname' /etc/hosts || true"))
	if strings.Join(got, " ") != "late-name late-name 1" {
		t.Fatalf("at running: the kernel hostname, the static one and the /etc/hosts lines naming it read %q; want late-name late-name 1", got)
	}
}

// The wait for the hostname looks at /etc/hosts too: the helper's marked
// line is its last step. (Its look was vacuous: the shell function read
// its own empty $2, so any /etc/hosts passed, and a box could be answered
// running before the helper had written its line.) With the kernel
// hostname right but no line marked for the name, the wait does not pass.
func TestTheHostnameWaitNeedsTheMarkedHostsLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.user("hosts-line", 1, 1)
	b := e.create(u, "hosts-line")
	ctx := context.Background()
	out, err := ExecIn(ctx, sup, b.ID, nil, "sh", "-c", followHostname, "sh", "hosts-line", hostsMark("hosts-line"))
	if err != nil || strings.TrimSpace(out) != b.MachineID {
		t.Fatalf("with the line in place the wait answered %q, %v; want the machine id %s", out, err, b.MachineID)
	}
	_, err = ExecIn(ctx, sup, b.ID, nil, "sh", "-c", followHostname, "sh", "hosts-line", hostsMark("another-name"))
	if err == nil || !strings.Contains(err.Error(), "did not follow the identity within 10 s") {
		t.Fatalf("with no line marked for the name the wait ended %v; want it to give up", err)
	}
}
