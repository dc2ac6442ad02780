package vault

import "strings"

// vendorPrefixes are the key prefixes a placeholder keeps (Contract: Key
// vault: "a vendor prefix of the value (such as sk-proj- or ghp_)"), so a
// tool that checks a key's form before sending it (an SDK that wants
// sk-ant-, a linter that looks for ghp_) takes the placeholder. The
// longest match wins (sk-proj- before sk-). A value that starts with none
// gets no prefix: guessing one from its first bytes would copy part of a
// secret into the box.
var vendorPrefixes = []string{
	"sk-proj-", "sk-svcacct-", "sk-admin-", "sk-ant-", "sk-or-", "sk-", // OpenAI, Anthropic, OpenRouter
	"sk_live_", "sk_test_", "rk_live_", "rk_test_", // Stripe
	"github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", // GitHub
	"glpat-",                           // GitLab
	"xoxb-", "xoxp-", "xoxa-", "xapp-", // Slack
	"AIza",     // Google
	"hf_",      // Hugging Face
	"gsk_",     // Groq
	"pplx-",    // Perplexity
	"npm_",     // npm
	"pypi-",    // PyPI
	"dop_v1_",  // DigitalOcean
	"lin_api_", // Linear
	"r8_",      // Replicate
}

// VendorPrefix is the vendorPrefixes entry value starts with, longest
// first, or "".
func VendorPrefix(value string) string {
	best := ""
	for _, p := range vendorPrefixes {
		if len(p) > len(best) && strings.HasPrefix(value, p) {
			best = p
		}
	}
	return best
}

// Placeholder is what a box holds for key id (32 hex digits) whose value
// starts with prefix (VendorPrefix): prefix, "cbv_", id. It is fixed when
// the key is added: a rotation keeps it, whatever the new value starts
// with, so a box's files and running programs stay right.
func Placeholder(prefix, id string) string { return prefix + "cbv_" + id }
