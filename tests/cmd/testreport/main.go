// Command testreport reads `go test -json` and keeps the run's timings.
//
//	go test -json ... | testreport -save out/test/unit.json
//	testreport -slowest 10 out/test/unit.json out/test/booted.json
//
// With -save it copies its input to the file and prints what plain `go
// test` prints (each package's result, the output of every test that
// failed, the build errors), so the console reads as usual. With
// -slowest N it prints the N slowest packages and the N slowest top-level
// tests of the files named, so growth is visible in every CI log (issue
// 40, Deliver 5). It exits 1 when a package or test failed, 2 on bad input.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (go doc test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Elapsed    float64 // seconds
	Output     string
}

func main() {
	save := flag.String("save", "", "copy the `go test -json` on stdin to this file, printing the plain output")
	slowest := flag.Int("slowest", 0, "print the N slowest packages and tests of the files named")
	flag.Parse()
	var err error
	switch {
	case *save != "" && *slowest == 0 && flag.NArg() == 0:
		err = relay(os.Stdin, os.Stdout, *save)
	case *slowest > 0 && *save == "" && flag.NArg() > 0:
		err = report(os.Stdout, *slowest, flag.Args())
	default:
		fmt.Fprintln(os.Stderr, "usage: testreport -save FILE <go-test-json, or testreport -slowest N FILE...")
		os.Exit(2)
	}
	if errors.Is(err, errFailed) {
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
}

var errFailed = errors.New("a test failed")

// relay copies in to the file at path and prints to out what `go test`
// without -json would: each package's output at its end (packages run
// side by side, so their lines would mix), with a test's output only when
// it failed. A line that is not JSON (go test's own errors) is printed as
// it is.
func relay(in io.Reader, out io.Writer, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(out)
	defer w.Flush()
	held := map[[2]string][]string{} // a running test's output, by package and test
	pkgs := map[string][]string{}    // what a package prints at its end
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		f.Write(line)
		f.Write([]byte{'\n'})
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", line)
			w.Flush()
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
			w.Flush()
		case e.Action == "output" && e.Test == "":
			if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				pkgs[e.Package] = append(pkgs[e.Package], e.Output)
			}
		case e.Action == "output":
			if !strings.HasPrefix(e.Output, "=== ") {
				held[key] = append(held[key], e.Output)
			}
		case e.Action == "fail" || e.Action == "pass" || e.Action == "skip":
			if e.Action == "fail" {
				failed = true
			}
			if e.Test != "" {
				if e.Action == "fail" {
					pkgs[e.Package] = append(pkgs[e.Package], held[key]...)
				}
				delete(held, key)
				break
			}
			fmt.Fprint(w, strings.Join(pkgs[e.Package], ""))
			w.Flush()
			delete(pkgs, e.Package)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if failed {
		return errFailed
	}
	return nil
}

type timing struct {
	name    string
	elapsed time.Duration
	result  string
}

// report prints the n slowest packages and top-level tests in the files.
func report(out io.Writer, n int, paths []string) error {
	var pkgs, tests []timing
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil || (e.Action != "pass" && e.Action != "fail") {
				continue
			}
			t := timing{elapsed: time.Duration(e.Elapsed * float64(time.Second)), result: e.Action}
			switch {
			case e.Test == "":
				t.name = e.Package
				pkgs = append(pkgs, t)
			case !strings.Contains(e.Test, "/"):
				t.name = e.Package + " " + e.Test
				tests = append(tests, t)
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	table(out, fmt.Sprintf("The %d slowest packages", n), pkgs, n)
	table(out, fmt.Sprintf("The %d slowest tests", n), tests, n)
	return nil
}

func table(out io.Writer, title string, ts []timing, n int) {
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].elapsed > ts[j].elapsed })
	fmt.Fprintf(out, "%s:\n", title)
	for _, t := range ts[:min(n, len(ts))] {
		fmt.Fprintf(out, "%9.1fs  %-4s  %s\n", t.elapsed.Seconds(), t.result, t.name)
	}
}
