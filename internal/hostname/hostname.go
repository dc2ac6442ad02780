// Package hostname is the one DNS host name rule of the vault's hosts
// (Contract: Box API keys): the box's record parser (guest/vault), the
// api's key checks and the CLI's (api/client) and the api's configuration
// all judge a host with it, so a host one side takes the other does too.
package hostname

// labelByte holds the bytes of a label: A-Za-z0-9 and '-'. A table, not a
// regexp: guest/vault checks every host of every record on a hot path.
var labelByte = func() (t [256]bool) {
	for _, r := range "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-" {
		t[r] = true
	}
	return t
}()

// Rule is what Valid checks, as a refusal states it.
const Rule = "a DNS host name: labels of A-Za-z0-9-, each 1 to 63 bytes and not starting or ending with '-', 253 bytes at most"

// Valid says whether h is a DNS host name (Rule), with no trailing dot.
func Valid(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	start := 0
	for i := 0; i <= len(h); i++ {
		if i < len(h) && h[i] != '.' {
			if !labelByte[h[i]] {
				return false
			}
			continue
		}
		label := h[start:i]
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		start = i + 1
	}
	return true
}
