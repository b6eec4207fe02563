#!/usr/bin/env bash
# Installs what the build and the tests need, when it is missing. Idempotent and
# non-interactive; a second run only checks (well under a second).
#
#   scripts/setup.sh [all|native|wasm|node|browser|postgres]...   (default: all)
#
#   native   rustup's cargo with rustfmt and clippy, a C linker (build-essential)
#   wasm     a wasm32 toolchain (rustup's target, else Debian's rustc-web recipe)
#            and wasm-bindgen-cli at exactly the wasm-bindgen version in Cargo.lock
#   node     npm packages in npm/ (when npm/package.json exists)
#   browser  Debian's chromium for browser tests
#   postgres Debian's postgresql server (the shared-roster tests start their own with
#            scripts/postgres.sh; the package's own cluster is not used)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# apt-get update, unless the package lists were refreshed in the last hour (so one
# `make setup` that needs several packages updates once).
apt_update_once() {
  if [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -60 2>/dev/null | head -n1)" ]; then
    return 0
  fi
  note "apt-get update"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
}

apt_install() {
  command -v apt-get >/dev/null 2>&1 ||
    die "need Debian packages $* but there is no apt-get (with internet: rustup target add wasm32-unknown-unknown)"
  local t0=$SECONDS
  note "apt-get install $*"
  apt_update_once
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" >/dev/null
  note "installed in $((SECONDS - t0)) s"
}

setup_native() {
  step "setup: native Rust toolchain"
  command -v cargo >/dev/null 2>&1 || die "cargo not found: install rustup (https://rustup.rs)"
  note "$(cargo --version)"
  if ! command -v cc >/dev/null 2>&1; then
    note "no C compiler/linker"
    apt_install build-essential
  fi
  local comp sub
  for comp in rustfmt clippy; do
    sub="${comp/rustfmt/fmt}"
    if ! cargo "$sub" --version >/dev/null 2>&1; then
      note "rustup component $comp missing: rustup component add $comp"
      timeout 120 rustup component add "$comp" ||
        warn "could not add rustup component $comp ('make test' needs it)"
    fi
  done
}

setup_wasm() {
  step "setup: wasm32 toolchain"
  local forced="${ROTA_WASM_TOOLCHAIN:-}"
  [ -z "$forced" ] || note "ROTA_WASM_TOOLCHAIN=$forced"
  if [ "$forced" != debian ] && rustup_has_wasm32; then
    note "rustup target wasm32-unknown-unknown: installed"
  elif [ "$forced" = rustup ]; then
    die "ROTA_WASM_TOOLCHAIN=rustup but rustup has no wasm32-unknown-unknown target"
  else
    note "no rustup wasm32 target: using Debian's rustc-web + -Zbuild-std"
    local pkgs=()
    debian_rust_present || pkgs+=("${DEBIAN_RUST_PKGS[@]}")
    find_wasm_linker >/dev/null || pkgs+=(lld-19)   # wasm-ld-19, when rustup has no rust-lld
    [ ${#pkgs[@]} -eq 0 ] || apt_install "${pkgs[@]}"
    debian_rust_present || die "Debian's rust-web toolchain is still incomplete"
    note "$("$DEBIAN_RUSTC" --version) at $DEBIAN_RUSTC, library source present"
    local linker
    linker="$(find_wasm_linker)" || die "still no rust-lld or wasm-ld"
    note "linker: $linker"
  fi

  step "setup: wasm-bindgen-cli"
  local want have t0
  want="$(wasm_bindgen_lock_version)"
  [ -n "$want" ] || die "no wasm-bindgen in Cargo.lock"
  have="$(wasm_bindgen_cli_version)"
  if [ "$have" = "$want" ]; then
    note "wasm-bindgen $have: matches Cargo.lock"
  else
    note "have '${have:-none}', Cargo.lock has $want: cargo install wasm-bindgen-cli --version $want (a few minutes)"
    t0=$SECONDS
    # Not --locked: the CLI's locked versions are not all served by this registry.
    cargo install wasm-bindgen-cli --version "$want"
    have="$(wasm_bindgen_cli_version)"
    [ "$have" = "$want" ] || die "wasm-bindgen is '$have' after install, want $want (is ~/.cargo/bin first on PATH?)"
    note "installed in $((SECONDS - t0)) s"
  fi
}

setup_node() {
  step "setup: npm packages"
  local dir="$ROOT/npm"
  if [ ! -f "$dir/package.json" ]; then
    note "no npm/package.json yet: nothing to install"
    return 0
  fi
  command -v npm >/dev/null 2>&1 || die "npm not found (Node 20+ is needed)"
  local stamp="$dir/node_modules/.package-lock.json"
  if [ -f "$stamp" ] && [ ! "$dir/package.json" -nt "$stamp" ] &&
     { [ ! -f "$dir/package-lock.json" ] || [ ! "$dir/package-lock.json" -nt "$stamp" ]; }; then
    note "npm/node_modules up to date"
    return 0
  fi
  # Browsers come from Debian, never from a test tool's own download.
  export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PUPPETEER_SKIP_DOWNLOAD=1
  if [ -f "$dir/package-lock.json" ]; then
    note "npm ci"
    (cd "$dir" && npm ci --no-audit --no-fund)
  else
    note "npm install"
    (cd "$dir" && npm install --no-audit --no-fund)
  fi
  mkdir -p "$dir/node_modules" && touch "$stamp"
}

setup_browser() {
  step "setup: chromium (browser tests)"
  if [ -x /usr/bin/chromium ]; then
    note "/usr/bin/chromium: present"
  else
    apt_install chromium fonts-liberation
    [ -x /usr/bin/chromium ] || die "/usr/bin/chromium still missing"
  fi
}

setup_postgres() {
  step "setup: PostgreSQL (shared-roster tests)"
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
      note "$dir: present"
      return 0
    fi
  done
  apt_install postgresql
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/initdb" ] && return 0
  done
  die "postgresql installed but no /usr/lib/postgresql/*/bin/initdb"
}

[ $# -gt 0 ] || set -- all
for part in "$@"; do
  case "$part" in
    all)     setup_native; setup_wasm; setup_node; setup_browser; setup_postgres ;;
    native)  setup_native ;;
    wasm)    setup_wasm ;;
    node)    setup_node ;;
    browser) setup_browser ;;
    postgres) setup_postgres ;;
    *) die "unknown setup part '$part' (all|native|wasm|node|browser|postgres)" ;;
  esac
done
