#!/usr/bin/env bash
# The conformance suite on every host: `make test-conformance` (and so `make test`)
# runs this. Expects `make wasm` to have built the plain-ABI module
# (host-wasmtime/policy/rota_policy.wasm) and the two npm builds (npm/pkg/node for
# Node, npm/pkg/web for Chromium).
#
#   tests/run.sh [rust|traces|replay|node|browser]...   (default: all, in this order)
#
#   rust     cargo test -p rota-conformance: every vector on the native core and on the
#            plain-ABI module in wasmtime (rota-host), the random traces on both
#   traces   write target/conformance/traces.json (1,000 random traces + native hashes)
#   replay   every vector as a trace through `rota replay` (the wasmtime host's CLI)
#   node     every vector and trace through the packed npm package in Node (node:test)
#   browser  the same through the package's web build in headless Chromium
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac

OUT="$ROOT/target/conformance"
TRACES="$OUT/traces.json"
BROWSER="$ROOT/tests/runners/browser"

step() { printf '==> conformance: %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

run_rust() {
  step "cargo test -p rota-conformance (native core, wasmtime module)"
  cargo test -p rota-conformance
}

run_traces() {
  step "random traces -> ${TRACES#"$ROOT"/}"
  cargo run -q -p rota-conformance -- traces --out "$TRACES"
}

run_replay() {
  step "rota replay, every vector"
  cargo build -q -p rota-host --bin rota
  cargo run -q -p rota-conformance -- replay-traces --out "$OUT/replay"
  local rota="$ROOT/target/debug/rota" n=0 f
  for f in "$OUT"/replay/*.trace.json; do
    if ! "$rota" --cache-dir "$OUT/rota-cache" replay "$f" >"$OUT/replay.log" 2>&1; then
      cat "$OUT/replay.log" >&2
      die "rota replay ${f#"$ROOT"/} differs from the vector's expected answers"
    fi
    n=$((n + 1))
  done
  printf '    %d vector traces replayed by rota, every output matches\n' "$n" >&2
}

# The trace file, written again when the core or the generator changed since.
need_traces() {
  if [ ! -f "$TRACES" ] || [ -n "$(find core/src tests/src -newer "$TRACES" -name '*.rs' -print -quit)" ]; then
    run_traces
  fi
}

run_node() {
  need_traces
  step "node: the packed npm package"
  ROTA_TRACES="$TRACES" node tests/runners/node/run.mjs
}

run_browser() {
  need_traces
  step "browser: the web build in headless Chromium"
  local chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
  [ -x "$chromium" ] || die "$chromium missing: run 'make setup-browser'"
  # playwright-core, installed once per lock file.
  local stamp="$BROWSER/node_modules/.rota-lock"
  if [ ! -f "$stamp" ] || ! cmp -s "$BROWSER/package-lock.json" "$stamp"; then
    (cd "$BROWSER" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$BROWSER/package-lock.json" "$stamp"
  fi
  (cd "$BROWSER" && CHROMIUM_PATH="$chromium" ROTA_TRACES="$TRACES" npm test --silent)
}

[ $# -gt 0 ] || set -- rust traces replay node browser
for what in "$@"; do
  case "$what" in
    rust) run_rust ;;
    traces) run_traces ;;
    replay) run_replay ;;
    node) run_node ;;
    browser) run_browser ;;
    *) die "unknown part '$what' (rust|traces|replay|node|browser)" ;;
  esac
done
step "every host agrees"
