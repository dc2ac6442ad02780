package deptest

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// cli is what the user's CLI (api/cmd/cocoonbox) may link: it is a client
// of the api, so of the api only what both sides agree on (api/client)
// and the generated contract (api/proto); the host-side offload packer and
// the box's side of an offload it drives (packer, guest/offload); the
// command-line convention every binary here shares (guest/cli); internal.
// Of the world: connect, protobuf and x/sys, x/term for rsh's terminal,
// robfig/cron (no dependencies of its own) for box schedule's --cron,
// read with the api's parser before any call (issue 45, Deliver 2),
// spf13/cobra and its pflag for the command line (internal/command, issue
// 45); the man pages' generator (cobra/doc, md2man, blackfriday, yaml) is
// linked only by `go build -tags manpages`, never into the shipped CLI.
// Issue 25: it once linked 350 packages, pgx, goose and the MCP server
// among them, for eight names.
var cli = Rule{
	Ours: []string{"api/cmd/cocoonbox", "api/client", "api/proto", "packer", "guest/offload", "guest/cli", "internal"},
	Others: []string{"connectrpc.com/connect", "google.golang.org/protobuf", "golang.org/x/sys", "golang.org/x/term",
		"github.com/robfig/cron/v3",
		"github.com/spf13/cobra", "github.com/spf13/pflag", "github.com/inconshreveable/mousetrap"},
}

// guest is what a helper of the box (guest/cmd/*) may link: the guest's
// packages and internal, never the api (the box reaches the api only
// through sandboxd), PostgreSQL's driver, migrations or the MCP SDK.
var guest = Rule{
	Ours:   []string{"guest", "internal"},
	Denied: []string{"github.com/jackc/pgx", "github.com/pressly/goose", "github.com/modelcontextprotocol/go-sdk"},
}

// repo is the repository's root (this package is internal/deptest).
func repo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func check(t *testing.T, rule Rule, bins map[string][]string) {
	t.Helper()
	for bin, deps := range bins {
		if bad := rule.Check(deps); len(bad) > 0 {
			t.Errorf("%s links what its allow-list (internal/deptest) does not admit; move the shared name into a package it may link, or change the rule with a reason:\n%s",
				bin, strings.Join(bad, "\n"))
		}
	}
}

func TestTheCLILinksOnlyTheClientSideOfTheAPI(t *testing.T) {
	bins, err := Binaries(filepath.Join(repo(t), "api"), "./cmd/cocoonbox")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bins[Module+"/api/cmd/cocoonbox"]; len(bins) != 1 || !ok {
		t.Fatalf("go list found %v, want the CLI alone", keys(bins))
	}
	check(t, cli, bins)
}

func TestNoGuestHelperLinksTheAPI(t *testing.T) {
	root := repo(t)
	bins, err := Binaries(root, "./guest/cmd/...")
	if err != nil {
		t.Fatal(err)
	}
	// Every folder of guest/cmd is a helper: a pattern that matched fewer
	// would check nothing of the rest.
	dirs, err := os.ReadDir(filepath.Join(root, "guest", "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range dirs {
		if d.IsDir() {
			want = append(want, Module+"/guest/cmd/"+d.Name())
		}
	}
	if got := keys(bins); !reflect.DeepEqual(got, want) {
		t.Fatalf("go list found the helpers %v, want one per folder of guest/cmd %v", got, want)
	}
	check(t, guest, bins)
}

// The rules refuse what they do not list, by path element, and admit the
// standard library and its vendored packages: the control of the two
// tests above.
func TestARuleRefusesWhatItDoesNotList(t *testing.T) {
	deps := []string{"fmt", "vendor/golang.org/x/net/idna", Module + "/api/client/login", Module + "/api/clientx",
		Module + "/api/tokens", Module + "/internal/durable", "github.com/jackc/pgx/v5", "golang.org/x/sys/unix"}
	if got, want := names(cli.Check(deps)), []string{Module + "/api/clientx", Module + "/api/tokens", "github.com/jackc/pgx/v5"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the CLI's rule refused %v, want %v", got, want)
	}
	if got, want := names(guest.Check(deps)), []string{Module + "/api/client/login", Module + "/api/clientx", Module + "/api/tokens", "github.com/jackc/pgx/v5"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the guest's rule refused %v, want %v", got, want)
	}
}

func keys(m map[string][]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// names are the packages of Check's answer, without the rule each broke.
func names(bad []string) []string {
	var ns []string
	for _, b := range bad {
		n, _, _ := strings.Cut(b, ":")
		ns = append(ns, n)
	}
	return ns
}
