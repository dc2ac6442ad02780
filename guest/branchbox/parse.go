package branchbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxAssignmentSize bounds an assignment file in bytes.
const MaxAssignmentSize = 1 << 20

// maxDepth bounds JSON nesting; the schema needs 4 levels.
const maxDepth = 16

// Options are what validation needs besides the assignment.
type Options struct {
	// Root is the BranchBox state root (default Root, /run/branchbox); the
	// run directory is Root/managed/<run_id>.
	Root string
	// Now is the time leases are checked against; zero means time.Now().
	Now time.Time
	// SkipExpiry leaves expired leases alone: only teardown uses it, so an
	// expired run can still be cleaned up.
	SkipExpiry bool
}

func (o Options) root() string {
	if o.Root == "" {
		return Root
	}
	return o.Root
}

// RunDir is the directory the assignment must be stored directly in.
func (o Options) RunDir(runID string) string { return o.root() + "/managed/" + runID }

// Parse decodes an assignment strictly and validates it (Contract: Managed
// runtime manifest v2, Security contract): at most MaxAssignmentSize
// bytes, UTF-8, one JSON object, every key known for its object and
// spelled exactly (ASCII lower case: encoding/json alone would match
// "LEASE_ID" or a Kelvin-sign "k"), no key twice, no null, nothing after
// the object; then every rule of Validate.
//
// Errors: every refusal is a *RuleError (errors.Is(err, ErrRefused)).
func Parse(data []byte, opt Options) (*Assignment, error) {
	if len(data) > MaxAssignmentSize {
		return nil, Refuse(RuleStrictJSON, "", "the assignment is %d bytes; the limit is %d", len(data), MaxAssignmentSize)
	}
	if !utf8.Valid(data) {
		return nil, Refuse(RuleStrictJSON, "", "the assignment is not valid UTF-8")
	}
	if err := checkSyntax(data); err != nil {
		return nil, err
	}
	// The version decides which rules apply: read it first, so a wrong
	// version is named as such rather than as an unknown field.
	var head struct {
		Version json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, Refuse(RuleStrictJSON, "", "%v", err)
	}
	if head.Version == nil {
		return nil, Refuse(RuleRequired, "version", "is missing")
	}
	var v string
	if err := json.Unmarshal(head.Version, &v); err != nil {
		return nil, Refuse(RuleVersion, "version", "must be a JSON string (\"1\", \"2\" or \"3\"), not %s", head.Version)
	}
	if v != "1" && v != "2" && v != "3" {
		return nil, Refuse(RuleVersion, "version", "%q is not a supported version (\"1\", \"2\", \"3\")", v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var a Assignment
	if err := dec.Decode(&a); err != nil {
		return nil, Refuse(RuleStrictJSON, decodeWhere(err), "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, Refuse(RuleStrictJSON, "", "data after the assignment object")
	}
	if err := Validate(&a, opt); err != nil {
		return nil, err
	}
	return &a, nil
}

// checkSyntax walks the tokens: one object at the top, keys of ASCII
// [a-z0-9_.-] only and written without escapes, no duplicate key in an object, no null, bounded depth,
// nothing after the top object.
func checkSyntax(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return Refuse(RuleStrictJSON, "", "not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Refuse(RuleStrictJSON, "", "the assignment must be one JSON object")
	}
	if err := walkObject(dec, data, "", 1); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Refuse(RuleStrictJSON, "", "data after the assignment object")
	}
	return nil
}

func walkObject(dec *json.Decoder, data []byte, path string, depth int) error {
	if depth > maxDepth {
		return Refuse(RuleStrictJSON, path, "nested deeper than %d", maxDepth)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Refuse(RuleStrictJSON, path, "%v", err)
		}
		key, _ := tok.(string)
		where := join(path, key)
		if !validKey(key) {
			return Refuse(RuleStrictJSON, where, "key %q is not ASCII [a-z0-9_.-]", key)
		}
		// Byte-exact: the key's bytes end where the token does, so a
		// key written with an escape ("run\u005fid") is longer there
		// than its decoded spelling between quotes.
		end := int(dec.InputOffset())
		if start := end - len(key) - 2; start < 0 || string(data[start:end]) != `"`+key+`"` {
			return Refuse(RuleStrictJSON, where, "key %q is written with an escape; keys are byte-exact", key)
		}
		if seen[key] {
			return Refuse(RuleStrictJSON, where, "duplicate key %q", key)
		}
		seen[key] = true
		if err := walkValue(dec, data, where, depth); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	if err != nil {
		return Refuse(RuleStrictJSON, path, "%v", err)
	}
	return nil
}

func walkValue(dec *json.Decoder, data []byte, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return Refuse(RuleStrictJSON, path, "%v", err)
	}
	switch t := tok.(type) {
	case nil:
		return Refuse(RuleStrictJSON, path, "null is not allowed; omit the field")
	case json.Delim:
		switch t {
		case '{':
			return walkObject(dec, data, path, depth+1)
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walkValue(dec, data, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return Refuse(RuleStrictJSON, path, "%v", err)
			}
		}
	}
	return nil
}

func validKey(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func at(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// decodeWhere names the field a decoding error is about: a value of the
// wrong type by its dotted path, an unknown field by its key (encoding/json
// gives no path for it); "" when it is about the whole document.
func decodeWhere(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	if k, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return strings.Trim(k, `"`)
	}
	return ""
}
