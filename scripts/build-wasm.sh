#!/usr/bin/env bash
# Builds the WebAssembly artefacts of crate rota-wasm (wasm/):
#
#   abi   --no-default-features --features abi, profile `wasm-speed` (opt-level 3, and
#         the std built for speed too: a wasmtime host steps it on every input)
#         -> host-wasmtime/policy/rota_policy.wasm   (plain ABI, zero imports)
#   node  --features js,log,binary,import, profile `wasm-speed` (opt-level 3, and the std built for
#         speed) unstripped, then wasm-bindgen --target web -> npm/pkg/node: the module
#         the package's Node entry compiles synchronously from the file (made for the
#         cost per input; Node reads it from disk)
#   web   --features js, profile `wasm-small` (opt-level "z", the std built for size),
#         then wasm-bindgen --target web and wasm-opt (npm's binaryen) -> npm/pkg/web:
#         the browser entry's module (made for download size: the Node module is
#         about 1.6 times larger gzipped; without the shared log's rules, feature
#         `log`: a browser cannot reach PostgreSQL; without the binary step, feature
#         `binary`: its `Policy#handle` takes the JSON step; without
#         `Policy.importState`, feature `import`: `Policy#clone` is its checkpoint)
#         Both: + rota_wasm_embedded.js, the module's bytes as base64 (embed-wasm.mjs)
#   js    node and web
#
# Each build has its own cargo target dir (target/wasm-abi, target/wasm-node,
# target/wasm-web), so none invalidates another or rustup's native target/.
# Incremental: outputs are only rewritten when their inputs changed.
#
#   scripts/build-wasm.sh [abi|node|web|js]...   (default: abi js)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TARGET=wasm32-unknown-unknown
PROFILE=wasm-speed
POLICY="$ROOT/host-wasmtime/policy/rota_policy.wasm"
PKG="$ROOT/npm/pkg"

wasm_cargo_setup

# cargo build of rota-wasm for wasm32; $1 = name of the target dir, rest = feature flags.
cargo_wasm() {
  local name="$1"; shift
  local t0=$SECONDS
  step "wasm: cargo build rota-wasm ($name: $*) [$WASM_TOOLCHAIN toolchain]"
  "${WASM_CARGO[@]}" build -p rota-wasm --lib \
    --target "$TARGET" --profile "$PROFILE" \
    --target-dir "$ROOT/target/wasm-$name" \
    "${WASM_CARGO_FLAGS[@]}" "$@"
  note "cargo done in $((SECONDS - t0)) s"
}

# Copies $1 to $2 only when the contents differ (keeps $2's mtime otherwise).
install_if_changed() {
  mkdir -p "$(dirname "$2")"
  if cmp -s "$1" "$2"; then
    note "unchanged: ${2#"$ROOT"/}"
  else
    cp "$1" "$2"
    note "wrote ${2#"$ROOT"/} ($(wc -c <"$2") bytes)"
  fi
}

# The cargo flags without the size-optimized std (for the builds made for speed).
speed_flags() {
  local flag
  SPEED_FLAGS=()
  for flag in "${WASM_CARGO_FLAGS[@]}"; do
    [ "$flag" = "-Zbuild-std-features=optimize_for_size" ] || SPEED_FLAGS+=("$flag")
  done
}

build_abi() {
  # Seen by cargo_wasm (dynamic scope): the speed profile, and no size-optimized std.
  local PROFILE=wasm-speed SPEED_FLAGS
  speed_flags
  local -a WASM_CARGO_FLAGS=("${SPEED_FLAGS[@]}")
  cargo_wasm abi --no-default-features --features abi
  local out="$ROOT/target/wasm-abi/$TARGET/$PROFILE/rota_wasm.wasm"
  [ -f "$out" ] || die "cargo produced no $out"
  install_if_changed "$out" "$POLICY"
}

# A wasm-bindgen build: $1 = name (target dir target/wasm-$1, output npm/pkg/$1),
# $2 = cargo profile, rest = feature flags.
build_bindgen() {
  local name="$1" PROFILE="$2"; shift 2
  # Not stripped here: wasm-bindgen reads the `target_features` custom section (and
  # strips what it does not need itself).
  (export CARGO_PROFILE_WASM_SPEED_STRIP=false CARGO_PROFILE_WASM_SMALL_STRIP=false
   cargo_wasm "$name" "$@")
  local in="$ROOT/target/wasm-$name/$TARGET/$PROFILE/rota_wasm.wasm"
  [ -f "$in" ] || die "cargo produced no $in"

  local want have
  want="$(wasm_bindgen_lock_version)"
  have="$(wasm_bindgen_cli_version)"
  [ "$have" = "$want" ] || die "wasm-bindgen CLI is '${have:-missing}', Cargo.lock has $want: run 'make setup'"

  # The name section is about half the module (what `strip` would have removed);
  # ROTA_WASM_BINDGEN_FLAGS= (empty) keeps it, for readable stack traces.
  local flags="${ROTA_WASM_BINDGEN_FLAGS---remove-name-section --remove-producers-section}"
  local dir="$PKG/$name" stamp t0 made
  # What made the output, for the stamp: the CLI, its flags, and the web module's
  # wasm-opt (a new binaryen redoes it).
  made="$have $flags"
  [ "$name" != web ] || made="$made, $("$ROOT/npm/node_modules/.bin/wasm-opt" --version 2>/dev/null || echo no wasm-opt)"
  # The stamp records the CLI version and flags; redo when the input is newer than
  # the stamp, the CLI or flags changed, or the output went missing.
  stamp="$ROOT/target/wasm-$name/bindgen.stamp"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$in" ] && [ "$(cat "$stamp")" = "$made" ] &&
     [ -f "$dir/rota_wasm_bg.wasm" ] && [ -f "$dir/rota_wasm.js" ]; then
    note "wasm-bindgen ($name): up to date (${dir#"$ROOT"/})"
    embed "$name"
    return
  fi
  t0=$SECONDS
  step "wasm: wasm-bindgen --target web --out-dir ${dir#"$ROOT"/}"
  rm -rf "$dir"
  mkdir -p "$dir"
  # shellcheck disable=SC2086  # $flags is a list of flags
  wasm-bindgen --target web --out-dir "$dir" $flags "$in"
  [ "$name" != web ] || shrink "$dir/rota_wasm_bg.wasm"
  echo "$made" >"$stamp"
  note "done in $((SECONDS - t0)) s ($(wc -c <"$dir/rota_wasm_bg.wasm") bytes wasm)"
  embed "$name"
}

# wasm-opt (npm's `binaryen`, a devDependency of npm/) on the browser's module, in
# place. Without inlining: inlining makes the module smaller raw but larger gzipped,
# and gzipped is what the budget counts (about 5 KB less than rustc's opt-level "z"
# alone). The features are rustc's defaults for wasm32 (wasm-bindgen drops the section
# that would name them).
shrink() {
  local opt="$ROOT/npm/node_modules/.bin/wasm-opt" t0=$SECONDS
  [ -x "$opt" ] || die "no $opt: run 'make setup-node' (npm's binaryen)"
  "$opt" "$1" -o "$1" -O2 --shrink-level 1 \
    --always-inline-max-function-size 0 --flexible-inline-max-function-size 0 \
    --one-caller-inline-max-function-size 0 \
    --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-multivalue --enable-reference-types
  note "wasm-opt: $(wc -c <"$1") bytes in $((SECONDS - t0)) s"
}

# The module's bytes as a JS module next to the glue (scripts/embed-wasm.mjs): the
# entries initialise from it, so bundles need no file. pkg/node ships no .wasm file,
# so its glue loses the default URL that bundlers would try to resolve.
embed() {
  local dir="$PKG/$1" flag=()
  [ "$1" = node ] && flag=(--no-default-url)
  if [ -f "$dir/rota_wasm_embedded.js" ] && [ "$dir/rota_wasm_embedded.js" -nt "$dir/rota_wasm_bg.wasm" ] &&
     [ "$dir/rota_wasm_embedded.js" -nt "$ROOT/scripts/embed-wasm.mjs" ]; then
    return
  fi
  node "$ROOT/scripts/embed-wasm.mjs" "$dir" "${flag[@]}"
}

build_node() {
  local SPEED_FLAGS
  speed_flags
  local -a WASM_CARGO_FLAGS=("${SPEED_FLAGS[@]}")
  build_bindgen node wasm-speed --features js,log,binary,import
}
build_web() { build_bindgen web wasm-small --features js; }

[ $# -gt 0 ] || set -- abi js
for what in "$@"; do
  case "$what" in
    abi) build_abi ;;
    node) build_node ;;
    web) build_web ;;
    js) build_node; build_web ;;
    *) die "unknown artefact '$what' (abi|node|web|js)" ;;
  esac
done
