package signup

import (
	"errors"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestCleanLogin(t *testing.T) {
	for login, want := range map[string]string{
		"octocat":                 "octocat",
		"OctoCat":                 "octocat",
		"mona-lisa":               "mona-lisa",
		"a_b":                     "a_b",
		"-lead":                   "lead",
		"_emu_user":               "emu_user",
		"trail-":                  "trail",
		"dots.and spaces":         "dots-and-spaces",
		"Ünïcode":                 "n-code",
		"admin2":                  "admin2",
		strings.Repeat("x", 39):   strings.Repeat("x", MaxCleanName),
		strings.Repeat("ab-", 20): "ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab-ab",
		"ADMIN-":                  "",
		"":                        "",
		"---":                     "",
		"...":                     "",
		"éé":                      "",
		"Root":                    "",
		"cocoonbox":               "",
	} {
		got, err := CleanLogin(login)
		if want == "" {
			if !errors.Is(err, ErrEmptyName) && !errors.Is(err, ErrReservedName) {
				t.Errorf("CleanLogin(%q) = %q, %v; want ErrEmptyName or ErrReservedName", login, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("CleanLogin(%q) = %q, %v; want %q", login, got, err, want)
			continue
		}
		if err := users.CheckName(got + "-999"); err != nil {
			t.Errorf("CleanLogin(%q) = %q: with a suffix it breaks the grammar: %v", login, got, err)
		}
	}
	if _, err := CleanLogin("---"); !errors.Is(err, ErrEmptyName) {
		t.Errorf("---: %v, want ErrEmptyName", err)
	}
	if _, err := CleanLogin("Admin"); !errors.Is(err, ErrReservedName) {
		t.Errorf("Admin: %v, want ErrReservedName", err)
	}
}
