package branchbox

import "regexp"

// requestIDRe is a request id (the request envelope's request_id): it
// names <request_id>.json in a spool's requests/ and responses/ and the
// replay record, so it is one safe file-name component.
var requestIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ValidRequestID reports whether id is a request id:
// [A-Za-z0-9][A-Za-z0-9_.-]{0,127}.
func ValidRequestID(id string) bool { return requestIDRe.MatchString(id) }

// Argument is one command-line value that becomes a path or a name, and
// which of the manifest's fields it stands for.
type Argument struct {
	// Flag is how the command line gave it ("--run", "NAME").
	Flag string
	// Field is the manifest field whose grammar it must meet: "run_id",
	// "feature", "lease_id", "request_id", "consumer", "executable" or
	// "environment_name".
	Field string
	Value string
}

// argumentGrammar is each field's grammar, the one Validate holds the
// assignment to (and envelope the request), so the command line and the
// file can never disagree on what a name is.
var argumentGrammar = map[string]*regexp.Regexp{
	"run_id":     runIDRe,
	"feature":    runIDRe,
	"lease_id":   leaseIDRe,
	"request_id": requestIDRe,
	"consumer":   consumerRe,
	"executable": executableRe,
}

// CheckArguments holds each argument to its field's grammar (One boundary:
// a command checks every path or name it is given once, where its command
// line is parsed, before any file is opened). Errors: the first argument
// that does not match, as a *RuleError of rule field-syntax naming the
// flag, the value and the grammar (never retryable: a retry gives the
// same value).
func CheckArguments(args ...Argument) error {
	for _, a := range args {
		if a.Field == "environment_name" {
			if reason := CheckEnvironmentName(a.Value); reason != "" {
				return Refuse(RuleEnvironmentName, a.Flag, "%q %s", a.Value, reason)
			}
			continue
		}
		re, ok := argumentGrammar[a.Field]
		if !ok {
			panic("branchbox: no grammar for field " + a.Field)
		}
		if !re.MatchString(a.Value) {
			return Refuse(RuleSyntax, a.Flag, "%q is not a %s: it must match %s", a.Value, a.Field, re)
		}
	}
	return nil
}
