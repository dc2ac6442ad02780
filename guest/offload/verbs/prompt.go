package verbs

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// FirstPrompt composes the first prompt (Contract: Offload, First prompt):
// the preamble, the hand-over, and "Attached by the packer".
func (p *Packer) FirstPrompt(o SendOptions, name, dir string, handover, env []byte) string {
	var b strings.Builder
	b.WriteString(Preamble(name, filepath.Join(p.Paths.Repo(o.Key), "handover.md"), BaseRef(o.ID)))
	b.WriteString("\n\n")
	b.Write(handover)
	b.WriteString("\n\n# Attached by the packer\n\n")
	b.WriteString(p.attached(dir, o.ID, env))
	return b.String()
}

// Preamble is the first prompt's opening: where the agent runs, that
// nobody answers, what to run first and how to hand back.
func Preamble(name, handoverPath, base string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are running in the user's cocoonbox box, in /workspace/%s, continuing a task the user's local agent handed over. ", name)
	b.WriteString("The user is away and nobody answers prompts: decide for yourself, and ask only through a question post.\n\n")
	b.WriteString("- First run `cocoonbox-agent offload env` to see which tools and dependencies are ready.\n")
	b.WriteString("- HTTP_PROXY and HTTPS_PROXY are set in this box and can break tests that read them.\n")
	fmt.Fprintf(&b, "- Before blaming your change for a failure, compare against S, the state you started from (%s), in a worktree of its own: `git worktree add --detach /tmp/cocoonbox-s %s` (remove it with `git worktree remove /tmp/cocoonbox-s`). Do not use git stash: the uncommitted files in this copy are the user's work, and what stays stashed never goes back to the user.\n", base, base)
	b.WriteString("- Commit as you go and never push.\n")
	fmt.Fprintf(&b, "- Keep your hand-over in %s, written with the template below; post progress with `cocoonbox-agent offload post --progress < %s`, ", handoverPath, handoverPath)
	fmt.Fprintf(&b, "a question with `echo '...' | cocoonbox-agent offload post --question`, and when you are done (or told BACK) `cocoonbox-agent offload post --back < %s`.\n\n", handoverPath)
	b.WriteString("The hand-over template (every heading once, as its own line; an empty section says none):\n\n")
	b.WriteString("# Hand-over: <one line naming the task>\n")
	for _, h := range offload.HandoverHeadings {
		b.WriteString(h + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// attached is the packer's section: the branch and S, git status --short,
// the commits not upstream (else the last 5), Mac-only settings in
// .git/config, and env.json in short.
func (p *Packer) attached(dir, id string, env []byte) string {
	var b strings.Builder
	branch, _ := git(dir, nil, nil, "symbolic-ref", "--short", "-q", "HEAD")
	base, _ := git(dir, nil, nil, "rev-parse", "--verify", "-q", BaseRef(id))
	if base == "" {
		base = "none (an empty history)"
	}
	fmt.Fprintf(&b, "Branch: %s\nS (%s): %s\n\n", orNone(branch), BaseRef(id), base)
	status, _ := git(dir, nil, nil, "status", "--short")
	fmt.Fprintf(&b, "git status --short:\n%s\n\n", orNone(status))
	log, err := git(dir, nil, nil, "log", "--oneline", "@{upstream}..HEAD")
	title := "git log --oneline @{upstream}..HEAD"
	if err != nil {
		log, _ = git(dir, nil, nil, "log", "--oneline", "-5")
		title = "the last 5 commits (no upstream)"
	}
	fmt.Fprintf(&b, "%s:\n%s\n\n", title, orNone(log))
	var macOnly []string
	if h, _ := git(dir, nil, nil, "config", "--local", "--get-all", "credential.helper"); strings.Contains(h, "osxkeychain") {
		macOnly = append(macOnly, "credential.helper osxkeychain (no keychain here)")
	}
	if hp, _ := git(dir, nil, nil, "config", "--local", "--get", "core.hooksPath"); strings.HasPrefix(hp, "/") {
		macOnly = append(macOnly, "core.hooksPath "+hp+" (an absolute path of the Mac)")
	}
	fmt.Fprintf(&b, "Mac-only settings in .git/config: %s\n\n", orNone(strings.Join(macOnly, "; ")))
	fmt.Fprintf(&b, "env.json: %s\n", envShort(env))
	return b.String()
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "none"
	}
	return s
}

// envShort is env.json in one line: tool@version, package managers,
// lockfiles.
func envShort(data []byte) string {
	var e struct {
		Tools           map[string]string `json:"tools"`
		PackageManagers map[string]string `json:"package_managers"`
		Lockfiles       []string          `json:"lockfiles"`
	}
	if json.Unmarshal(data, &e) != nil {
		return "none"
	}
	var parts []string
	for _, m := range []map[string]string{e.Tools, e.PackageManagers} {
		var tools []string
		for k, v := range m {
			tools = append(tools, k+"@"+v)
		}
		sort.Strings(tools)
		parts = append(parts, tools...)
	}
	if len(e.Lockfiles) > 0 {
		parts = append(parts, "lockfiles "+strings.Join(e.Lockfiles, ", "))
	}
	return orNone(strings.Join(parts, ", "))
}
