package signin

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/client"
)

// RFC 7636 Appendix B's example pair.
const (
	rfcVerifier  = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	rfcChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
)

func TestS256MatchesRFC7636AppendixB(t *testing.T) {
	if got := client.S256(rfcVerifier); got != rfcChallenge {
		t.Fatalf("S256(%q) = %q, want %q", rfcVerifier, got, rfcChallenge)
	}
	if err := VerifyPKCE(rfcChallenge, rfcVerifier); err != nil {
		t.Fatalf("VerifyPKCE of the RFC's pair: %v", err)
	}
	if err := CheckChallenge(rfcChallenge); err != nil {
		t.Fatalf("CheckChallenge of the RFC's challenge: %v", err)
	}
}

// Bad input: a 42-character verifier.
func TestVerifierOf42CharactersRefused(t *testing.T) {
	v := rfcVerifier[:42]
	if err := VerifyPKCE(client.S256(v), v); err == nil {
		t.Fatal("a 42-character verifier was accepted")
	}
	if err := CheckVerifier(strings.Repeat("a", 43)); err != nil {
		t.Fatalf("43 characters refused: %v", err)
	}
	if err := CheckVerifier(strings.Repeat("a", 128)); err != nil {
		t.Fatalf("128 characters refused: %v", err)
	}
	if err := CheckVerifier(strings.Repeat("a", 129)); err == nil {
		t.Fatal("129 characters accepted")
	}
	if err := CheckVerifier(strings.Repeat("a", 42) + "+"); err == nil {
		t.Fatal("a verifier with '+' accepted")
	}
}

func TestVerifierMismatchRefused(t *testing.T) {
	other := strings.Repeat("x", 43)
	if err := VerifyPKCE(rfcChallenge, other); err == nil {
		t.Fatal("a verifier of another challenge was accepted")
	}
	// The plain method: the challenge is the verifier itself. Never accepted.
	if err := VerifyPKCE(other, other); err == nil {
		t.Fatal("a plain challenge (the verifier itself) was accepted")
	}
}

func TestChallengeShape(t *testing.T) {
	for _, bad := range []string{"", rfcChallenge[:42], rfcChallenge + "A", rfcChallenge[:42] + "=", strings.Repeat("+", 43),
		// Go's base64 decoder skips line breaks even in Strict mode: these decoded.
		rfcChallenge[:20] + "\n" + rfcChallenge[20:], rfcChallenge + "\r\n", rfcChallenge[:42] + "\n", rfcChallenge[:21] + "." + rfcChallenge[22:]} {
		if err := CheckChallenge(bad); err == nil {
			t.Errorf("CheckChallenge(%q) accepted", bad)
		}
	}
}
