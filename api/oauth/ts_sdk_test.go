package oauth_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/internal/clis"
)

// sdkStep is one line testdata/ts-sdk-signin.mjs prints.
type sdkStep struct {
	Step     string   `json:"step"`
	ClientID string   `json:"client_id"`
	URL      string   `json:"url"`
	Iss      string   `json:"iss"`
	Access   string   `json:"access"`
	Refresh  string   `json:"refresh"`
	Tools    []string `json:"tools"`
}

// Issue 41, Must show: the official TypeScript MCP SDK (npm, pinned:
// clis.MCPSDKVersion) signs in against an https issuer with only that one
// origin configured (apitest.WithTLS: oauth.public_url alone), with
// dynamic registration, the consent approved as alice, the code
// exchanged, tools/list on the control MCP, and the SDK's own refresh
// followed by tools/list with the new token. Node trusts the api's test
// CA through NODE_EXTRA_CA_CERTS.
func TestTypeScriptSDKSignsInAtAnHTTPSIssuer(t *testing.T) {
	dir := clis.MCPSDKDir(t)
	a := apitest.New(t, apitest.WithTLS())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/ts-sdk-signin.mjs")
	cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+dir, "MCP_URL="+a.URL+"/cocoonbox.mcp/control", "NODE_EXTRA_CA_CERTS="+a.CAFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("node: %v", err)
	}
	lines := bufio.NewScanner(stdout)
	next := func(want string) sdkStep {
		t.Helper()
		var s sdkStep
		if !lines.Scan() || json.Unmarshal(lines.Bytes(), &s) != nil || s.Step != want {
			io.Copy(io.Discard, stdout)
			cmd.Wait()
			t.Fatalf("the SDK's %s step: got %q\n%s", want, lines.Text(), stderr.String())
		}
		return s
	}

	authorize := next("authorize")
	u, err := url.Parse(authorize.URL)
	if err != nil || !strings.HasPrefix(authorize.URL, a.URL+"/cb/oauth/authorize?") || len(authorize.ClientID) != 32 || u.Query().Get("client_id") != authorize.ClientID {
		t.Fatalf("the SDK's authorization request %q (client %q): want the https issuer's and a registered client", authorize.URL, authorize.ClientID)
	}
	body, _ := json.Marshal(map[string]string{"query": u.RawQuery})
	resp, text := a.Session.Send("POST", "/cb/api/oauth/approve", "application/json", string(body))
	var approved struct{ Redirect string }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(text), &approved) != nil {
		t.Fatalf("approve: %d %s", resp.StatusCode, text)
	}
	fmt.Fprintln(stdin, approved.Redirect)

	in := next("signed_in")
	if in.Iss != a.URL || !strings.HasPrefix(in.Access, "cba_") || !strings.HasPrefix(in.Refresh, "cbr_") || !slices.Contains(in.Tools, "box_list") {
		t.Fatalf("signed in: %+v; want iss %s, a cba_ and a cbr_ token, and the control MCP's tools", in, a.URL)
	}
	refreshed := next("refreshed")
	if refreshed.Access == in.Access || refreshed.Refresh == in.Refresh || !strings.HasPrefix(refreshed.Access, "cba_") || !slices.Contains(refreshed.Tools, "box_list") {
		t.Fatalf("refreshed: %+v; want a new pair that works (before: %+v)", refreshed, in)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	if _, err := a.Grants.Check(refreshed.Access); err != nil {
		t.Fatalf("the refreshed access token: %v", err)
	}
}
