package engine

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
)

// TestLocalImageInspect (Contract: Preloaded service images, "A missing
// image therefore fails the assignment instead of building or pulling"):
// the imported image passes by its Id; a missing Id, a registry reference
// the engine does not hold, and a name the engine holds under another
// digest fail by rule local-image-inspect; a mutable reference is refused
// before the engine is asked.
func TestLocalImageInspect(t *testing.T) {
	id := enginetest.ImportImage(t)
	c, err := Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := CheckLocalImages(ctx, c, map[string]string{"service_images.app": id}); err != nil {
		t.Fatalf("the imported image %s: %v", id, err)
	}
	tagged := "registry.example/team/app:1"
	if out, err := exec.Command("docker", "tag", id, tagged).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", tagged).Run() })
	other := "sha256:" + strings.Repeat("0", 64)
	cases := []struct {
		name, ref string
		rule      branchbox.Rule
	}{
		{"missing id", other, branchbox.RuleLocalImage},
		{"missing registry reference", "registry.example/team/db@" + other, branchbox.RuleLocalImage},
		{"held under a tag only", tagged + "@" + id, branchbox.RuleLocalImage},
		{"mutable", tagged, branchbox.RuleServiceImage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckLocalImages(ctx, c, map[string]string{"service_images.app": id, "service_images.db": tc.ref})
			if branchbox.RuleOf(err) != tc.rule || !strings.Contains(err.Error(), "service_images.db") {
				t.Fatalf("%s: got %v, want rule %s naming service_images.db", tc.ref, err, tc.rule)
			}
		})
	}
}

// TestHoldsChecksTheAnswer: the engine's answer must be the exact image,
// by Id or by a RepoDigests entry (the tag stripped), never a near one.
func TestHoldsChecksTheAnswer(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	e := "sha256:" + strings.Repeat("b", 64)
	cases := []struct {
		id      string
		digests []string
		ref     string
		want    bool
	}{
		{d, nil, d, true},
		{d, nil, e, false},
		{e, []string{"registry.example/app@" + d}, "registry.example/app:1@" + d, true},
		{e, []string{"registry.example/app@" + d}, "registry.example/other@" + d, false},
		{e, []string{"registry.example/app@" + e}, "registry.example/app@" + d, false},
	}
	for _, c := range cases {
		if got := holds(c.id, c.digests, c.ref); got != c.want {
			t.Errorf("holds(%s, %v, %s) = %v, want %v", c.id, c.digests, c.ref, got, c.want)
		}
	}
}
