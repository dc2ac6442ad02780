package devcontainer

import (
	"fmt"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// readEnvFiles replaces each runnable service's env_file in p by the
// literal values of its files (issue 38, Deliver 3: five Compose templates
// set env_file: .env inside the repository). Each file is read by
// BranchBox as every repository file is (readBeneath: below the
// repository dfd, no symlink, a regular file of at most maxFile bytes),
// relative to dir (the project directory, as Compose resolves it), in
// Compose's dotenv format; a value that reads the launcher's environment
// (a bare KEY, or any $VAR: Compose looks a variable up there before the
// file's own earlier keys) is refused as interpolated. The values become the service's environment, "$" written
// "$$" so the facade's Compose reads them literally, the service's own
// environment overriding them as Compose does; the facade then never
// hands an env_file to Compose. Errors are *branchbox.RuleError.
func readEnvFiles(dfd int, dir string, p *types.Project, o order) error {
	for _, name := range keys(o, p.Services, "services") {
		s := p.Services[name]
		if len(s.EnvFiles) == 0 {
			continue
		}
		env := types.MappingWithEquals{}
		for i, ef := range s.EnvFiles {
			where := fmt.Sprintf("services.%s.env_file[%d]", name, i)
			if err := readEnvFile(dfd, dir, ef, where, env); err != nil {
				return err
			}
		}
		for k, v := range s.Environment {
			env[k] = v
		}
		s.Environment, s.EnvFiles = env, nil
		p.Services[name] = s
	}
	return nil
}

// readEnvFile adds the values of one env_file entry ef (at where) to env.
func readEnvFile(dfd int, dir string, ef types.EnvFile, where string, env types.MappingWithEquals) error {
	refuse := func(rule branchbox.Rule, detail string, args ...any) error {
		return branchbox.Refuse(rule, where, detail, args...)
	}
	if ef.Format != "" {
		return refuse(branchbox.RuleIndirectInclude, "has format %q; BranchBox reads the dotenv format only", ef.Format)
	}
	rel, ok := repoRel(dir, ef.Path)
	if !ok {
		return refuse(branchbox.RuleIndirectInclude, "%q is not a relative path below the repository", ef.Path)
	}
	data, err := readBeneath(dfd, rel, where+" ("+rel+")", branchbox.RuleIndirectInclude)
	if err != nil {
		return err
	}
	if data == nil {
		if ef.Required {
			return refuse(branchbox.RuleIndirectInclude, "names %s, which does not exist", rel)
		}
		return nil
	}
	var looked []string
	vals, err := dotenv.UnmarshalBytesWithLookup(data, func(k string) (string, bool) {
		looked = append(looked, k)
		return "", false
	})
	if err != nil {
		return refuse(branchbox.RuleIndirectInclude, "names %s, which is not a dotenv file: %v", rel, err)
	}
	if len(looked) > 0 {
		return refuse(branchbox.RuleInterpolatedValue, "names %s, which reads %s from the launcher's environment; only literal values are accepted", rel, looked[0])
	}
	for k, v := range vals {
		literal := strings.ReplaceAll(v, "$", "$$")
		env[k] = &literal
	}
	return nil
}
