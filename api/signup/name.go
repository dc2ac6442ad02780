package signup

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of CleanLogin.
var (
	ErrEmptyName    = errors.New("the GitHub login leaves no user name")
	ErrReservedName = errors.New("the GitHub login cleans to a reserved user name")
)

// MaxCleanName is the longest name CleanLogin answers: the user name
// grammar's 39 less room for a clash suffix up to "-999".
const MaxCleanName = 35

// reserved are names no signup account gets: they would pass for the
// service or its operators in a list or a log.
var reserved = map[string]bool{
	"admin": true, "administrator": true, "root": true, "cocoonbox": true, "system": true,
	"support": true, "security": true, "staff": true, "operator": true, "api": true,
	"www": true, "nobody": true, "null": true, "help": true, "abuse": true, "postmaster": true,
}

// Reserved reports whether name is one no signup account gets.
func Reserved(name string) bool { return reserved[name] }

// CleanLogin turns a GitHub login into a user name (users.CheckName's
// grammar): lowercased; every run of characters outside a-z, 0-9, '-' and
// '_' becomes one '-'; leading '-' and '_' go, and so do trailing '-';
// at most MaxCleanName characters. ErrEmptyName when nothing is left,
// ErrReservedName for a reserved name (the caller decides what such a
// person gets; the clash suffixes -2, -3, ... are the caller's too).
func CleanLogin(login string) (string, error) {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(login) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
			dash = false
		default:
			if !dash {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	name := strings.TrimLeft(b.String(), "-_")
	if len(name) > MaxCleanName {
		name = name[:MaxCleanName]
	}
	name = strings.TrimRight(name, "-")
	if name == "" {
		return "", fmt.Errorf("%w: %q", ErrEmptyName, login)
	}
	if Reserved(name) {
		return "", fmt.Errorf("%w: %q is %q", ErrReservedName, login, name)
	}
	return name, nil
}
