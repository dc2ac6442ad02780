package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run of two packages as `go test -json` writes it: p/a passes with a
// chatty test, p/b fails one test.
const run = `{"Action":"start","Package":"p/a"}
{"Action":"run","Package":"p/a","Test":"TestQuiet"}
{"Action":"output","Package":"p/a","Test":"TestQuiet","Output":"=== RUN   TestQuiet\n"}
{"Action":"output","Package":"p/a","Test":"TestQuiet","Output":"    a_test.go:9: chatter of a passing test\n"}
{"Action":"pass","Package":"p/a","Test":"TestQuiet","Elapsed":1.5}
{"Action":"output","Package":"p/a","Output":"PASS\n"}
{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t1.6s\n"}
{"Action":"pass","Package":"p/a","Elapsed":1.6}
{"Action":"run","Package":"p/b","Test":"TestBroken"}
{"Action":"output","Package":"p/b","Test":"TestBroken","Output":"=== RUN   TestBroken\n"}
{"Action":"output","Package":"p/b","Test":"TestBroken","Output":"    b_test.go:7: what the broken test saw\n"}
{"Action":"output","Package":"p/b","Test":"TestBroken","Output":"--- FAIL: TestBroken (30.00s)\n"}
{"Action":"fail","Package":"p/b","Test":"TestBroken","Elapsed":30}
{"Action":"output","Package":"p/b","Output":"FAIL\tp/b\t30.2s\n"}
{"Action":"fail","Package":"p/b","Elapsed":30.2}
not json: go test's own complaint
`

// Two packages side by side: each one's lines come out together at its end.
const sideBySide = `{"Action":"output","Package":"p/a","Output":"p/a: set up\n"}
{"Action":"output","Package":"p/b","Output":"p/b: set up\n"}
{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t1s\n"}
{"Action":"pass","Package":"p/a","Elapsed":1}
{"Action":"output","Package":"p/b","Output":"ok  \tp/b\t2s\n"}
{"Action":"pass","Package":"p/b","Elapsed":2}
`

func TestRelayKeepsEachPackagesLinesTogether(t *testing.T) {
	var out bytes.Buffer
	if err := relay(strings.NewReader(sideBySide), &out, filepath.Join(t.TempDir(), "run.json")); err != nil {
		t.Fatal(err)
	}
	if want := "p/a: set up\nok  \tp/a\t1s\np/b: set up\nok  \tp/b\t2s\n"; out.String() != want {
		t.Errorf("the console:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestRelayPrintsWhatPlainGoTestPrintsAndKeepsTheJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out", "run.json")
	var out bytes.Buffer
	err := relay(strings.NewReader(run), &out, path)
	if !errors.Is(err, errFailed) {
		t.Errorf("relay of a run with a failure answered %v, want errFailed", err)
	}
	got := out.String()
	for _, want := range []string{"ok  \tp/a\t1.6s\n", "what the broken test saw", "--- FAIL: TestBroken", "FAIL\tp/b\t30.2s\n", "go test's own complaint"} {
		if !strings.Contains(got, want) {
			t.Errorf("the console lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"chatter of a passing test", "=== RUN", "PASS\n"} {
		if strings.Contains(got, not) {
			t.Errorf("the console has %q, which plain go test does not print:\n%s", not, got)
		}
	}
	if saved, err := os.ReadFile(path); err != nil || string(saved) != run {
		t.Errorf("the saved file differs from the input (%v):\n%s", err, saved)
	}
}

func TestReportListsTheSlowestFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(path, []byte(run), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := report(&out, 1, []string{path}); err != nil {
		t.Fatal(err)
	}
	want := "The 1 slowest packages:\n     30.2s  fail  p/b\nThe 1 slowest tests:\n     30.0s  fail  p/b TestBroken\n"
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
}
