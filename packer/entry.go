package packer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// HandoverPrompt is the request a person pastes into a coding CLI that
// has no plugin (codex and others; Contract: Offload, Entry points): write
// the hand-over to path in the template, then run cocoonbox offload.
func HandoverPrompt(path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Offload this task to my cocoonbox: another agent continues it there while I am away.\n\n")
	fmt.Fprintf(&b, "1. Write a hand-over to %s (create or replace the file). Its first line is\n   \"# Hand-over: <the task in a few words>\", then each of these headings once, as its own line,\n   in this order, an empty section saying none:\n\n", path)
	for _, h := range offload.HandoverHeadings {
		b.WriteString("   " + h + "\n")
	}
	b.WriteString("\n   Write it for someone who has not seen this conversation: what done means, what I asked for and\n" +
		"   ruled out, what is done and what is not, the commands that build and test, and what you learned the hard\n" +
		"   way. Under Commands list only commands that run on Linux. If secrets are needed, say which under\n" +
		"   \"Environment facts\" as a line \"Secrets needed: ...\". At most 256 KiB.\n\n")
	b.WriteString("2. Run `cocoonbox offload --json` in the repository. If it answers ok false with findings of outcome\n" +
		"   warn or confirm, show them to me and ask; only when I say yes, run `cocoonbox offload --yes --json`.\n" +
		"   A block is a stop: tell me its detail.\n\n" +
		"3. Tell me the box's tmux session from the answer, and that `cocoonbox back` brings the work home.\n")
	return b.String()
}

// claudeCommands are the plugin's commands, /cocoonbox:offload and
// /cocoonbox:back, as Claude Code command files (the subdirectory
// cocoonbox/ gives the cocoonbox: prefix).
func claudeCommands() map[string]string {
	return map[string]string{
		"offload.md": "---\ndescription: Offload this task to your cocoonbox (a box CLI continues it)\nallowed-tools: Bash(cocoonbox offload:*), Write\n---\n\n" +
			"Find the hand-over's path with `cocoonbox offload handover-path` (run in the repository). Then:\n\n" +
			HandoverPrompt("that path"),
		"back.md": "---\ndescription: Bring the offloaded task back from your cocoonbox and merge it\nallowed-tools: Bash(cocoonbox back:*)\n---\n\n" +
			"Run `cocoonbox back --json` in the repository (it waits up to 10 minutes for the box's agent to hand back).\n" +
			"Then read the hand-over at the answer's back_md and tell me what the box did, and how it came back\n" +
			"(merge.case: fast-forward, merge applied uncommitted, or the branch merge.branch when it would have\n" +
			"touched my uncommitted work or conflicted). Continue the task from that hand-over if I ask.\n" +
			"If it answers ok false, tell me its error: nothing was changed.\n",
	}
}

// InstallClaude writes the plugin's commands into the user's claude
// config (~/.claude/commands/cocoonbox/, or $CLAUDE_CONFIG_DIR's), 0644,
// replacing older ones, and returns the directory (`cocoonbox setup
// claude`).
func InstallClaude() (string, error) {
	dir := os.Getenv("CLAUDE_CONFIG_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".claude")
	}
	dir = filepath.Join(dir, "commands", "cocoonbox")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, body := range claudeCommands() {
		if err := offload.WriteFile(filepath.Join(dir, name), []byte(body)); err != nil {
			return "", err
		}
		if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
