//go:build booted

package boxcli

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
)

// agent is the offload verbs' command on a box's PATH (cbdesk:v22 on).
const agent = "/usr/local/bin/cocoonbox-agent"

// olderImage: a box whose image has no cocoonbox-agent (older than
// cbdesk:v22; the command's link moved away, as root around the api,
// stands for one): box hibernate goes on as with no working session, with
// no refusal and no word of an unreadable status (Contract: Offload,
// Watching), and the box wakes with the command back.
func olderImage(t *testing.T, id string) {
	inBox(t, id, "mv "+agent+" "+agent+".away")
	r := cli(t, "box", "hibernate", "web")
	ok(t, "box", "ensure", "web")
	inBox(t, id, "mv "+agent+".away "+agent)
	// The progress is said on stderr (issue 45, Deliver 3), stdout empty.
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "hibernate done in") {
		t.Fatalf("box hibernate of a box without %s: exit %d\n%s%s", agent, r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "offload status") {
		t.Fatalf("box hibernate of a box without %s said %q; an older image goes on silently", agent, r.stderr)
	}
}

// inBox runs a shell line as root in alice's box id (nsenter, not the api).
func inBox(t *testing.T, id, line string) {
	t.Helper()
	if _, err := harness.InBox("cbboxcli0", id, nil, line); err != nil {
		t.Fatal(err)
	}
}
