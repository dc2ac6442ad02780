package devcontainer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// TestAConfigValueTheCLIWritesIsHeldToAGrammar (issue 38, Deliver 1):
// the values the Dev Containers CLI copies into its own Compose override
// unescaped (containerEnv keys, containerUser, service) are held to
// their grammars and no string of devcontainer.json holds a control
// character; each refusal names the first offending field in file order.
// The launch test TestARepositoryValueCannotWriteTheCLIsComposeOverride
// shows the injections on the real CLI and engine.
func TestAConfigValueTheCLIWritesIsHeldToAGrammar(t *testing.T) {
	const place = ".devcontainer/devcontainer.json: "
	for _, c := range []struct{ fields, where, says string }{
		{`"containerEnv": {"A=1'\n    volumes:\n      - /:/host\n    x-z: 'q": "v"}`, "containerEnv", `U+000A`},
		{`"containerEnv": {"A=1": "v"}`, "containerEnv", `has the key "A=1"`},
		{`"containerEnv": {"1A": "v"}`, "containerEnv", `has the key "1A"`},
		{`"remoteEnv": {"A B": "v"}`, "remoteEnv", `has the key "A B"`},
		{`"containerEnv": {"A": "x\u2028y"}`, "containerEnv.A", "U+2028"},
		{`"containerUser": "root\n    volumes:\n      - /tmp:/guesttmp"`, "containerUser", "U+000A"},
		{`"containerUser": "root volumes"`, "containerUser", "a user is a name"},
		{`"containerUser": "null"`, "containerUser", "a user is a name"},
		{`"remoteUser": "dev'"`, "remoteUser", "a user is a name"},
		{`"containerUser": "1000:1000"`, "containerUser", "a user is a name"},
		{`"postCreateCommand": ["sh", "-c", "a\u0000b"]`, "postCreateCommand[2]", "U+0000"},
		{`"customizations": {"x\ty": 1}`, "customizations", "U+0009"},
		// File order: the first of two offending fields.
		{`"remoteEnv": {"B-1": "v"}, "containerEnv": {"A-1": "v"}`, "remoteEnv", `"B-1"`},
		{`"containerEnv": {"A-1": "v"}, "remoteEnv": {"B-1": "v"}`, "containerEnv", `"A-1"`},
	} {
		files := good()
		files[".devcontainer/devcontainer.json"] = strings.Replace(goodConfig, `"service": "app",`, `"service": "app", `+c.fields+",", 1)
		_, err := Load(context.Background(), repo(t, files))
		var re *branchbox.RuleError
		if !errors.As(err, &re) || re.Rule != branchbox.RuleDevcontainer || re.Where != place+c.where || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want rule devcontainer-config at %s saying %s", c.fields, err, place+c.where, c.says)
		}
	}
	// The control: names, uids and values of every other shape load.
	files := good()
	files[".devcontainer/devcontainer.json"] = strings.Replace(goodConfig, `"remoteUser": "dev",`, `"remoteUser": "1000", "containerUser": "dev.user-1", "containerEnv": {"_A1": "it's a 'value' with $ and \\n"}, "remoteEnv": {"PATH": null},`, 1)
	if _, err := Load(context.Background(), repo(t, files)); err != nil {
		t.Fatal(err)
	}
}
