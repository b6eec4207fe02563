#!/usr/bin/env bash
# Runs the demo: the wasmtime host simulating a roster with the policy module that
# `make wasm` built. Extra arguments go to `rota simulate`.
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT" || exit
[ -f host-wasmtime/policy/rota_policy.wasm ] || die "no policy module: run 'make wasm'"
step "cargo run --release -p rota-host --bin rota -- simulate $*"
exec cargo run --release -p rota-host --bin rota -- simulate "$@"
