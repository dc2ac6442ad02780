# cocoonbox: the guest component set, the cbdesk image recipe and the api.
# `make help` lists the targets. Run as root on Debian 12.

export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
SHELL := /bin/bash

VERSION ?= $(shell cat image/VERSION)
TIER ?= base
REV := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
# The release (VERSION) joins the link flags from the environment
# (CB_RELEASE, in double quotes), never pasted into the shell line.
LDFLAGS := -s -w -X github.com/cocoonbox/cocoonbox/internal/version.Version=$(REV) -X github.com/cocoonbox/cocoonbox/internal/version.Release=$$CB_RELEASE
IMAGE := out/images/cbdesk-v$(VERSION)-$(TIER)
# The desk tier's image, which `make test` builds beside $(IMAGE) for tests/desk.
DESK_IMAGE := out/images/cbdesk-v$(VERSION)-desk
TIERS := $(basename $(notdir $(wildcard image/tiers/*.packages)))
HELPERS := $(notdir $(wildcard guest/cmd/*))
# How many executions each fuzz target runs inside `make test` (a count, never a duration: tests/fuzz).
FUZZTIME ?= 20000x
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Under make, a test that cannot run here (not root, no systemd-nspawn)
# fails saying why instead of skipping (internal/testenv).
export COCOONBOX_NO_SKIP := 1

# The packages' version; empty takes it from git (image/deb: a dirty tree
# is refused).
DEB_VERSION ?=

.PHONY: help setup proto console-shots check-image check-desk-image check-disk build deb image demo box test unit-test box-test test-stress test-times desk-test lint fuzz fuzz-corpus bench clean

help:
	@echo 'make setup   install the host packages and tools (Debian 12, root)'
	@echo 'make demo    build, run the api, sign the CLI in, create a box (desk tier; TIER=base for base) through it, check it, print a report'
	@echo 'make test    lint, every unit test, every booted-box test, short fuzzing (after make check-disk)'
	@echo 'make check-disk  refuse when the disk cannot hold make test (about 12 GiB free)'
	@echo 'make build   the static helpers into out/bin, cocoonbox-api, cocoonbox and cocoonbox-sandboxd into out/ (version-stamped), their man pages into out/man'
	@echo 'make deb     out/cocoonbox-guest_<version>_amd64.deb and cocoonbox-desk (DEB_VERSION=..., default from git)'
	@echo 'make image   cbdesk:v$$VERSION of $$TIER (base|desk) into out/images'
	@echo 'make desk-image  the desk tier'"'"'s image whatever TIER is (for tests/desk)'
	@echo 'make box     boot a box of the image and leave it running (TIER=desk: the desktop, VNC on 127.0.0.1:5900;'
	@echo '             PERSISTENT=DIR keeps its root, NAME=... another machine name)'
	@echo 'make unit-test   the unit tests only (no box): every test file without //go:build booted'
	@echo 'make box-test    the booted-box tests only (both tiers): every test file with //go:build booted'
	@echo 'make test-stress the unit and booted-box tests with the host loaded (stress-ng --cpu 4)'
	@echo 'make test-times  the ten slowest packages and tests of the last runs (out/test/*.json)'
	@echo 'make desk-test   only the desk tier'"'"'s booted-box tests (tests/desk), building its image'
	@echo 'make fuzz        each fuzz target for FUZZTIME executions (20000x); make fuzz-corpus: longer, keeps the corpus'
	@echo 'make bench   the benchmarks'
	@echo 'make lint    gofmt, go vet, staticcheck, shellcheck, tests/lint-box-networks, tests/lint-links (doc links and cited sections resolve), the generated api code checked'
	@echo 'make proto   regenerate the api'"'"'s committed Go code from api/proto (protoc, pinned plugins)'
	@echo 'make console-shots  regenerate docs/console/*.png: each console page at 390 and 1440 px, light and dark (Chromium)'
	@echo 'make clean   remove out/ (the cached package layers stay in /var/cache/cocoonbox)'

setup:
	tests/setup-host

# The api's generated code is committed; this regenerates it (pinned plugins).
proto:
	api/proto/generate

# Bad VERSION or TIER fails before anything is compiled.
# VERSION and TIER reach the check through the environment, never pasted
# into the shell line, so a value with quotes or ';' is refused as a value.
check-image: export CB_VERSION := $(VERSION)
check-image: export CB_TIER := $(TIER)
check-image:
	@image/build --check --version "$$CB_VERSION" --tier "$$CB_TIER"

check-desk-image: export CB_VERSION := $(VERSION)
check-desk-image:
	@image/build --check --version "$$CB_VERSION" --tier desk

build: export CB_RELEASE := $(VERSION)
build: check-image
	@mkdir -p out/bin
	@# out/ holds image roots with Go sources in them: its own module keeps them out of ./...
	@echo 'module cocoonbox.invalid/out' >out/go.mod
	@rm -f $(filter-out $(addprefix out/bin/,$(HELPERS)),$(wildcard out/bin/*))
	$(if $(HELPERS),CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o out/bin/ $(addprefix ./guest/cmd/,$(HELPERS)))
	cd api && CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o ../out/ ./cmd/cocoonbox-api ./cmd/cocoonbox ./cmd/cocoonbox-sandboxd
	@# The man pages, from each binary's own command tree (internal/command;
	@# -tags manpages links the generator, which the binaries above do not),
	@# dated by the commit so a package build is reproducible.
	@rm -rf out/man
	cd api && for c in cocoonbox cocoonbox-api cocoonbox-sandboxd; do \
	  SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) go run -tags manpages -ldflags "$(LDFLAGS)" ./cmd/$$c man ../out/man || exit; done
	$(if $(filter branchbox,$(HELPERS)),SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) go run -tags manpages -ldflags "$(LDFLAGS)" ./guest/cmd/branchbox man out/man)

# The guest set as Debian packages, one per tier. DEB_VERSION reaches
# image/deb through the environment, as VERSION reaches check-image.
deb: export CB_DEB_VERSION := $(DEB_VERSION)
deb: build
	@for t in $(TIERS); do image/deb --tier "$$t" $${CB_DEB_VERSION:+--version "$$CB_DEB_VERSION"} --out out || exit; done

image: check-image build
	image/build --version '$(VERSION)' --tier '$(TIER)' --bin out/bin --out out/images --rev '$(REV)'

# The desk image whatever TIER is (for tests/desk). After `make image
# TIER=desk` it is a second, cheap provision of the cached layer.
desk-image: check-desk-image build
	image/build --version '$(VERSION)' --tier desk --bin out/bin --out out/images --rev '$(REV)'

# The main job shows everything that works, on the product's path (the api,
# the CLI, the box it creates): without TIER the box is of the desk tier
# (base plus the desktop), so every step runs; TIER=base skips the desk's.
# make image builds out/cocoonbox-api and out/cocoonbox (build) with it.
DEMO_TIER := $(if $(filter command line environment,$(origin TIER)),$(TIER),desk)
demo: setup
	$(MAKE) --no-print-directory image TIER=$(DEMO_TIER)
	cd api && go build -o ../out/demo ./cmd/demo
	out/demo --image out/images/cbdesk-v$(VERSION)-$(DEMO_TIER)

# PERSISTENT=DIR keeps the box's root there; NAME=… another machine name.
# Both reach the command through the environment, as VERSION does.
box: export CB_PERSISTENT := $(PERSISTENT)
box: export CB_NAME := $(NAME)
box: image
	go run ./tests/cmd/box --image $(IMAGE) $${CB_PERSISTENT:+--persistent "$$CB_PERSISTENT"} $${CB_NAME:+--name "$$CB_NAME"}

lint:
	@unformatted=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	go vet -tags booted ./... ./api/...
	go run $(STATICCHECK) -tags booted ./... ./api/...
	tests/lint-shell
	tests/lint-box-networks
	tests/lint-links
	api/proto/generate --check

# The console's screenshots (docs/console.md): its browser suite, writing them.
console-shots:
	rm -f docs/console/*.png
	tests/with-test-database go test -count=1 -run 'TestEveryPageInEveryState$$|TestTheUsagePageShowsGWsFiguresAgainstTheCap$$|TestTheSchedulesPageSetsListsAndClearsWakes$$' ./api/console/ -console.shots=$(CURDIR)/docs/console

# Each test run keeps its `go test -json` in out/test/RULE.json (the
# console shows go test's plain output: tests/cmd/testreport); make
# test-times prints the slowest packages and tests of them.
TESTREPORT = go run ./tests/cmd/testreport -save out/test/$(1).json
# The packages with a test file carrying `//go:build booted`, found from the files.
BOOTED_PACKAGES = $$(tests/booted-packages)
# How many booted packages run at once (go test -p): their boots wait on
# I/O more than on the two cores.
BOOTED_PARALLEL ?= 2
BOOTED_BENCHTIME ?= 5x

# Every test file without `//go:build booted`, both modules; they share one
# PostgreSQL cluster (tests/with-test-database). A test that boots a
# machine in a file without the tag fails here (testenv.ErrUntagged).
unit-test:
	set -o pipefail; tests/with-test-database go test -json -count=1 -timeout 30m ./... ./api/... | $(call TESTREPORT,unit)

# Every test file with `//go:build booted` (tests/booted-packages): tests/desk
# boots the desk image, the others $(IMAGE), both built once here for all.
box-test: image $(if $(filter desk,$(TIER)),,desk-image)
	tests/services
	set -o pipefail; COCOONBOX_IMAGE=$(CURDIR)/$(IMAGE) COCOONBOX_DESK_IMAGE=$(CURDIR)/$(DESK_IMAGE) tests/with-test-database \
	  go test -json -tags booted -p $(BOOTED_PARALLEL) -count=1 -timeout 60m $(BOOTED_PACKAGES) | $(call TESTREPORT,booted)

# The unit and booted-box tests with the host kept busy (stress-ng, load
# about 8 on two cores): a test that reads a clock instead of waiting on a
# condition fails here first. stress-ng ends with the recipe, whatever its end.
test-stress: image desk-image
	stress-ng --cpu 4 --quiet & load=$$!; trap 'kill $$load; wait $$load' EXIT; \
	  $(MAKE) --no-print-directory unit-test box-test

test-times:
	@go run ./tests/cmd/testreport -slowest 10 out/test/*.json

# Only the desk tier's booted-box tests (they are part of box-test too).
desk-test: desk-image
	COCOONBOX_DESK_IMAGE=$(CURDIR)/$(DESK_IMAGE) go test -tags booted -count=1 -timeout 30m ./tests/desk/

# Each fuzz target runs FUZZTIME executions (a count: tests/fuzz says why); a failing input lands in testdata/fuzz.
fuzz:
	tests/with-test-database tests/fuzz $(FUZZTIME)

# Longer fuzzing that also keeps the coverage-widening inputs in
# testdata/fuzz as seed corpus, to commit.
fuzz-corpus:
	tests/with-test-database tests/fuzz --keep $(or $(FUZZCORPUSTIME),500000x)

# Refused before the tests when the disk cannot hold the run (tests/check-disk).
check-disk:
	tests/check-disk

# The slowest-ten table comes at the end whether the tests passed or not,
# from this run's files only.
test: setup check-disk lint
	@rm -f out/test/*.json
	@$(MAKE) --no-print-directory unit-test box-test fuzz; rc=$$?; $(MAKE) --no-print-directory test-times; exit $$rc

# The unit benchmarks, then the booted ones (BOOTED_BENCHTIME runs each,
# default 5: every one boots or drives boxes; the api's figures in docs/
# were taken at 20x); BenchmarkUsersLoad (api/e2e/boxes) runs one pass per
# users count: COCOONBOX_BENCH_USERS, default 1,10 (50,100 boot that many
# boxes at once).
bench: image $(if $(filter desk,$(TIER)),,desk-image)
	tests/with-test-database go test -run '^$$' -bench . -skip BenchmarkSaveVersusRestic -benchmem ./... ./api/...
	# Issue 42: a save of 10,000 files and 1 GB, again after 1% changed, and its
	# restore, beside restic's of the same tree (about 4 GB of disk in TMPDIR).
	go test -run '^$$' -bench BenchmarkSaveVersusRestic -benchtime 1x -timeout 30m ./api/state/snapshot/
	COCOONBOX_IMAGE=$(CURDIR)/$(IMAGE) COCOONBOX_DESK_IMAGE=$(CURDIR)/$(DESK_IMAGE) tests/with-test-database \
	  go test -tags booted -p 1 -run '^$$' -bench . -skip BenchmarkUsersLoad -benchtime $(BOOTED_BENCHTIME) -timeout 60m $(BOOTED_PACKAGES)
	COCOONBOX_IMAGE=$(CURDIR)/$(IMAGE) tests/with-test-database \
	  go test -tags booted -p 1 -run '^$$' -bench BenchmarkUsersLoad -benchtime 1x -timeout 60m $(BOOTED_PACKAGES)

clean:
	rm -rf out
