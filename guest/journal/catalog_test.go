package journal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// catalogued are the helpers whose MESSAGE_IDs the image's catalogs
// explain (issue 18, item 7: identity's had one; vault's, packages' and the
// desktop's had none). A new helper adds its directory here with its
// catalog.
var catalogued = []string{"cmd/identity", "cmd/hostname", "cmd/machine-id", "cmd/branchbox", "cmd/vault", "packages",
	"cmd/session-save", "cmd/desktop-session", "offload/inbox"}

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// messageIDs returns the MESSAGE_ID constants (a msg*/Msg* name, 32 hex
// digits) of one package directory under guest/, by name.
func messageIDs(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	ids := map[string]string{}
	files, _ := filepath.Glob(filepath.Join("..", dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !strings.HasPrefix(strings.ToLower(name.Name), "msg") {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					if v, _ := strconv.Unquote(lit.Value); hexID.MatchString(v) {
						ids[name.Name] = v
					}
				}
			}
		}
	}
	return ids
}

// Every MESSAGE_ID of the catalogued helpers is unique and has an entry,
// with a Subject, in a catalog the image installs, so `journalctl -x`
// explains each entry an admin reads.
func TestEveryMessageIDHasACatalogEntry(t *testing.T) {
	catalogs, _ := filepath.Glob("../../image/tiers/*.rootfs/usr/lib/systemd/catalog/*.catalog")
	entries := map[string]string{}
	for _, c := range catalogs {
		data, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range strings.Split(string(data), "\n-- ")[1:] {
			id, body, _ := strings.Cut(part, "\n")
			entries[strings.TrimSpace(id)] = body
		}
	}
	seen := map[string]string{}
	for _, dir := range catalogued {
		ids := messageIDs(t, dir)
		if len(ids) == 0 {
			t.Errorf("guest/%s: no MESSAGE_ID constants found", dir)
		}
		for name, id := range ids {
			if other, dup := seen[id]; dup {
				t.Errorf("MESSAGE_ID %s is both %s and guest/%s.%s: one id per kind of event", id, other, dir, name)
			}
			seen[id] = "guest/" + dir + "." + name
			body, ok := entries[id]
			if !ok {
				t.Errorf("guest/%s.%s (%s) has no catalog entry", dir, name, id)
			} else if !strings.Contains(body, "Subject: ") {
				t.Errorf("the catalog entry of guest/%s.%s lacks a Subject", dir, name)
			}
		}
	}
}

// One MESSAGE_ID per kind of event: every Send of one id has the same
// priority (an id sent as an error at one place and as information at
// another names two kinds of event; issue 18, item 7 found several).
func TestEachMessageIDIsSentAtOnePriority(t *testing.T) {
	for _, dir := range catalogued {
		fset := token.NewFileSet()
		pri := map[string]string{}
		files, _ := filepath.Glob(filepath.Join("..", dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) < 3 {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Send" {
					return true
				}
				p, id := exprName(call.Args[0]), exprName(call.Args[1])
				if !strings.HasPrefix(strings.ToLower(id), "msg") && !strings.Contains(id, ".Msg") {
					return true
				}
				if was, ok := pri[id]; ok && was != p {
					t.Errorf("%s: %s is sent at %s here and at %s elsewhere: two kinds of event under one MESSAGE_ID",
						fset.Position(call.Pos()), id, p, was)
				}
				pri[id] = p
				return true
			})
		}
	}
}

func exprName(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.Ident:
		return v.Name
	case *ast.SelectorExpr:
		return exprName(v.X) + "." + v.Sel.Name
	}
	return "?"
}
