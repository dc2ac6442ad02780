package packer

import (
	"fmt"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// fetchRefspecs are back's fetch (Contract: Offload, "Back, Mac side",
// step 3): the box's branches and S′, and ours, the box's stash, which a
// glob fetches only when the box has one.
func fetchRefspecs(id string) []string {
	return []string{"+refs/heads/*:refs/cocoonbox/box/*", "+refs/cocoonbox/back/" + id + ":refs/cocoonbox/back/" + id,
		"+refs/stash*:refs/cocoonbox/stash/" + id + "*"}
}

// backWarnings are what back says beside the merge, in its answer and on
// stderr, after the fetch of fetchRefspecs:
//   - the box's work left a stash (not this repository's own) that holds
//     files you had uncommitted when you offloaded (S's changes over its
//     parent) which S′ does not have as S had them: the warning names
//     them, the stash, and how to apply it;
//   - HEAD is detached here, and the box committed: its commits arrive as
//     uncommitted changes, and the warning names where the commits are
//     (S′'s parent, kept at CommitsRef when S′'s ref goes).
func backWarnings(top, id, s, sPrime string) []string {
	g := func(args ...string) string { out, _ := gitcmd.Run(top, nil, nil, args...); return out }
	ws := []string{}
	stashRef := "refs/cocoonbox/stash/" + id
	if stash := g("rev-parse", "--verify", "-q", stashRef); stash != "" && stash != g("rev-parse", "--verify", "-q", "refs/stash") {
		mine := map[string]bool{}
		for _, p := range paths(top, "diff", "--name-only", "-z", "--no-renames", s+"^", s) {
			mine[p] = true
		}
		in := paths(top, "diff", "--name-only", "-z", "--no-renames", stash+"^1", stash)
		if g("rev-parse", "--verify", "-q", stash+"^3") != "" {
			in = append(in, paths(top, "ls-tree", "-r", "-z", "--name-only", stash+"^3")...)
		}
		back := map[string]bool{} // what came back as it was in S is not lost
		for _, p := range paths(top, "diff", "--name-only", "-z", "--no-renames", s, sPrime) {
			back[p] = true
		}
		var lost []string
		for _, p := range uniq(in) {
			if mine[p] && back[p] {
				lost = append(lost, p)
			}
		}
		if len(lost) > 0 {
			ws = append(ws, fmt.Sprintf("the box's work left a stash holding files you had uncommitted (%s): it is %s (%s); git stash apply %s brings them back", strings.Join(first(lost, 5), ", "), stashRef, stash[:12], stashRef))
		}
	}
	if boxHead := detachedCommits(top, s, sPrime); boxHead != "" {
		ws = append(ws, fmt.Sprintf("HEAD is detached here, so the box's commits came back as uncommitted changes; the commits are %s (%s): git log %s, or git branch <name> %s", boxHead[:12], CommitsRef(id), boxHead[:12], boxHead[:12]))
	}
	return ws
}

// CommitsRef keeps the box's commits that came back as uncommitted
// changes (HEAD detached here) once S′'s ref is dropped after back.
func CommitsRef(id string) string { return "refs/cocoonbox/commits/" + id }

// detachedCommits is S′'s parent when HEAD is detached here and the box
// committed (that parent is not S's), else empty.
func detachedCommits(top, s, sPrime string) string {
	g := func(args ...string) string { out, _ := gitcmd.Run(top, nil, nil, args...); return out }
	if g("symbolic-ref", "-q", "HEAD") != "" {
		return ""
	}
	if boxHead, base := g("rev-parse", "--verify", "-q", sPrime+"^"), g("rev-parse", "--verify", "-q", s+"^"); boxHead != "" && boxHead != base {
		return boxHead
	}
	return ""
}

func paths(top string, args ...string) []string {
	out, _ := gitcmd.Paths(top, nil, nil, args...)
	return out
}
