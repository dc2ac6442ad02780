package vault

import (
	"strings"

	"github.com/cocoonbox/cocoonbox/api/client"
	gvault "github.com/cocoonbox/cocoonbox/guest/vault"
)

// The grammar of a key is api/client's, which the CLI checks with before
// any call: the names below are its, so that the vault's callers and the
// console's answers read as before.

// ErrInvalid marks bad input; an *InputError says which field and rule.
var ErrInvalid = client.ErrInvalid

// InputError is a field of a request that breaks a rule.
type InputError = client.InputError

// MaxValueLen is the longest value, in bytes (8 KiB).
const MaxValueLen = client.MaxKeyValue

// Spec is how a key is sent: its hosts and a header with a template, or a
// query parameter (client.KeySpec, checked by its How).
type Spec = client.KeySpec

// render is the value as sent: the template with the value in place of {}
// for a header (the header's whole value), the value itself for a query.
func render(how, value string) string {
	if strings.HasPrefix(how, "?") {
		return value
	}
	_, tmpl, _ := strings.Cut(how, ": ")
	return strings.Replace(tmpl, "{}", value, 1)
}

// encodeHow writes how for a record: %, space and ; as %25, %20 and %3B
// (Contract: Box API keys).
func encodeHow(how string) string {
	return strings.NewReplacer("%", "%25", " ", "%20", ";", "%3B").Replace(how)
}

// Record is the guest record of a key (Contract: Box API keys):
// NAME=placeholder;host,host;how.
func Record(name, placeholder string, hosts []string, how string) string {
	return name + "=" + placeholder + ";" + strings.Join(hosts, ",") + ";" + encodeHow(how)
}

// checkRecord lets guest/vault judge the record a key makes: a NAME the
// box's shells give a meaning to (PATH, LD_*) or a how it refuses would
// be skipped in the box, so it is refused here.
func checkRecord(name, placeholder string, hosts []string, how string) error {
	if _, err := gvault.ParseRecord(Record(name, placeholder, hosts, how)); err != nil {
		return &InputError{Field: "key", Rule: "the box would refuse this key: " + err.Error()}
	}
	return nil
}
