package apitest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// handWired are the test files that still build the api's server by hand,
// each with why, until they run on apitest.New. The list only shrinks:
// TestNoTestBuildsTheAPIsServerByHand fails for a file that wires by hand
// and is not here, and for one here that no longer does.
var handWired = map[string]string{}

// builders are the constructors only apiserver.New may call for an api:
// the server every route is mounted on and the token index every check
// reads, by import path, each with the package whose own tests may call it.
var builders = map[string]string{
	"github.com/cocoonbox/cocoonbox/api/server.New":         "server",
	"github.com/cocoonbox/cocoonbox/api/tokens.NewIndex":    "tokens",
	"github.com/cocoonbox/cocoonbox/api/signup.New":         "signup",
	"github.com/cocoonbox/cocoonbox/api/signup.NewGitHub":   "signup",
	"github.com/cocoonbox/cocoonbox/api/console.New":        "console",
	"github.com/cocoonbox/cocoonbox/api/mcp.New":            "mcp",
	"github.com/cocoonbox/cocoonbox/api/oauth.NewAgents":    "oauth",
	"github.com/cocoonbox/cocoonbox/api/devices.NewAccount": "devices",
}

// The api's tests build the api the way the binary does (apitest.New,
// which calls apiserver.New): no test file of the api module calls
// server.New or tokens.NewIndex, or another constructor apiserver.New
// wires, outside that constructor's own package, so a middleware, a hook
// or a limit added to apiserver.New is in every test of the api
// (TestAMiddlewareOfApiserverSeesEveryRoute).
func TestNoTestBuildsTheAPIsServerByHand(t *testing.T) {
	found := map[string][]string{}
	read := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel("..", path)
		read[filepath.ToSlash(rel)] = true
		calls, err := builderCalls(path, filepath.ToSlash(filepath.Dir(rel)))
		if len(calls) > 0 {
			found[filepath.ToSlash(rel)] = calls
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !read["apitest/handwired_test.go"] {
		t.Fatalf("the walk of the api module did not read this file (it read %d test files)", len(read))
	}
	for file, calls := range found {
		if _, ok := handWired[file]; !ok {
			t.Errorf("%s builds the api by hand (%s): use apitest.New, which calls apiserver.New", file, strings.Join(calls, ", "))
		}
	}
	for file, why := range handWired {
		if _, ok := found[file]; !ok {
			t.Errorf("%s (%s) no longer builds the api by hand: take it off handWired", file, why)
		}
	}
}

// builderCalls answers the calls of builders in the Go file path, of
// package directory dir (relative to the api module), but for a builder's
// own package.
func builderCalls(path, dir string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]string{} // local name: import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = p
	}
	var calls []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if own, ok := builders[names[x.Name]+"."+sel.Sel.Name]; ok && dir != own {
			calls = append(calls, x.Name+"."+sel.Sel.Name)
		}
		return true
	})
	sort.Strings(calls)
	return calls, nil
}
