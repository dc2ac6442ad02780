package vault

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// cliHint is a rule's aside for the CLI ("(--host)", "(on stdin or at the
// prompt)"), which a person on the console's form has no use for.
var cliHint = regexp.MustCompile(`\s*\([^)]*(--|stdin)[^)]*\)`)

var hostField = regexp.MustCompile(`^hosts\[(\d+)\]$`)

// plainRule is the console's answer to a refused field: the request's
// field name ("hosts" for "hosts[2]") and a sentence a person reads
// beside it, naming the field as the form does.
func plainRule(e *InputError) (field, message string) {
	field = e.Field
	label := map[string]string{"name": "Name", "hosts": "Hosts", "header": "Header", "template": "Template",
		"query": "Query parameter", "value": "Value", "key": "Key"}[e.Field]
	if m := hostField.FindStringSubmatch(e.Field); m != nil {
		n, _ := strconv.Atoi(m[1])
		field, label = "hosts", fmt.Sprintf("Host %d", n+1)
	}
	if label == "" {
		label = e.Field
	}
	rule := cliHint.ReplaceAllString(e.Rule, "")
	name, isName := strings.CutSuffix(rule, " must be 1 to 64 of A-Za-z0-9_-")
	size, isLong := strings.CutSuffix(rule, fmt.Sprintf(", longer than %d (8 KiB)", MaxValueLen))
	switch {
	case e.Field == "name" && isName:
		return field, "Name: use 1 to 64 of the letters A to Z and a to z, the digits, _ and -; " + name + " has others."
	case e.Field == "value" && isLong:
		return field, fmt.Sprintf("Value: too long. A key's value is at most %d bytes (8 KiB); this one is %s.", MaxValueLen, size)
	}
	return field, label + ": " + rule + "."
}
