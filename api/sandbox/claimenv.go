package sandbox

import (
	"fmt"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/vault"
	"github.com/cocoonbox/cocoonbox/guest/vault/envfile"

	"github.com/cocoonbox/cocoonbox/internal/hostname"
)

// ClaimEnvPath is where the guest-visible claim env entries land in a box
// (Contract: Box API keys); cocoonbox-vault.path watches it.
const ClaimEnvPath = "/run/silkd.env"

// CheckClaimEnv checks a whole set of entries: names are variable names,
// each once; a guest entry has no hosts and, for COCOONBOX_VAULT and
// COCOONBOX_CONNECT, holds only records guest/vault accepts; a host entry's
// hosts and how are what a guest/vault record allows.
func CheckClaimEnv(entries []ClaimEntry) error {
	seen := map[string]bool{}
	for i, e := range entries {
		field := fmt.Sprintf("claim_env[%d]", i)
		if !envfile.ValidName(e.Name) {
			return Invalid(field+".name", "%q must be a variable name, [A-Za-z_][A-Za-z0-9_]*", e.Name)
		}
		if seen[e.Name] {
			return Invalid(field+".name", "%s is set twice", e.Name)
		}
		seen[e.Name] = true
		if strings.IndexByte(e.Value, 0) >= 0 {
			return Invalid(field+".value", "%s holds a NUL byte", e.Name)
		}
		if e.Guest {
			if len(e.Hosts) > 0 || e.How != "" {
				return Invalid(field, "%s is guest-visible: hosts and how belong to host-only entries", e.Name)
			}
			if err := checkRecords(field, e); err != nil {
				return err
			}
			continue
		}
		if err := checkHostEntry(field, e); err != nil {
			return err
		}
	}
	return nil
}

// checkRecords lets guest/vault judge the record lists it will render.
func checkRecords(field string, e ClaimEntry) error {
	for _, src := range vault.Sources {
		if e.Name != string(src) {
			continue
		}
		rs := &vault.Records{}
		rs.Add(src, e.Value)
		if len(rs.Rejected) > 0 {
			r := rs.Rejected[0]
			return Invalid(field+".value", "%s record %d (%s): %s", e.Name, r.Position, r.Name, r.Rule)
		}
	}
	return nil
}

// checkHostEntry checks hosts and how as guest/vault checks a record's, by
// asking it about the record they would make.
func checkHostEntry(field string, e ClaimEntry) error {
	if len(e.Hosts) == 0 {
		if e.How != "" {
			return Invalid(field+".how", "%s has a how but no hosts", e.Name)
		}
		return nil
	}
	for _, h := range e.Hosts {
		if !hostname.Valid(h) {
			return Invalid(field+".hosts", "%s: %q is not a DNS host name", e.Name, h)
		}
	}
	probe := fmt.Sprintf("%s=p;%s;%s", e.Name, strings.Join(e.Hosts, ","), e.How)
	if _, err := vault.ParseRecord(probe); err != nil {
		return Invalid(field+".how", "%s: %v", e.Name, err)
	}
	return nil
}

// RenderClaimEnv is the /run/silkd.env of a set of entries: the guest
// entries in the given order, one NAME="value" a line in systemd's
// environment file syntax (guest/vault/envfile reads it back unchanged).
// Host-only entries are never in it.
func RenderClaimEnv(entries []ClaimEntry) []byte {
	var b strings.Builder
	for _, e := range entries {
		if e.Guest {
			b.WriteString(e.Name + "=" + envfile.Quote(e.Value) + "\n")
		}
	}
	return []byte(b.String())
}
