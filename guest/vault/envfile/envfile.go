// Package envfile reads files in the syntax systemd's EnvironmentFile=
// reads, as systemd 252 (Debian 12) does: load_env_file() in
// src/basic/env-file.c followed by the clean-up of exec_context_load_environment()
// in src/core/execute.c. It reads; it never evaluates anything: no
// variable is expanded, no command substituted.
//
// Contract: Box API keys (the vault reads /run/silkd.env, one NAME=value a
// line, in this syntax).
//
// The syntax, byte by byte (a state machine, as systemd's):
//
//   - Blank space before a name is skipped (space, tab, CR, LF).
//   - A line whose first non-blank byte is '#' or ';' is a comment up to
//     the next CR or LF. In systemd 252 a backslash in a comment escapes the
//     next byte, so a comment that ends in '\' goes on over the next line
//     (systemd 254 changed that; this package follows 252).
//   - A name runs up to '='; trailing blanks of the name are dropped. A line
//     without '=' is ignored.
//   - After '=', blanks are skipped. Then, any mix of:
//     'single quoted' text (taken as is, newlines included, no escapes);
//     "double quoted" text, where \" \\ \` \$ stand for the second byte,
//     backslash-newline is dropped (a continuation), and any other \x is
//     kept as the two bytes \x; and bare text, where \x stands for x and
//     backslash-newline is dropped (a continuation line). Blanks between a
//     closing quote and what follows are dropped; in bare text they are
//     kept, except trailing ones at the end of the line. Quotes are only
//     special at the start of a value or right after a closing quote: in
//     bare text a quote is an ordinary byte.
//   - A value ends at an unquoted, unescaped CR or LF, or at the end of the
//     file (an unterminated quote at the end of the file ends the value
//     there, as in systemd).
//   - When a name appears twice, the later value wins.
//   - An assignment whose name is not [A-Za-z_][A-Za-z0-9_]* is dropped, as
//     systemd drops it (with a log line).
//   - A name or value that is not valid UTF-8 makes systemd refuse the whole
//     file; Parse does too.
//
// One deliberate difference: systemd stops reading at a NUL byte (C
// strings) and silently ignores the rest; Parse refuses a file with a NUL
// byte, since such a file is not what its writer meant.
package envfile

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Entry is one assignment of the file.
type Entry struct {
	// Name is the variable's name, [A-Za-z_][A-Za-z0-9_]*.
	Name string
	// Value is the value after quotes and escapes are resolved.
	Value string
	// Line is the 1-based line of the file the assignment starts on.
	Line int
}

// File is a parsed environment file.
type File struct {
	// Entries are the assignments in file order, each name once: a later
	// assignment of a name replaces the earlier one in place.
	Entries []Entry
	// Dropped are assignments whose name is not a valid variable name, in
	// file order; systemd ignores them too.
	Dropped []Entry
}

// Lookup returns the value of name and whether the file assigns it.
func (f *File) Lookup(name string) (string, bool) {
	for _, e := range f.Entries {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// Error is a file that cannot be read as an environment file.
type Error struct {
	Line int
	Rule string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Rule) }

const (
	whitespace = " \t\n\r"
	newline    = "\n\r"
	comments   = "#;"
	// shellNeedEscape are the bytes a backslash escapes inside double quotes.
	shellNeedEscape = "\"\\`$"
)

type state int

const (
	preKey state = iota
	key
	preValue
	value
	valueEscape
	singleQuote
	doubleQuote
	doubleQuoteEscape
	comment
	commentEscape
)

// Parse reads the contents of an environment file. The error, an *Error,
// names the line and the rule broken: a NUL byte, or a name or value that
// is not valid UTF-8.
func Parse(data []byte) (*File, error) {
	f := &File{}
	index := map[string]int{}
	var k, v []byte
	line := 1      // the physical line of the byte being read
	startLine := 1 // the line the current assignment started on
	lastKeyWS, lastValueWS := -1, -1
	st := preKey

	push := func() error {
		name := string(k)
		if lastKeyWS >= 0 {
			name = string(k[:lastKeyWS])
		}
		val := string(v)
		if !utf8.ValidString(name) {
			return &Error{startLine, "the name is not valid UTF-8"}
		}
		if !utf8.ValidString(val) {
			return &Error{startLine, fmt.Sprintf("the value of %s is not valid UTF-8", name)}
		}
		e := Entry{Name: name, Value: val, Line: startLine}
		if !ValidName(name) {
			f.Dropped = append(f.Dropped, e)
		} else if i, ok := index[name]; ok {
			f.Entries[i] = e
		} else {
			index[name] = len(f.Entries)
			f.Entries = append(f.Entries, e)
		}
		k, v = k[:0], nil
		return nil
	}

	for _, c := range data {
		if c == 0 {
			return nil, &Error{line, "a NUL byte (systemd would ignore the rest of the file)"}
		}
		switch st {
		case preKey:
			if strings.IndexByte(comments, c) >= 0 {
				st = comment
			} else if strings.IndexByte(whitespace, c) < 0 {
				st = key
				startLine = line
				lastKeyWS = -1
				k = append(k, c)
			}
		case key:
			switch {
			case strings.IndexByte(newline, c) >= 0:
				st = preKey
				k = k[:0]
			case c == '=':
				st = preValue
				lastValueWS = -1
			default:
				if strings.IndexByte(whitespace, c) < 0 {
					lastKeyWS = -1
				} else if lastKeyWS < 0 {
					lastKeyWS = len(k)
				}
				k = append(k, c)
			}
		case preValue:
			switch {
			case strings.IndexByte(newline, c) >= 0:
				st = preKey
				if err := push(); err != nil {
					return nil, err
				}
			case c == '\'':
				st = singleQuote
			case c == '"':
				st = doubleQuote
			case c == '\\':
				st = valueEscape
			case strings.IndexByte(whitespace, c) < 0:
				st = value
				v = append(v, c)
			}
		case value:
			switch {
			case strings.IndexByte(newline, c) >= 0:
				st = preKey
				if lastValueWS >= 0 {
					v = v[:lastValueWS]
				}
				if err := push(); err != nil {
					return nil, err
				}
			case c == '\\':
				st = valueEscape
				lastValueWS = -1
			default:
				if strings.IndexByte(whitespace, c) < 0 {
					lastValueWS = -1
				} else if lastValueWS < 0 {
					lastValueWS = len(v)
				}
				v = append(v, c)
			}
		case valueEscape:
			st = value
			if strings.IndexByte(newline, c) < 0 {
				v = append(v, c)
			}
		case singleQuote:
			if c == '\'' {
				st = preValue
			} else {
				v = append(v, c)
			}
		case doubleQuote:
			switch c {
			case '"':
				st = preValue
			case '\\':
				st = doubleQuoteEscape
			default:
				v = append(v, c)
			}
		case doubleQuoteEscape:
			st = doubleQuote
			if strings.IndexByte(shellNeedEscape, c) >= 0 {
				v = append(v, c)
			} else if c != '\n' {
				v = append(v, '\\', c)
			}
		case comment:
			if c == '\\' {
				st = commentEscape
			} else if strings.IndexByte(newline, c) >= 0 {
				st = preKey
			}
		case commentEscape:
			// systemd 252: the escaped byte, even a newline, stays in the comment.
			st = comment
		}
		if c == '\n' {
			line++
		}
	}
	switch st {
	case preValue, value, valueEscape, singleQuote, doubleQuote, doubleQuoteEscape:
		if st == value && lastValueWS >= 0 {
			v = v[:lastValueWS]
		}
		if err := push(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// ValidName says whether name is a variable name systemd keeps from an
// environment file: [A-Za-z_][A-Za-z0-9_]* (bash's rule).
func ValidName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Quote writes value so that Parse reads it back unchanged: in double
// quotes, with ", \, ` and $ escaped. Use it to write an environment file
// (tests, the demo).
func Quote(value string) string {
	var b strings.Builder
	b.Grow(len(value) + 2)
	b.WriteByte('"')
	for i := 0; i < len(value); i++ {
		if strings.IndexByte(shellNeedEscape, value[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(value[i])
	}
	b.WriteByte('"')
	return b.String()
}
