package local

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/egress"
	"github.com/cocoonbox/cocoonbox/guest/vault"
	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// The pool CA's files under StateDir: the certificate every box trusts
// and its key, which never leaves the host (0600).
const (
	caCertFile = "egress-ca.crt"
	caKeyFile  = "egress-ca.key"
)

// Where a box finds the pool CA (bound read-only at boot, docs/boxes.md,
// "The local supervisor"): the certificate alone, where Debian's update-ca-certificates
// looks for local CAs, and the image's system bundle with it appended,
// which the runtimes' variables name.
const (
	BoxCAFile     = "/usr/local/share/ca-certificates/cocoonbox-pool.crt"
	BoxCABundle   = "/etc/cocoonbox/ca-bundle.crt"
	imageCABundle = "etc/ssl/certs/ca-certificates.crt"
)

// loadCA reads the pool CA under dir, making it at the first start (the
// key written first: a start that finds a key without its certificate
// makes both again). A file that is there but unreadable refuses the
// start naming it: a box trusting a lost CA would fail every listed host.
func loadCA(dir string) (*egress.CA, []byte, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if errors.Is(cerr, fs.ErrNotExist) {
		var err error
		if certPEM, keyPEM, err = egress.NewCAPEM(); err != nil {
			return nil, nil, err
		}
		if err := durable.WriteFile(keyPath, keyPEM, 0o600); err != nil {
			return nil, nil, fmt.Errorf("egress CA key %s: %w", keyPath, err)
		}
		if err := durable.WriteFile(certPath, certPEM, 0o644); err != nil {
			return nil, nil, fmt.Errorf("egress CA %s: %w", certPath, err)
		}
	} else if cerr != nil {
		return nil, nil, fmt.Errorf("egress CA %s: %w", certPath, cerr)
	} else if kerr != nil {
		return nil, nil, fmt.Errorf("egress CA key %s: %w", keyPath, kerr)
	}
	ca, err := egress.ParseCA(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s and %s: %w", certPath, keyPath, err)
	}
	return ca, certPEM, nil
}

// caFiles are the box's files of the pool CA; the bundle is the image's
// own (root is the image's root directory) with the pool CA appended.
func (s *Supervisor) caFiles(root string) (map[string]string, error) {
	system, err := os.ReadFile(filepath.Join(root, imageCABundle))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if len(system) > 0 && !bytes.HasSuffix(system, []byte("\n")) {
		system = append(system, '\n')
	}
	return map[string]string{
		BoxCAFile:   string(s.caPEM),
		BoxCABundle: string(system) + string(s.caPEM),
	}, nil
}

// caVars point the usual runtimes at the pool CA: OpenSSL (curl, Python's
// ssl, Go), curl, requests, git (libcurl-gnutls reads no SSL_CERT_FILE)
// and Node (the claude and codex CLIs), which adds it to its own roots.
func caVars() string {
	return fmt.Sprintf("SSL_CERT_FILE=%[1]s CURL_CA_BUNDLE=%[1]s REQUESTS_CA_BUNDLE=%[1]s GIT_SSL_CAINFO=%[1]s NODE_EXTRA_CA_CERTS=%[2]s", BoxCABundle, BoxCAFile)
}

// injectionsOf are the egress proxy's view of a set of claim env entries:
// each host-only CBV_<id> entry with its hosts and value, and the
// placeholder and how (decoded) of the COCOONBOX_VAULT record ending in
// cbv_<id> (an entry no record names is left out: the box holds nothing
// to swap).
func injectionsOf(entries []sandbox.ClaimEntry) []egress.Injection {
	var rs vault.Records
	for _, e := range entries {
		if e.Guest && e.Name == string(vault.SourceVault) {
			rs.Add(vault.SourceVault, e.Value)
		}
	}
	var out []egress.Injection
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name, "CBV_")
		if e.Guest || !ok || len(e.Hosts) == 0 {
			continue
		}
		for _, r := range rs.Accepted {
			if strings.HasSuffix(r.Placeholder, "cbv_"+strings.ToLower(id)) {
				out = append(out, egress.Injection{Placeholder: r.Placeholder, Value: e.Value, Hosts: e.Hosts, How: r.How})
				break
			}
		}
	}
	return out
}

// injections answers the proxy for the box at a bridge address, from the
// machine's snapshot (never the op lock: a CONNECT must not wait behind a
// Save or a Boot).
func (s *Supervisor) injections(box netip.Addr) []egress.Injection {
	m := s.machineAt(box)
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inject
}

// machineAt is the machine at a bridge address, or nil.
func (s *Supervisor) machineAt(box netip.Addr) *machine {
	gw := s.cfg.Network.Gateway
	if !box.Is4() || !gw.Contains(box) {
		return nil
	}
	off := int(u32(box) - u32(gw.Masked().Addr()))
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[s.addrs[off]]
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
