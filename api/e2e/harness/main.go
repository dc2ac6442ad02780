package harness

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

// Booted is what the TestMain of a package whose tests boot boxes does
// around its tests (Main).
type Booted struct {
	// Pkg names the package ("api/boxes") in the refusal and each error.
	Pkg string
	// SetUp makes what the tests share (a supervisor, a daemon, an api)
	// from the base image root COCOONBOX_IMAGE names, within five minutes.
	SetUp func(ctx context.Context, image string) error
	// Run runs the tests: m.Run when nil (dbtest.Run for tests on the
	// test database).
	Run func(m *testing.M) int
	// TearDown undoes SetUp whatever happened, after a SetUp that failed
	// too (nil: nothing to undo); an error fails the run.
	TearDown func() error
	// Log, when set, is printed when SetUp or a test failed: what the
	// tests' own output rarely says (the api's log; "" prints nothing).
	Log func() string
}

// Main is the TestMain of a package whose tests boot boxes: it refuses to
// run (exit 1, naming b.Pkg) in a binary built without the booted tag
// (testenv.ErrUntagged), without root and COCOONBOX_IMAGE, the base
// image root make box-test sets; gives b.SetUp five minutes; runs the
// tests; runs b.TearDown whatever happened; removes what Build built; and
// exits with the tests' code (1 when SetUp or TearDown failed).
func Main(m *testing.M, b Booted) { os.Exit(b.main(m)) }

func (b Booted) main(m *testing.M) (code int) {
	defer RemoveBuilt()
	if !testenv.Booted {
		fmt.Fprintf(os.Stderr, "%s: %s\n", b.Pkg, testenv.ErrUntagged)
		return 1
	}
	image := os.Getenv("COCOONBOX_IMAGE")
	if os.Geteuid() != 0 || image == "" {
		fmt.Fprintf(os.Stderr, "%s: the tests boot boxes: run as root with COCOONBOX_IMAGE naming a base image root (make box-test sets it)\n", b.Pkg)
		return 1
	}
	if b.TearDown != nil {
		defer func() {
			if err := b.TearDown(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: tear down: %v\n", b.Pkg, err)
				code = 1
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err := b.SetUp(ctx, image)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", b.Pkg, err)
		b.printLog()
		return 1
	}
	run := m.Run
	if b.Run != nil {
		run = func() int { return b.Run(m) }
	}
	if code = run(); code != 0 {
		b.printLog()
	}
	return code
}

func (b Booted) printLog() {
	if b.Log == nil {
		return
	}
	if log := b.Log(); log != "" {
		fmt.Fprintf(os.Stderr, "the api's log:\n%s", log)
	}
}
