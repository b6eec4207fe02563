#!/usr/bin/env bash
# Variables set here are used by the scripts that source this file.
# shellcheck disable=SC2034
# Shared helpers, sourced by the other scripts in scripts/. Not run on its own.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT

# Native work uses rustup's toolchain: keep ~/.cargo/bin first on PATH.
case ":$PATH:" in
  "$HOME/.cargo/bin:"*) ;;
  *) export PATH="$HOME/.cargo/bin:$PATH" ;;
esac

step() { printf '==> %s\n' "$*" >&2; }
note() { printf '    %s\n' "$*" >&2; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }

# Run a command as root (directly, or through sudo when not root).
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else die "need root to run: $*"
  fi
}

# The version of the wasm-bindgen crate in Cargo.lock (the CLI must match it exactly).
wasm_bindgen_lock_version() {
  awk '
    /^\[\[package\]\]/ { name = "" }
    /^name = /         { name = $3; gsub(/"/, "", name) }
    /^version = / && name == "wasm-bindgen" { v = $3; gsub(/"/, "", v); print v; exit }
  ' "$ROOT/Cargo.lock"
}

# The version of the wasm-bindgen CLI on PATH, or nothing.
wasm_bindgen_cli_version() {
  command -v wasm-bindgen >/dev/null 2>&1 || return 0
  wasm-bindgen --version 2>/dev/null | awk '{ print $2 }'
}

# --- wasm32 toolchain -------------------------------------------------------------
# Two ways to build for wasm32-unknown-unknown:
#   rustup  — rustup's own wasm32-unknown-unknown target (the usual way, with internet);
#   debian  — Debian's rustc-web/cargo-web/rust-web-src + -Zbuild-std (see
#             /work/shared/TOOLCHAIN.md), linked with rustup's rust-lld.
# ROTA_WASM_TOOLCHAIN=rustup|debian forces one.

DEBIAN_RUSTC=/usr/bin/rustc
DEBIAN_CARGO=/usr/bin/cargo
DEBIAN_RUST_SRC=/usr/lib/rustlib/src/rust/library
DEBIAN_RUST_PKGS=(rustc-web cargo-web rust-web-src)

rustup_has_wasm32() {
  command -v rustup >/dev/null 2>&1 &&
    rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown
}

debian_rust_present() {
  [ -x "$DEBIAN_RUSTC" ] && [ -x "$DEBIAN_CARGO" ] && [ -d "$DEBIAN_RUST_SRC" ]
}

# Prints the wasm linker for the Debian recipe: rustup's rust-lld, else a wasm-ld.
find_wasm_linker() {
  local host sysroot cand
  if command -v rustc >/dev/null 2>&1; then
    host="$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')"
    sysroot="$(rustc --print sysroot 2>/dev/null || true)"
    cand="$sysroot/lib/rustlib/$host/bin/rust-lld"
    if [ -n "$host" ] && [ -x "$cand" ]; then echo "$cand"; return 0; fi
  fi
  for cand in "$HOME"/.rustup/toolchains/*/lib/rustlib/*/bin/rust-lld; do
    if [ -x "$cand" ]; then echo "$cand"; return 0; fi
  done
  for cand in rust-lld wasm-ld wasm-ld-19; do
    if command -v "$cand" >/dev/null 2>&1; then command -v "$cand"; return 0; fi
  done
  return 1
}

# Prints which wasm toolchain to use (rustup|debian), or nothing when none is there.
wasm_toolchain() {
  case "${ROTA_WASM_TOOLCHAIN:-}" in
    rustup|debian) echo "$ROTA_WASM_TOOLCHAIN"; return 0 ;;
    "") ;;
    *) die "ROTA_WASM_TOOLCHAIN must be rustup or debian, not '$ROTA_WASM_TOOLCHAIN'" ;;
  esac
  if rustup_has_wasm32; then echo rustup
  elif debian_rust_present; then echo debian
  fi
}

# Fills WASM_CARGO (the cargo command, with its environment) and WASM_CARGO_FLAGS
# (extra flags for `cargo build`) for the toolchain that wasm_toolchain picks.
wasm_cargo_setup() {
  local tc linker
  tc="$(wasm_toolchain)"
  case "$tc" in
    rustup)
      WASM_CARGO=(cargo)
      WASM_CARGO_FLAGS=()
      ;;
    debian)
      debian_rust_present || die "Debian rust-web toolchain missing: run 'make setup'"
      linker="$(find_wasm_linker)" || die "no rust-lld or wasm-ld found: run 'make setup'"
      # Smaller modules: std built for size, no panic messages or locations (a panic
      # is a trap, which every host survives). Not -Zfmt-debug=none: serde quotes values
      # in error messages with Debug, and every host must say the same.
      WASM_CARGO=(env RUSTC="$DEBIAN_RUSTC" RUSTC_BOOTSTRAP=1
                  CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER="$linker"
                  RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort -Zlocation-detail=none"
                  "$DEBIAN_CARGO")
      WASM_CARGO_FLAGS=("-Zbuild-std=std,panic_abort" "-Zbuild-std-features=optimize_for_size")
      ;;
    *) die "no wasm32 toolchain: run 'make setup'" ;;
  esac
  WASM_TOOLCHAIN="$tc"
}
