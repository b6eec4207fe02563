# rota's one build entry. Every target installs what it needs first (idempotent).
#
#   make demo     set up everything, build the wasm, run the demo
#   make demo-shared  three processes sharing one roster on a scratch PostgreSQL
#   make bench-shared the shared roster's benchmark (npm/bench/shared/README.md)
#   make test     set up everything, build the wasm, run every test
#   make setup    install what is missing (toolchains, wasm-bindgen-cli, npm deps, chromium)
#   make wasm     build host-wasmtime/policy/rota_policy.wasm and npm/pkg/{web,node}
#
# The work is done by scripts/*.sh; see there for details.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
# Native work uses rustup's cargo: keep ~/.cargo/bin first on PATH.
export PATH := $(HOME)/.cargo/bin:$(PATH)
# apt-get and cargo must not run twice at once.
.NOTPARALLEL:
.DEFAULT_GOAL := help

DEMO_ARGS ?=

.PHONY: help setup setup-native setup-wasm setup-node setup-browser setup-postgres \
        wasm wasm-abi wasm-js \
        test test-rust test-dependent test-node test-browser test-conformance test-shared \
        demo demo-shared bench-shared clean

help:
	@sed -n 's/^#   //p' Makefile

# ---- setup -------------------------------------------------------------------------
setup: setup-native setup-wasm setup-node setup-browser setup-postgres
setup-native:
	@scripts/setup.sh native
setup-wasm:
	@scripts/setup.sh wasm
setup-node:
	@scripts/setup.sh node
setup-browser:
	@scripts/setup.sh browser
setup-postgres:
	@scripts/setup.sh postgres

# ---- build -------------------------------------------------------------------------
# The browser's module goes through wasm-opt from npm/'s devDependencies (setup-node).
wasm: setup-wasm setup-node
	@scripts/build-wasm.sh abi js
wasm-abi: setup-wasm
	@scripts/build-wasm.sh abi
wasm-js: setup-wasm setup-node
	@scripts/build-wasm.sh js

# ---- tests -------------------------------------------------------------------------
# `make test` runs every suite below. A new suite gets its own test-* target here and
# a place in TEST_SUITES.
TEST_SUITES := test-rust test-dependent test-node test-browser test-conformance test-shared

test: setup wasm $(TEST_SUITES)
	@echo "==> all tests passed"

test-rust: setup-native wasm
	@scripts/test.sh rust
# rota-host as a dependency of a crate outside the workspace, from a clean clone.
test-dependent: setup-native setup-wasm
	@scripts/test-dependent.sh
test-node: setup-node wasm
	@scripts/test.sh node
test-browser: setup-browser setup-node wasm
	@scripts/test.sh browser

# The shared roster on PostgreSQL: the log contract for both hosts, and the Node
# roster across processes (npm/test/shared/): starts a scratch server
# (scripts/postgres.sh), runs the Node and the Rust tests, stops it.
test-shared: setup-native setup-node setup-postgres wasm
	@scripts/test.sh shared

# The cross-host conformance suite (tests/run.sh). Alone it runs every part; within
# `make test` it skips its `rust` part, which test-rust's `cargo test --workspace`
# already ran (rota-conformance is a workspace member).
CONFORMANCE_PARTS ?=
test: CONFORMANCE_PARTS = traces replay node browser
test-conformance: setup-native setup-node setup-browser wasm
	@if [ -x tests/run.sh ]; then tests/run.sh $(CONFORMANCE_PARTS); \
	 else echo "==> conformance: no tests/run.sh yet, skipped"; fi

# ---- demo --------------------------------------------------------------------------
demo: setup wasm
	@scripts/demo.sh $(DEMO_ARGS)

# Three instances of one shared roster, each its own process, on a scratch PostgreSQL
# that scripts/with-postgres.sh starts and stops (also on failure).
demo-shared: setup-node setup-postgres wasm-js
	@scripts/with-postgres.sh node scripts/demo-shared.mjs $(DEMO_SHARED_ARGS)

DEMO_SHARED_ARGS ?=
BENCH_ARGS ?=
bench-shared: setup-node setup-postgres wasm-js
	@scripts/with-postgres.sh node npm/bench/shared/bench.mjs $(BENCH_ARGS)

clean:
	cargo clean
	rm -rf npm/pkg host-wasmtime/policy/rota_policy.wasm
