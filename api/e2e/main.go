package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// Main is the TestMain of a package whose tests share one api process
// that boots boxes: it refuses to run (exit 1, naming pkg) without root
// and COCOONBOX_IMAGE, the base image root make box-test sets; gives
// setUp five minutes to start the api into *api and make what the tests
// share; runs the tests; and runs tearDown whatever happened. The api's
// log is printed when setUp or a test fails, since the tests' own output
// rarely says what the api did. It answers the exit code.
func Main(m *testing.M, pkg string, api **API, setUp func(ctx context.Context, image string) error, tearDown func()) int {
	image := os.Getenv("COCOONBOX_IMAGE")
	if os.Geteuid() != 0 || image == "" {
		fmt.Fprintf(os.Stderr, "%s: the tests boot boxes: run as root with COCOONBOX_IMAGE naming a base image root (make box-test sets it)\n", pkg)
		return 1
	}
	defer tearDown()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err := setUp(ctx, image)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", pkg, err)
		if *api != nil {
			fmt.Fprintf(os.Stderr, "the api's log:\n%s", (*api).Log())
		}
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "the api's log:\n%s", (*api).Log())
	}
	return code
}
