package devcontainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// TestAnEnvFileInsideTheRepositoryIsReadLiterally (issue 38, Deliver 3):
// five Compose templates set env_file: .env, which was refused as an
// indirect include. BranchBox now reads a file below the repository
// itself, in Compose's dotenv format, into the service's environment ($
// kept literal as $$, the service's own environment winning); a file
// outside the repository, a symlink, a missing required file, another
// format, and a value read from the launcher's environment are refused.
func TestAnEnvFileInsideTheRepositoryIsReadLiterally(t *testing.T) {
	const override = ".devcontainer/compose.override.yaml"
	files := good()
	files[override] = "services:\n  database:\n    env_file: [.env, {path: missing.env, required: false}]\n    environment:\n      OVERRIDDEN: from-environment\n"
	files[".env"] = "POSTGRES_USER=postgres\nPOSTGRES_PASSWORD='it is $x'\nOVERRIDDEN=from-file\n"
	in, err := Load(context.Background(), repo(t, files))
	if err != nil {
		t.Fatal(err)
	}
	env := in.Project.Services["database"].Environment
	for k, want := range map[string]string{"POSTGRES_USER": "postgres", "OVERRIDDEN": "from-environment"} {
		if v := env[k]; v == nil || *v != want {
			t.Errorf("%s: %v, want %q", k, env[k], want)
		}
	}
	if v := env["POSTGRES_PASSWORD"]; v == nil || *v != "it is $$x" {
		t.Errorf("POSTGRES_PASSWORD written %v, want it is $$x (Compose's literal)", env["POSTGRES_PASSWORD"])
	}
	if len(in.Project.Services["database"].EnvFiles) != 0 {
		t.Error("the env_file stays for Compose to read")
	}
	const where = "services.database.env_file[0]"
	for _, c := range []struct {
		name, envFile, body string
		rule                branchbox.Rule
	}{
		{"outside the repository", "../outside.env", "", branchbox.RuleIndirectInclude},
		{"absolute", "/etc/environment", "", branchbox.RuleIndirectInclude},
		{"missing", "none.env", "", branchbox.RuleIndirectInclude},
		{"the launcher's environment, bare", ".env", "HOME\n", branchbox.RuleInterpolatedValue},
		{"the launcher's environment, a variable", ".env", "A=$HOME\n", branchbox.RuleInterpolatedValue},
		{"a variable of the file itself (Compose reads the launcher's first)", ".env", "A=1\nB=${A}\n", branchbox.RuleInterpolatedValue},
		{"raw format", "{path: .env, format: raw}", "A=1\n", branchbox.RuleIndirectInclude},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := good()
			files[override] = "services:\n  database:\n    env_file: [" + c.envFile + "]\n"
			if c.body != "" {
				files[".env"] = c.body
			}
			_, err := Load(context.Background(), repo(t, files))
			var re *branchbox.RuleError
			if !errors.As(err, &re) || re.Rule != c.rule || re.Where != where && re.Where != where+" (.env)" {
				t.Fatalf("got %v, want rule %s at %s", err, c.rule, where)
			}
		})
	}
	t.Run("a symlink", func(t *testing.T) {
		files := good()
		files[override] = "services:\n  database:\n    env_file: [.env]\n"
		dir := repo(t, files)
		if err := os.Symlink("/etc/hostname", filepath.Join(dir, ".env")); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(context.Background(), dir); branchbox.RuleOf(err) != branchbox.RuleIndirectInclude {
			t.Fatalf("got %v", err)
		}
	})
}
