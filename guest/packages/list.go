// Package packages keeps the user's Debian packages across images and
// restores: it records the packages the user marked manual beyond the
// image's baseline into ~user/.config/cocoonbox/packages after every apt
// run, and at every desktop start installs the listed packages this machine
// lacks.
//
// Contract: Packages (spec/000, "Guest (image) ↔ agent"):
// ~/.config/cocoonbox/packages holds one package per line, the packages
// marked manual beyond /etc/cocoonbox/packages.baseline (the image's
// apt-mark showmanual). An apt DPkg::Post-Invoke hook rewrites it as user
// after every apt run; cocoonbox-packages.service installs the listed
// packages this machine lacks, checking with dpkg-query alone and running
// apt-get update only when something is missing.
//
// The list is user-controlled input that ends up on a root apt-get command
// line, so every line is validated (Parse) before anything uses it.
package packages

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxLineLen is the longest line, in bytes, Parse considers; a longer line
// is refused whole. Debian package names are far shorter (the longest in
// bookworm has about 70 characters), so 256 leaves room for an arch suffix.
const MaxLineLen = 256

// MaxListSize is the largest list file, in bytes, Parse reads; a larger one
// is refused whole (ErrTooLarge), since no real package list comes close.
const MaxListSize = 1 << 20

// ErrTooLarge reports a list longer than MaxListSize.
var ErrTooLarge = fmt.Errorf("package list is larger than %d bytes", MaxListSize)

// Refusal is one line of a list that is not a package name. Line counts
// from 1; Text is the line as found, cut to 64 bytes and Go-quoted, fit for
// a log; Reason names the rule the line broke.
type Refusal struct {
	Line   int
	Text   string
	Reason string
}

// Error is the one-line message an admin reads in the journal.
func (r Refusal) Error() string {
	return fmt.Sprintf("line %d %s refused: %s", r.Line, r.Text, r.Reason)
}

// List is a parsed package list: the valid names in file order without
// duplicates, and the refused lines.
type List struct {
	Names   []string
	Refused []Refusal
}

// Parse reads a package list: one package a line, each a Debian package
// name (Debian policy 5.6.1: lower-case letters, digits, '+', '-' and '.',
// at least two characters, starting with a letter or digit) with an
// optional ":arch" (lower-case letters, digits and '-', e.g. amd64, i386,
// all). Spaces, tabs and a CR around a name are dropped. Every other line
// (empty, an option such as "-oAPT::Get::Foo=1", a shell line, one longer
// than MaxLineLen) is refused and reported in List.Refused; the valid lines
// go on. The error is non-nil only when r fails or holds more than
// MaxListSize bytes; the List is then empty.
func Parse(r io.Reader) (List, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, MaxListSize+1), 4096)
	var (
		list  List
		seen  = map[string]bool{}
		read  int
		n     int
		long  bool // the current line passed MaxLineLen
		piece []byte
	)
	for {
		chunk, err := br.ReadSlice('\n')
		read += len(chunk)
		if read > MaxListSize {
			return List{}, ErrTooLarge
		}
		ended := err == nil // chunk ends with '\n'
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) && !errors.Is(err, io.EOF) {
			return List{}, fmt.Errorf("reading the package list: %w", err)
		}
		content := chunk
		if ended {
			content = chunk[:len(chunk)-1]
		}
		if !long {
			if len(piece)+len(content) > MaxLineLen {
				long = true
				piece = append(piece, content[:min(len(content), 64)]...)
			} else {
				piece = append(piece, content...)
			}
		}
		if ended || (errors.Is(err, io.EOF) && (len(piece) > 0 || long)) {
			n++
			line := piece
			if long {
				list.Refused = append(list.Refused, Refusal{n, quote(line), fmt.Sprintf("longer than %d bytes", MaxLineLen)})
			} else if name, reason := check(string(line)); reason != "" {
				list.Refused = append(list.Refused, Refusal{n, quote(line), reason})
			} else if !seen[name] {
				seen[name] = true
				list.Names = append(list.Names, name)
			}
			piece, long = piece[:0], false
		}
		if errors.Is(err, io.EOF) {
			return list, nil
		}
	}
}

// ValidName reports whether s, exactly as given, is a package name with an
// optional ":arch" that Parse accepts; the error names the rule s broke.
func ValidName(s string) error {
	if len(s) > MaxLineLen {
		return fmt.Errorf("%s is not a package name: longer than %d bytes", quote([]byte(s)), MaxLineLen)
	}
	name, reason := check(s)
	if reason == "" && name != s {
		reason = "surrounded by white space"
	}
	if reason != "" {
		return fmt.Errorf("%s is not a package name: %s", quote([]byte(s)), reason)
	}
	return nil
}

// check validates one line and returns the name it holds, or why not.
func check(line string) (string, string) {
	s := strings.Trim(line, " \t\r")
	switch {
	case s == "":
		return "", "empty line (one package name a line)"
	case s[0] == '-':
		return "", "looks like an option (a package name starts with a lower-case letter or digit)"
	}
	name, arch, qualified := strings.Cut(s, ":")
	if r := checkName(name); r != "" {
		return "", r
	}
	if qualified {
		if r := checkArch(arch); r != "" {
			return "", r
		}
	}
	return s, ""
}

func checkName(name string) string {
	if len(name) < 2 {
		return "not a package name (Debian policy: at least two characters)"
	}
	if !isLowerAlnum(name[0]) {
		return "not a package name (Debian policy: it starts with a lower-case letter or digit)"
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !isLowerAlnum(c) && c != '+' && c != '-' && c != '.' {
			return fmt.Sprintf("not a package name (Debian policy: only a-z, 0-9, '+', '-' and '.'; found %s at byte %d)", quoteByte(c), i+1)
		}
	}
	return ""
}

func checkArch(arch string) string {
	if arch == "" || !isLowerAlnum(arch[0]) {
		return "not a package name (the architecture after ':' starts with a lower-case letter or digit)"
	}
	for i := 1; i < len(arch); i++ {
		if c := arch[i]; !isLowerAlnum(c) && c != '-' {
			return fmt.Sprintf("not a package name (an architecture has only a-z, 0-9 and '-'; found %s)", quoteByte(c))
		}
	}
	return ""
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func quoteByte(c byte) string { return strconv.Quote(string([]byte{c})) }

// quote renders a line for a log: Go-quoted, cut to 64 bytes.
func quote(b []byte) string {
	if len(b) > 64 {
		return strconv.Quote(string(b[:64])) + "..."
	}
	return strconv.Quote(string(b))
}
