package hostname

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for h, want := range map[string]bool{
		"api.openai.com": true, "A-1.example": true, "x": true,
		strings.Repeat("a", 63) + ".com": true,
		"":                               false, ".": false, "a..b": false, "a.": false, ".a": false, "-a.com": false, "a-.com": false,
		strings.Repeat("a", 64) + ".com": false, strings.Repeat("a.", 127) + "aa": false,
		"a_b.com": false, "a b": false, "api.openai.com:443": false, "*.example.com": false, "é.com": false,
	} {
		if got := Valid(h); got != want {
			t.Errorf("Valid(%q) = %v, want %v", h, got, want)
		}
	}
}
