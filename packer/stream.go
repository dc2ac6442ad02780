package packer

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// Secret entries of repos.json (Contract: Offload, Directories): file:<repo
// path>, aws, kube, gcloud, ssh:<key name>. Names and paths only: the
// values are read from their files at send time, straight into the stream.
var secretEntryRe = regexp.MustCompile(`^(aws|kube|gcloud|ssh:[A-Za-z0-9][A-Za-z0-9._-]{0,63}|file:[^\x00]+)$`)

// CheckSecretEntry refuses an entry outside the grammar; a file: path must
// be relative to the repository, without . or .. parts.
func CheckSecretEntry(e string) error {
	if !secretEntryRe.MatchString(e) {
		return fmt.Errorf("secret entry %q: must be file:<repo path>, aws, kube, gcloud or ssh:<key name>", e)
	}
	if p, ok := strings.CutPrefix(e, "file:"); ok {
		if filepath.IsAbs(p) || filepath.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." {
			return fmt.Errorf("secret entry %q: the path must be relative to the repository, clean, and inside it", e)
		}
	}
	return nil
}

// secretFile is one secret: the host file and its stream member.
type secretFile struct{ member, path string }

// secretFiles resolves the opted-in entries to their files on this
// machine: file:<p> is <top>/<p>; aws is ~/.aws/credentials and config;
// kube ~/.kube/config; gcloud the files of ~/.config/gcloud (its logs
// left out); ssh:<key> is ~/.ssh/<key>. An entry with no file is an error
// naming it.
func secretFiles(top string, entries []string) ([]secretFile, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, err
	}
	var out []secretFile
	add := func(member, path string) { out = append(out, secretFile{"secrets/" + member, path}) }
	for _, e := range entries {
		if err := CheckSecretEntry(e); err != nil {
			return nil, err
		}
		before := len(out)
		switch kind, arg, _ := strings.Cut(e, ":"); kind {
		case "file":
			add("file/"+arg, filepath.Join(top, arg))
		case "ssh":
			add("ssh/"+arg, filepath.Join(home, ".ssh", arg))
		case "kube":
			add("kube/config", filepath.Join(home, ".kube/config"))
		case "aws":
			for _, f := range []string{"credentials", "config"} {
				if p := filepath.Join(home, ".aws", f); regular(p) {
					add("aws/"+f, p)
				}
			}
		case "gcloud":
			root := filepath.Join(home, ".config/gcloud")
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() && d.Name() == "logs" {
					return filepath.SkipDir
				}
				if err == nil && d.Type().IsRegular() {
					rel, _ := filepath.Rel(root, p)
					add("gcloud/"+filepath.ToSlash(rel), p)
				}
				return nil
			})
		}
		if len(out) == before {
			return nil, fmt.Errorf("secret %s: no file of it on this machine", e)
		}
		for _, s := range out[before:] {
			if !regular(s.path) {
				return nil, fmt.Errorf("secret %s: %s is not a regular file", e, s.path)
			}
			if _, err := offload.SecretMember(strings.TrimPrefix(s.member, "secrets/")); err != nil {
				return nil, err
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].member < out[j].member })
	return out, nil
}

func regular(p string) bool { fi, err := os.Lstat(p); return err == nil && fi.Mode().IsRegular() }

// streamInput is what one send carries (Contract: Offload, Send stream).
type streamInput struct {
	handover, env []byte
	// bundle, head and index are host files, empty when not sent.
	bundle, head, index string
	secrets             []secretFile
}

// writeStream writes the send stream, a pax tar of regular files in the
// contract's order; files are copied from disk as they are read, so a
// secret's bytes pass only through this pipe.
func writeStream(w io.Writer, in streamInput) error {
	tw := tar.NewWriter(w)
	mem := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	file := func(name, path string) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: fi.Size(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := io.CopyN(tw, f, fi.Size()); err != nil {
			return fmt.Errorf("%s changed while it was sent: %w", path, err)
		}
		return nil
	}
	if err := mem("handover.md", in.handover); err != nil {
		return err
	}
	if err := mem("env.json", in.env); err != nil {
		return err
	}
	for _, m := range [][2]string{{"offload.bundle", in.bundle}, {"HEAD", in.head}, {"index", in.index}} {
		if m[1] != "" {
			if err := file(m[0], m[1]); err != nil {
				return fmt.Errorf("stream member %s: %w", m[0], err)
			}
		}
	}
	for _, s := range in.secrets {
		if err := file(s.member, s.path); err != nil {
			return fmt.Errorf("stream member %s: %w", s.member, err)
		}
	}
	return tw.Close()
}
