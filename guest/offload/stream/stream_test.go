package stream

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

type member struct {
	name string
	body string
	typ  byte
	size int64
}

func tarOf(t testing.TB, ms ...member) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		typ := m.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		size := int64(len(m.body))
		if m.size != 0 {
			size = m.size
		}
		h := &tar.Header{Name: m.name, Typeflag: typ, Mode: 0o600, Size: size, Format: tar.FormatPAX}
		if typ != tar.TypeReg {
			h.Size = 0
			h.Linkname = "/etc/shadow"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(m.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func readAll(data []byte) (map[string]string, error) {
	got := map[string]string{}
	err := Read(bytes.NewReader(data), func(m Member, r io.Reader) error {
		b, err := io.ReadAll(r)
		got[m.Name] = string(b)
		return err
	})
	return got, err
}

// Contract: Offload, Send stream: every member of the table is read, in
// order, with its content.
func TestReadsEveryMemberOfTheTable(t *testing.T) {
	data := tarOf(t, member{name: "handover.md", body: "# Hand-over: x"}, member{name: "env.json", body: "{}"},
		member{name: "offload.bundle", body: "bundle"}, member{name: "HEAD", body: "ref: refs/heads/main\n"},
		member{name: "index", body: "DIRC"}, member{name: "secrets/aws/credentials", body: "[default]"})
	got, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || got["secrets/aws/credentials"] != "[default]" || got["HEAD"] != "ref: refs/heads/main\n" {
		t.Fatalf("members: %q", got)
	}
}

// Bad input: each is refused, naming the member and the rule.
func TestRefusesWhatIsNotInTheTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"outside the table", tarOf(t, member{name: "etc/passwd", body: "x"}), "not a member"},
		{"dot-dot", tarOf(t, member{name: "secrets/../../x", body: "x"}), `".."`},
		{"absolute", tarOf(t, member{name: "/handover.md", body: "x"}), "absolute"},
		{"symlink", tarOf(t, member{name: "handover.md", typ: tar.TypeSymlink}), "not a regular file"},
		{"hard link", tarOf(t, member{name: "env.json", typ: tar.TypeLink}), "not a regular file"},
		{"over its limit", tarOf(t, member{name: "HEAD", body: strings.Repeat("x", 5000)}), "over its limit"},
		{"twice", tarOf(t, member{name: "HEAD", body: "a"}, member{name: "HEAD", body: "b"}), "twice"},
		{"truncated", tarOf(t, member{name: "handover.md", body: strings.Repeat("h", 3000)})[:1536], "truncated"},
		{"not a tar", []byte(strings.Repeat("garbage!", 200)), "not a readable tar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(tc.data)
			var me *MemberError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a *MemberError with %q", err, tc.want)
			}
		})
	}
}

func TestAnEmptyStreamHasNoMembers(t *testing.T) {
	got, err := readAll(tarOf(t))
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v", got, err)
	}
}

func FuzzRead(f *testing.F) {
	f.Add(tarOf(f, member{name: "handover.md", body: "# Hand-over: x"}, member{name: "secrets/ssh/id", body: "k"}))
	f.Add(tarOf(f, member{name: "../x", body: "x"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		Read(bytes.NewReader(data), func(m Member, r io.Reader) error {
			if _, _, err := Classify(m.Name); err != nil {
				t.Fatalf("member %q passed with %v", m.Name, err)
			}
			if strings.Contains(m.Name, "..") && strings.Contains("/"+m.Name+"/", "/../") {
				t.Fatalf("member %q has a .. part", m.Name)
			}
			_, err := io.Copy(io.Discard, r)
			return err
		})
	})
}
