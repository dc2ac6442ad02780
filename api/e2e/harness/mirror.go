package harness

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox/egress"
)

// MirrorAdmit is what a test's or the demo's egress proxy must admit for
// apt in a box of the image root to reach its mirrors: each address this
// host resolves the hosts of the image's apt sources to (etc/apt/
// sources.list, sources.list.d/*.list and *.sources) that the proxy would
// refuse (not egress.Public), as a /32 or /128, sorted. On this project's
// machines and CI, deb.debian.org resolves to 203.0.113.80, a
// documentation address the proxy refuses since issue 24. hosts are the
// mirrors' host names read, sorted.
func MirrorAdmit(ctx context.Context, image string) (admit []netip.Prefix, hosts []string, err error) {
	files, _ := filepath.Glob(filepath.Join(image, "etc/apt/sources.list.d/*"))
	files = append([]string{filepath.Join(image, "etc/apt/sources.list")}, files...)
	for _, f := range files {
		if !strings.HasSuffix(f, "sources.list") && !strings.HasSuffix(f, ".list") && !strings.HasSuffix(f, ".sources") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			return nil, nil, err
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			for _, w := range strings.Fields(line) {
				if u, err := url.Parse(w); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() != "" && !slices.Contains(hosts, u.Hostname()) {
					hosts = append(hosts, u.Hostname())
				}
			}
		}
	}
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("%s: no http(s) mirror in the image's apt sources", image)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
		if err != nil {
			return nil, nil, fmt.Errorf("resolve the image's mirror %s: %w", h, err)
		}
		for _, a := range addrs {
			a = a.Unmap()
			if n := netip.PrefixFrom(a, a.BitLen()); !egress.Public(a) && !slices.Contains(admit, n) {
				admit = append(admit, n)
			}
		}
	}
	slices.SortFunc(admit, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return admit, hosts, nil
}
