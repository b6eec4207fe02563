#!/usr/bin/env bash
# Builds the two WebAssembly artefacts of crate rota-wasm (wasm/):
#
#   abi  --no-default-features --features abi, profile `wasm-speed` (opt-level 3, and
#        the std built for speed too: a wasmtime host steps it on every input)
#        -> host-wasmtime/policy/rota_policy.wasm   (plain ABI, zero imports)
#   js   --features js, profile `wasm` unstripped, then wasm-bindgen
#        -> npm/pkg/web   (--target web; the package's Node entry loads it too,
#                          compiling the module synchronously from the file)
#
# Each feature set has its own cargo target dir (target/wasm-abi, target/wasm-js), so
# neither invalidates the other nor rustup's native target/. Incremental: outputs are
# only rewritten when their inputs changed.
#
#   scripts/build-wasm.sh [abi|js]...   (default: both)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TARGET=wasm32-unknown-unknown
PROFILE=wasm
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

build_abi() {
  # Seen by cargo_wasm (dynamic scope): the speed profile, and no size-optimized std.
  local PROFILE=wasm-speed flag
  local -a abi_flags=()
  for flag in "${WASM_CARGO_FLAGS[@]}"; do
    [ "$flag" = "-Zbuild-std-features=optimize_for_size" ] || abi_flags+=("$flag")
  done
  local -a WASM_CARGO_FLAGS=("${abi_flags[@]}")
  cargo_wasm abi --no-default-features --features abi
  local out="$ROOT/target/wasm-abi/$TARGET/$PROFILE/rota_wasm.wasm"
  [ -f "$out" ] || die "cargo produced no $out"
  install_if_changed "$out" "$POLICY"
}

build_js() {
  # Not stripped here: wasm-bindgen reads the `target_features` custom section (and
  # strips what it does not need itself).
  (export CARGO_PROFILE_WASM_STRIP=false; cargo_wasm js --features js)
  local in="$ROOT/target/wasm-js/$TARGET/$PROFILE/rota_wasm.wasm"
  [ -f "$in" ] || die "cargo produced no $in"

  local want have
  want="$(wasm_bindgen_lock_version)"
  have="$(wasm_bindgen_cli_version)"
  [ "$have" = "$want" ] || die "wasm-bindgen CLI is '${have:-missing}', Cargo.lock has $want: run 'make setup'"

  # The name section is about half the module (what `strip` would have removed);
  # ROTA_WASM_BINDGEN_FLAGS= (empty) keeps it, for readable stack traces.
  local flags="${ROTA_WASM_BINDGEN_FLAGS---remove-name-section --remove-producers-section}"
  local target=web dir="$PKG/web" stamp t0
  # An output of an earlier layout (`--target nodejs`) that nothing loads any more.
  rm -rf "$PKG/node"
  # The stamp records the CLI version and flags; redo when the input is newer than
  # the stamp, the CLI or flags changed, or the output went missing.
  stamp="$ROOT/target/wasm-js/bindgen-$target.stamp"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$in" ] && [ "$(cat "$stamp")" = "$have $flags" ] &&
     [ -f "$dir/rota_wasm_bg.wasm" ] && [ -f "$dir/rota_wasm.js" ]; then
    note "wasm-bindgen --target $target: up to date (${dir#"$ROOT"/})"
    return
  fi
  t0=$SECONDS
  step "wasm: wasm-bindgen --target $target --out-dir ${dir#"$ROOT"/}"
  mkdir -p "$dir"
  # shellcheck disable=SC2086  # $flags is a list of flags
  wasm-bindgen --target "$target" --out-dir "$dir" $flags "$in"
  echo "$have $flags" >"$stamp"
  note "done in $((SECONDS - t0)) s ($(wc -c <"$dir/rota_wasm_bg.wasm") bytes wasm)"
}

[ $# -gt 0 ] || set -- abi js
for what in "$@"; do
  case "$what" in
    abi) build_abi ;;
    js)  build_js ;;
    *) die "unknown artefact '$what' (abi|js)" ;;
  esac
done
