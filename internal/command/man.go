//go:build manpages

package command

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/cocoonbox/cocoonbox/internal/version"
)

// Built with -tags manpages, every binary has the hidden `man DIR`; the
// binaries that ship are built without it, so they link no man page
// generator (internal/deptest).
func init() { extra = append(extra, manCommand) }

// manCommand is the hidden `man DIR`: the tree's man pages, section 1,
// one a command (NAME.1, NAME-SUB.1, ...), written into DIR. The Makefile
// runs it at build (go run -tags manpages) so the pages are the
// binary's own help.
func manCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the man pages of every command into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ManPages(root, args[0])
		},
	}
}

// ManPages writes root's man pages, one a visible command, into dir
// (made if missing), dated $SOURCE_DATE_EPOCH when set (cobra/doc), so
// a package build is reproducible.
func ManPages(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root.DisableAutoGenTag = true
	return doc.GenManTree(root, &doc.GenManHeader{
		Title:   "",
		Section: "1",
		Source:  version.String(root.Name()),
		Manual:  "cocoonbox",
	}, dir)
}
