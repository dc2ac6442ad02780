//go:build !booted

package testenv

// Booted says whether this test binary was built with the booted build
// tag, which every test file that boots a machine carries (make box-test
// passes -tags booted; make unit-test does not).
const Booted = false
