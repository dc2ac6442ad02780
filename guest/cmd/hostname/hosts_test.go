package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUpdateHosts(t *testing.T) {
	base := "127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost\n"
	for _, c := range []struct{ in, want string }{
		{base, "127.0.0.1\tlocalhost\n127.0.1.1\tbox\t# cocoonbox-hostname\n::1\t\tlocalhost ip6-localhost\n"},
		{"127.0.0.1\tlocalhost\n127.0.1.1\told\t# cocoonbox-hostname\n::1 x\n", "127.0.0.1\tlocalhost\n127.0.1.1\tbox\t# cocoonbox-hostname\n::1 x\n"},
		{"127.0.1.1 a # cocoonbox-hostname\n# keep me\n127.0.1.1 b # cocoonbox-hostname\n", "127.0.1.1\tbox\t# cocoonbox-hostname\n# keep me\n"},
		{"", "127.0.1.1\tbox\t# cocoonbox-hostname\n"},
		{"10.0.0.1 other", "127.0.1.1\tbox\t# cocoonbox-hostname\n10.0.0.1 other\n"},
	} {
		if got := updateHosts(c.in, "box"); got != c.want {
			t.Errorf("updateHosts(%q) =\n%q\nwant\n%q", c.in, got, c.want)
		}
		if again := updateHosts(c.want, "box"); again != c.want {
			t.Errorf("not idempotent on %q: %q", c.want, again)
		}
	}
}

func TestEnsureHostsWritesOnlyOnChangeAndKeepsTheMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(p, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrote, err := ensureHosts(p, "one")
	if err != nil || !wrote {
		t.Fatalf("first: %v %v", wrote, err)
	}
	wrote, err = ensureHosts(p, "one")
	if err != nil || wrote {
		t.Fatalf("second: wrote=%v %v", wrote, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", st.Mode())
	}
	data, _ := os.ReadFile(p)
	if string(data) != "127.0.0.1 localhost\n127.0.1.1\tone\t# cocoonbox-hostname\n" {
		t.Fatalf("%q", data)
	}
}
