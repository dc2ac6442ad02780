package packer

import "github.com/cocoonbox/cocoonbox/internal/gitcmd"

// IndexRef names the tree of the host's index while the bundle is made, so
// that `--all` carries the blobs only the index names (a file staged at
// one version and changed again): the box's index, which rsync (or the
// stream, for a linked worktree) carries, names them, and without them
// git commit, git stash and git diff --cached failed in the box. The
// contract's bundle is every ref's history; this ref is ours.
const IndexRef = "refs/cocoonbox/index"

// holdIndexTree points IndexRef at the index's tree (git write-tree) and
// returns what removes it again. An index git cannot write as a tree (an
// unfinished merge) is left out.
func holdIndexTree(top string) (release func()) {
	tree, err := gitcmd.Run(top, nil, nil, "write-tree")
	if err != nil {
		return func() {}
	}
	if _, err := gitcmd.Run(top, nil, nil, "update-ref", "--no-deref", IndexRef, tree); err != nil {
		return func() {}
	}
	return func() { gitcmd.Run(top, nil, nil, "update-ref", "--no-deref", "-d", IndexRef) }
}
