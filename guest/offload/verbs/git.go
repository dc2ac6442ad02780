// Package verbs is the box packer's verbs (Contract: Offload, Verbs):
// begin's preflight and the taking of the copy, send's steps, end, post
// and what they share. The command line is guest/cmd/cocoonbox-agent.
package verbs

import (
	"os"

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// git runs git in dir (gitcmd.Run: stderr kept for the error, nothing on
// the verb's stdout).
var git = gitcmd.Run

func isGitDir(dir string) bool {
	fi, err := os.Stat(dir + "/.git")
	return err == nil && fi.IsDir()
}
