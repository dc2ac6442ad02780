package packer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// Finding is one preflight finding (Contract: Offload, Preflight), the
// record begin's findings are too.
type Finding = offload.Finding

// The outcomes (offload.Block, Warn, Confirm).
const (
	Block   = offload.Block
	Warn    = offload.Warn
	Confirm = offload.Confirm
)

// MinImage is the oldest box image an offload runs on, cbdesk:v22.
const MinImage = 22

// SizeLimit is the rsync dry run's transfer size above which the user
// confirms, 500 MB.
const SizeLimit = 500 * 1000 * 1000

var imageRe = regexp.MustCompile(`^cbdesk:v([0-9]+)(-[a-z0-9]+)?$`)

// ImageFinding is the block for a box older than cbdesk:v22 (image as
// Boxes.List names it, cbdesk:vN-TIER), or nil.
func ImageFinding(image string) *Finding {
	m := imageRe.FindStringSubmatch(image)
	if m != nil {
		if n, _ := strconv.Atoi(m[1]); n >= MinImage {
			return nil
		}
	}
	f := offload.Found("Box image older than cbdesk:v22", Block, fmt.Sprintf("the box runs %q: upgrade the box first", image))
	return &f
}

// SizeFinding is the confirm for a transfer over 500 MB, unless the user
// said yes for this repo before.
func SizeFinding(bytes int64, yes bool) *Finding {
	if bytes <= SizeLimit || yes {
		return nil
	}
	f := offload.Found("Size", Confirm, fmt.Sprintf("rsync would send %.0f MB (a yes is kept for this repo)", float64(bytes)/1e6))
	return &f
}

// repoFiles is what the host checks read: the tracked and untracked files
// (not ignored), the ignored ones, relative to top.
type repoFiles struct {
	top     string
	files   []string
	ignored []string
}

// listFiles asks git for both lists at once.
func listFiles(top string) (*repoFiles, error) {
	var ign []string
	var ierr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ign, ierr = gitcmd.Ignored(top)
	}()
	files, err := gitcmd.Paths(top, nil, nil, "ls-files", "-z", "-co", "--exclude-standard")
	<-done
	if err != nil {
		return nil, err
	}
	if ierr != nil {
		return nil, ierr
	}
	sort.Strings(files)
	return &repoFiles{top: top, files: files, ignored: ign}, nil
}

// HostFindings is the host half of the preflight for the repository at
// top (Contract: Offload, Preflight; each macOS probe has its Linux
// counterpart, docs/packer.md, "The Mac's paths and probes on Linux"): macOS-only work, local services, VPN-only
// hosts, secrets not opted in, LFS and submodules. optedIn are repos.json's
// secret entries of the repo.
func HostFindings(top, handover string, optedIn []string) ([]Finding, error) {
	rf, err := listFiles(top)
	if err != nil {
		return nil, err
	}
	// The checks read and run different things (files, ss, docker,
	// resolvectl and the resolver, git), so they run at once and the
	// preflight waits for the slowest, not their sum; the findings keep
	// this order.
	checks := []func() []Finding{
		func() []Finding { return appleFindings(rf, handover) },
		func() []Finding { return serviceFindings(rf) },
		func() []Finding { return vpnFindings(rf, splitDomains()) },
		func() []Finding { return secretFindings(rf, handover, optedIn) },
		func() []Finding { return carriedFindings(rf) },
	}
	found := make([][]Finding, len(checks))
	var wg sync.WaitGroup
	for i, check := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i] = check()
		}()
	}
	wg.Wait()
	var fs []Finding
	for _, f := range found {
		fs = append(fs, f...)
	}
	return fs, nil
}

var appleCommand = regexp.MustCompile("(^|[\\s;&|(`$])(xcodebuild|xcrun|security|launchctl|open)(\\s|$)")

func appleFindings(rf *repoFiles, handover string) []Finding {
	var targets []string
	for _, f := range rf.files {
		parts := strings.Split(f, "/")
		for i, p := range parts {
			if (strings.HasSuffix(p, ".xcodeproj") || strings.HasSuffix(p, ".xcworkspace")) && i < len(parts)-1 ||
				p == "fastlane" && i < len(parts)-1 {
				targets = append(targets, strings.Join(parts[:i+1], "/"))
				break
			}
		}
		switch base := path.Base(f); {
		case base == "Podfile":
			targets = append(targets, f)
		case base == "Package.swift" && appleOnlyPackage(filepath.Join(rf.top, f)):
			targets = append(targets, f+" (Apple platforms only)")
		}
	}
	targets = uniq(targets)
	for _, l := range section(handover, "## Commands") {
		if appleCommand.MatchString(l) {
			return []Finding{offload.Found("macOS-only work", Block, fmt.Sprintf("the hand-over's Commands line %q needs macOS", strings.TrimSpace(l)))}
		}
	}
	if len(targets) > 0 {
		return []Finding{offload.Found("macOS-only work", Warn, "the repository contains an Apple target: "+strings.Join(first(targets, 5), ", "))}
	}
	return nil
}

var swiftPlatform = regexp.MustCompile(`\.(macOS|iOS|tvOS|watchOS|visionOS|macCatalyst|linux|windows|android)\b`)

func appleOnlyPackage(file string) bool {
	data, err := os.ReadFile(file)
	if err != nil || !bytes.Contains(data, []byte("platforms:")) {
		return false
	}
	ps := swiftPlatform.FindAllStringSubmatch(string(data), -1)
	for _, p := range ps {
		if p[1] == "linux" || p[1] == "windows" || p[1] == "android" {
			return false
		}
	}
	return len(ps) > 0
}

// section is the lines under a hand-over heading, up to the next ##.
func section(handover, heading string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(handover, "\n") {
		if strings.HasPrefix(l, "## ") {
			in = strings.TrimRight(l, " \t") == heading
			continue
		}
		if in {
			out = append(out, l)
		}
	}
	return out
}

// configFiles are the files whose ports and hosts count: .env*, compose
// files, files under config/ and the top's config formats.
func (rf *repoFiles) configFiles() []string {
	var out []string
	for _, f := range append(append([]string{}, rf.files...), rf.ignored...) {
		base := path.Base(f)
		ext := path.Ext(base)
		switch {
		case strings.HasSuffix(f, "/"):
		case strings.HasPrefix(base, ".env"),
			strings.HasPrefix(base, "compose.") || strings.HasPrefix(base, "docker-compose"),
			strings.HasPrefix(f, "config/"),
			!strings.Contains(f, "/") && strings.Contains(".toml .yaml .yml .json .ini .conf .properties", ext) && ext != "":
			out = append(out, f)
		}
	}
	return out
}

func (rf *repoFiles) read(f string) string {
	fi, err := os.Lstat(filepath.Join(rf.top, f))
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
		return ""
	}
	data, _ := os.ReadFile(filepath.Join(rf.top, f))
	return string(data)
}

var portRe = regexp.MustCompile(`(?i)(?:[:=]\s*|port["']?\s*[:=]\s*["']?)([0-9]{2,5})\b`)

// serviceFindings: TCP ports listening here (ss -ltn, for the Mac's lsof
// -iTCP -sTCP:LISTEN) named in the repo's config, .env* or compose files,
// and running docker compose projects of the repo.
func serviceFindings(rf *repoFiles) []Finding {
	listening := listeningPorts()
	var fs []Finding
	seen := map[string]bool{}
	for _, f := range rf.configFiles() {
		for _, m := range portRe.FindAllStringSubmatch(rf.read(f), -1) {
			if listening[m[1]] && !seen[m[1]] {
				seen[m[1]] = true
				fs = append(fs, offload.Found("Local services", Warn, fmt.Sprintf("port %s listens on this machine and %s names it: the box cannot reach this machine's services", m[1], f)))
			}
		}
	}
	return append(fs, composeFindings(rf.top)...)
}

func listeningPorts() map[string]bool {
	ports := map[string]bool{}
	out, err := exec.Command("ss", "-ltnH").Output()
	if err != nil {
		return ports
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 4 {
			if i := strings.LastIndex(fields[3], ":"); i >= 0 {
				ports[fields[3][i+1:]] = true
			}
		}
	}
	return ports
}

func composeFindings(top string) []Finding {
	if _, err := exec.LookPath("docker"); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "compose", "ls", "--format", "json").Output()
	if err != nil {
		return nil
	}
	var projects []struct{ Name, Status, ConfigFiles string }
	json.Unmarshal(out, &projects)
	var fs []Finding
	for _, p := range projects {
		if strings.Contains(p.ConfigFiles, top+string(filepath.Separator)) {
			fs = append(fs, offload.Found("Local services", Warn, fmt.Sprintf("the docker compose project %s of this repository is running here (%s): the box does not have it", p.Name, p.Status)))
		}
	}
	return fs
}

var (
	urlHostRe = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/\s"']+@)?([A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9])`)
	scpHostRe = regexp.MustCompile(`^[A-Za-z0-9._-]+@([A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9]):`)
)

// vpnFindings: hosts in the remotes, config files and .env* that resolve
// to private ranges, or through a split-DNS resolver (resolvectl's
// per-link routing domains, for the Mac's scutil --dns; with only
// /etc/resolv.conf there is one resolver and no split). domains are the
// split resolvers' domains by link (splitDomains).
func vpnFindings(rf *repoFiles, domains map[string][]string) []Finding {
	hosts := map[string]bool{}
	remotes, _ := gitcmd.Run(rf.top, nil, nil, "remote", "-v")
	texts := []string{remotes}
	for _, f := range rf.configFiles() {
		texts = append(texts, rf.read(f))
	}
	for _, t := range texts {
		for _, m := range urlHostRe.FindAllStringSubmatch(t, -1) {
			hosts[strings.ToLower(m[1])] = true
		}
		for _, l := range strings.Fields(t) {
			if m := scpHostRe.FindStringSubmatch(l); m != nil {
				hosts[strings.ToLower(m[1])] = true
			}
		}
	}
	delete(hosts, "localhost")
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		if strings.Contains(h, ".") && net.ParseIP(h) == nil {
			names = append(names, h)
		}
	}
	sort.Strings(names)
	names = names[:min(len(names), 32)]
	details := make([]string, len(names))
	var wg sync.WaitGroup
	for i, h := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for link, ds := range domains {
				for _, d := range ds {
					if h == d || strings.HasSuffix(h, "."+d) {
						details[i] = fmt.Sprintf("%s resolves only through the split-DNS resolver of %s (domain %s)", h, link, d)
						return
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			addrs, _ := net.DefaultResolver.LookupIPAddr(ctx, h)
			for _, a := range addrs {
				if a.IP.IsPrivate() || cgnat.Contains(a.IP) {
					details[i] = fmt.Sprintf("%s resolves to %s, a private range", h, a.IP)
					return
				}
			}
		}()
	}
	wg.Wait()
	var fs []Finding
	for _, d := range details {
		if d != "" {
			fs = append(fs, offload.Found("VPN-only hosts", Warn, d+": the box may not reach it"))
		}
	}
	return fs
}

var _, cgnat, _ = net.ParseCIDR("100.64.0.0/10")

// splitDomains are resolvectl's routing domains per link that is not the
// default route (a VPN's), empty without systemd-resolved.
func splitDomains() map[string][]string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	text, err := exec.CommandContext(ctx, "resolvectl", "domain").Output()
	if err != nil {
		return map[string][]string{}
	}
	return parseDomains(string(text))
}

// parseDomains reads `resolvectl domain`'s lines ("Link 5 (wg0):
// ~corp.example example.internal"): each link's domains, lower case,
// without the routing-only "~" and without "." (the default route);
// the Global line's are left out.
func parseDomains(text string) map[string][]string {
	out := map[string][]string{}
	for _, l := range strings.Split(text, "\n") {
		link, ds, ok := strings.Cut(l, ":")
		if !ok || link == "Global" {
			continue
		}
		for _, d := range strings.Fields(ds) {
			if d = strings.TrimPrefix(d, "~"); d != "." && d != "" {
				out[link] = append(out[link], strings.ToLower(d))
			}
		}
	}
	return out
}

var envReadRe = regexp.MustCompile(`(?:os\.Getenv\(|os\.LookupEnv\(|std::env::var\(|env::var\(|os\.environ\.get\(|os\.getenv\()"([A-Z][A-Z0-9_]*)"|process\.env\.([A-Z][A-Z0-9_]*)`)

// envReadMarks are the literals one of which every match of envReadRe
// holds (Getenv( for os.Getenv, getenv( for Python's os.getenv, ...).
var envReadMarks = []string{"Getenv(", "LookupEnv(", "env::var(", "environ.get(", "getenv(", "process.env."}

// readsEnv says whether text holds one of envReadMarks, so it may match
// envReadRe: strings.Contains scans a file many times faster than the
// regexp, which the most files, reading no variable, then skip (the
// check took 1.4 s of a clone of this repository; issue 39, Deliver 4).
func readsEnv(text string) bool {
	for _, m := range envReadMarks {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// secretFindings: git-ignored .env* not opted in, the hand-over's
// "Secrets needed", and variables the code reads that are unset here.
func secretFindings(rf *repoFiles, handover string, optedIn []string) []Finding {
	var fs []Finding
	in := map[string]bool{}
	for _, e := range optedIn {
		in[e] = true
	}
	for _, f := range rf.ignored {
		if strings.HasPrefix(path.Base(f), ".env") && !strings.HasSuffix(f, "/") && !in["file:"+f] {
			fs = append(fs, offload.Found("Secrets not opted in", Warn, fmt.Sprintf("%s is git-ignored and not sent: cocoonbox offload secrets add file:%s opts it in", f, f)))
		}
	}
	for _, l := range strings.Split(handover, "\n") {
		if strings.Contains(strings.ToLower(l), "secrets needed") {
			fs = append(fs, offload.Found("Secrets not opted in", Warn, "the hand-over says: "+strings.TrimSpace(strings.TrimLeft(l, "#"))))
		}
	}
	var unset []string
	for _, f := range rf.files {
		switch path.Ext(f) {
		case ".go", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".rs", ".py":
		default:
			continue
		}
		text := rf.read(f)
		if !readsEnv(text) {
			continue
		}
		for _, m := range envReadRe.FindAllStringSubmatch(text, -1) {
			name := m[1] + m[2]
			if _, ok := os.LookupEnv(name); !ok {
				unset = append(unset, name)
			}
		}
	}
	if unset = uniq(unset); len(unset) > 0 {
		fs = append(fs, offload.Found("Secrets not opted in", Warn, "the code reads variables unset here: "+strings.Join(first(unset, 10), ", ")))
	}
	return fs
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
