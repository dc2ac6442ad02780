package packer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/guest/offload/stream"
)

// noBox is a transport a test expects never to be used: bad input is
// refused before anything reaches the box.
type noBox struct{ t *testing.T }

func (n noBox) Command(ctx context.Context, argv ...string) *exec.Cmd {
	n.t.Errorf("the box was reached: %v", argv)
	return exec.CommandContext(ctx, "false")
}

func (n noBox) Shell() string { n.t.Error("the box's shell was asked for"); return "false" }

func testPacker(t *testing.T) *Packer {
	return &Packer{Dirs: Dirs{Root: filepath.Join(t.TempDir(), "offload")}, Transport: noBox{t},
		Box: BoxInfo{Name: "b", Image: "cbdesk:v22-base"}, Yes: true}
}

func testRepo(t *testing.T, p *Packer, handover string) (string, string) {
	top := t.TempDir()
	git(t, top, "init", "-q")
	write(t, top, "a.txt", "a\n")
	git(t, top, "add", ".")
	git(t, top, "commit", "-q", "-m", "one")
	key := RepoKey(top)
	if handover != "" {
		if err := p.Dirs.Ensure(key); err != nil {
			t.Fatal(err)
		}
		write(t, p.Dirs.Repo(key), "handover.md", handover)
	}
	return top, key
}

func refused(t *testing.T, err error, want string) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) || !strings.Contains(r.Msg, want) {
		t.Fatalf("got %v, want a refusal saying %q", err, want)
	}
	return r
}

// Contract: Offload, Hand-over and Preflight (issue 13, Bad input): each
// refused with the contract's outcome, before the box is reached, and
// nothing changed.
func TestBadInputIsRefusedBeforeTheBox(t *testing.T) {
	good := offloadtest.Handover("task")
	for _, c := range []struct {
		name, handover, want string
		opts                 OffloadOptions
		image                string
	}{
		{"no heading", strings.Replace(good, "## Commands\n", "", 1), "missing headings: ## Commands", OffloadOptions{}, ""},
		{"a heading twice", good + "## Next steps\nagain\n", "headings more than once: ## Next steps", OffloadOptions{}, ""},
		{"over 256 KiB", good + strings.Repeat("x", offload.MaxHandover), "over the limit of 262144", OffloadOptions{}, ""},
		{"no first line", strings.TrimPrefix(good, "# Hand-over: task\n"), `does not start with "# Hand-over: "`, OffloadOptions{}, ""},
		{"no hand-over", "", "no hand-over at", OffloadOptions{}, ""},
		{"a name outside the grammar", good, `name "-bad": must be 1 to 64`, OffloadOptions{Name: "-bad"}, ""},
		{"a name with a slash", good, `name "a/b"`, OffloadOptions{Name: "a/b"}, ""},
		{"cursor", good, `kind "cursor": must be claude or codex`, OffloadOptions{Kind: "cursor"}, ""},
		{"a box older than v22", good, "upgrade the box first", OffloadOptions{}, "cbdesk:v21-base"},
		{"an image that is not cbdesk", good, "upgrade the box first", OffloadOptions{}, "debian:12"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := testPacker(t)
			if c.image != "" {
				p.Box.Image = c.image
			}
			top, key := testRepo(t, p, c.handover)
			before := git(t, top, "for-each-ref") + git(t, top, "status", "--porcelain", "--ignored")
			o := c.opts
			o.Dir = top
			if o.Kind == "" {
				o.Kind = "claude"
			}
			_, err := p.Offload(context.Background(), o)
			refused(t, err, c.want)
			if after := git(t, top, "for-each-ref") + git(t, top, "status", "--porcelain", "--ignored"); after != before {
				t.Errorf("the repository changed: %s", after)
			}
			if rec, _ := p.Dirs.LoadRecord(key); rec != nil {
				t.Errorf("offload.json written: %+v", rec)
			}
		})
	}
	t.Run("not a git repository", func(t *testing.T) {
		p := testPacker(t)
		r := refused(t, func() error {
			_, err := p.Offload(context.Background(), OffloadOptions{Dir: t.TempDir(), Kind: "claude"})
			return err
		}(), "Not a git repository")
		if len(r.Findings) != 1 || r.Findings[0].Outcome != Block {
			t.Errorf("findings %+v, want the one block", r.Findings)
		}
	})
}

// Contract: Offload, Entry points: a back with no offload in flight is
// refused; when the last one left back.md, the message names it.
func TestBackWithNothingInFlight(t *testing.T) {
	p := testPacker(t)
	top, key := testRepo(t, p, "")
	_, err := p.Back(context.Background(), top, false)
	refused(t, err, "nothing to bring back")
	if err := p.Dirs.Ensure(key); err != nil {
		t.Fatal(err)
	}
	write(t, p.Dirs.Repo(key), "back.md", offloadtest.Handover("done"))
	_, err = p.Back(context.Background(), top, false)
	refused(t, err, filepath.Join(p.Dirs.Repo(key), "back.md"))
	_, err = p.Back(context.Background(), t.TempDir(), false)
	refused(t, err, "Not a git repository")
}

// Contract: Offload, Preflight: the host findings each with its outcome.
func TestHostFindings(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	top := t.TempDir()
	git(t, top, "init", "-q")
	write(t, top, ".gitignore", ".env\n.env.local\n")
	write(t, top, ".env", fmt.Sprintf("DATABASE_URL=postgres://localhost:%d/db\n", port))
	write(t, top, ".env.local", "X=1\n")
	write(t, top, ".gitattributes", "*.bin filter=lfs diff=lfs merge=lfs -text\n")
	write(t, top, ".gitmodules", "[submodule \"x\"]\n\tpath = x\n\turl = ../x\n")
	write(t, top, "App.xcodeproj/project.pbxproj", "// pbx\n")
	write(t, top, "main.go", "package main\nimport \"os\"\nvar _ = os.Getenv(\"COCOONBOX_TEST_SURELY_UNSET\")\n")
	fs, err := HostFindings(top, offloadtest.Handover("t", "Secrets needed: the staging key"), []string{"file:.env.local"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"macOS-only work: warn":        "App.xcodeproj",
		"Local services: warn":         fmt.Sprintf("port %d", port),
		"Secrets not opted in: warn":   "cocoonbox offload secrets add file:.env opts it in",
		"LFS, submodules: warn":        ".gitmodules: submodules are not carried",
		"Secrets not opted in: warn ":  "COCOONBOX_TEST_SURELY_UNSET",
		"Secrets not opted in: warn  ": "the staging key",
	}
	table := FindingsTable(fs)
	for k, detail := range want {
		if !strings.Contains(table, strings.TrimSpace(strings.Split(k, ":")[1])) || !strings.Contains(table, detail) {
			t.Errorf("no %s finding naming %q in:\n%s", k, detail, table)
		}
	}
	if strings.Contains(table, ".env.local") {
		t.Errorf("an opted-in .env.local is reported:\n%s", table)
	}
	if !strings.Contains(table, "filter=lfs") {
		t.Errorf("no LFS warning:\n%s", table)
	}
	if blocked(fs) {
		t.Errorf("a block among warnings:\n%s", table)
	}
	// A Commands line that needs macOS blocks.
	fs, _ = HostFindings(top, strings.Replace(offloadtest.Handover("t"), "## Commands\nnone", "## Commands\nxcodebuild -scheme App test", 1), nil)
	if !blocked(fs) || !strings.Contains(FindingsTable(fs), "xcodebuild -scheme App test") {
		t.Errorf("xcodebuild under Commands does not block:\n%s", FindingsTable(fs))
	}
}

// The size confirm is a warn naming the size, kept per repo once said yes.
func TestSizeAndImageFindings(t *testing.T) {
	if f := SizeFinding(SizeLimit+1, false); f == nil || f.Outcome != Confirm || !strings.Contains(f.Detail, "500 MB") {
		t.Errorf("over 500 MB: %+v", f)
	}
	if SizeFinding(SizeLimit+1, true) != nil || SizeFinding(SizeLimit, false) != nil {
		t.Error("a kept yes, or 500 MB exactly, still confirms")
	}
	for img, ok := range map[string]bool{"cbdesk:v22-base": true, "cbdesk:v23-desk": true, "cbdesk:v22": true, "cbdesk:v21-desk": false, "cbdesk:v2-base": false, "": false} {
		if (ImageFinding(img) == nil) != ok {
			t.Errorf("image %q: block %v", img, !ok)
		}
	}
}

// The names the packer makes hold the box's grammar (guest/offload).
func TestRepoKeyAndNameGrammar(t *testing.T) {
	for _, top := range []string{"/home/u/My Project.git", "/x/" + strings.Repeat("Ü", 80), "/", "/a/..weird..", "/a/-_-"} {
		if err := offload.CheckRepoKey(RepoKey(top)); err != nil {
			t.Errorf("RepoKey(%q) = %q: %v", top, RepoKey(top), err)
		}
		if err := offload.CheckName(DefaultName(top)); err != nil {
			t.Errorf("DefaultName(%q) = %q: %v", top, DefaultName(top), err)
		}
	}
	if RepoKey("/a/x") == RepoKey("/b/x") {
		t.Error("two checkouts of one name share a key")
	}
	for _, e := range []string{"file:../x", "file:/etc/passwd", "file:a/../b", "ssh:", "ssh:a/b", "azure", ""} {
		if CheckSecretEntry(e) == nil {
			t.Errorf("secret entry %q passed", e)
		}
	}
	for _, e := range []string{"file:.env", "file:config/secret.json", "aws", "kube", "gcloud", "ssh:id_ed25519"} {
		if err := CheckSecretEntry(e); err != nil {
			t.Errorf("secret entry %q: %v", e, err)
		}
	}
}

// The stream the host writes is one the box's reader takes member by
// member (parity with guest/offload/stream), a secret's bytes read from
// its file.
func TestStreamReadsBackInTheBox(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "b", "bundle bytes")
	write(t, dir, ".env", "SECRET=1\n")
	secrets, err := secretFiles(dir, []string{"file:.env"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	in := streamInput{handover: []byte(offloadtest.Handover("t")), env: []byte(`{"v":1}`), bundle: filepath.Join(dir, "b"), secrets: secrets}
	if err := writeStream(&buf, in); err != nil {
		t.Fatal(err)
	}
	var got []string
	err = stream.Read(&buf, func(m stream.Member, body io.Reader) error {
		data, _ := io.ReadAll(body)
		got = append(got, m.Name+"="+string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"handover.md=" + string(in.handover), `env.json={"v":1}`, "offload.bundle=bundle bytes", "secrets/file/.env=SECRET=1\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("members %q, want %q", got, want)
	}
	if _, err := secretFiles(dir, []string{"file:missing"}); err == nil {
		t.Error("a secret without its file passed")
	}
	os.Symlink(filepath.Join(dir, ".env"), filepath.Join(dir, "link"))
	if _, err := secretFiles(dir, []string{"file:link"}); err == nil {
		t.Error("a symlinked secret passed")
	}
}

// env.json from the repository's pins, as the box's step parses it.
func TestDetectEnv(t *testing.T) {
	top := t.TempDir()
	write(t, top, "go.mod", "module x\n\ngo 1.26.0\n\ntoolchain go1.26.5\n")
	write(t, top, "go.sum", "")
	write(t, top, ".tool-versions", "python 3.12.7\n# comment\n")
	write(t, top, "package.json", `{"packageManager":"pnpm@9.12.0+sha512.abc"}`)
	write(t, top, ".nvmrc", "v22.11.0\n")
	data, err := DetectEnv(top)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"go":"1.26.5"`, `"python":"3.12.7"`, `"node":"22.11.0"`, `"pnpm":"9.12.0"`, `"lockfiles":["go.sum"]`} {
		if !strings.Contains(string(data), w) {
			t.Errorf("env.json %s lacks %s", data, w)
		}
	}
}
