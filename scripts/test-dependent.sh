#!/usr/bin/env bash
# rota-host as a dependency, the way another project uses it: a scratch crate outside
# the workspace depends on `host-wasmtime` by path in a clean clone of this repository
# (HEAD, committed work only: no policy module there, so rota-host's build script must
# build it) and runs the README's example (host-wasmtime/examples/lease.rs).
#
# Fast: the scratch crate builds into the workspace's target dir with its Cargo.lock
# (wasmtime and the rest are not compiled again), and the clone's wasm build starts
# from a copy of target/wasm-abi (only rota-core and rota-wasm compile again).
#
#   scripts/test-dependent.sh     (make test runs it as test-dependent)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT" || exit

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
t0=$SECONDS

step "rota-host as a path dependency of a crate outside the workspace"
rev="$(git rev-parse HEAD)"
git clone -q --no-checkout "$ROOT" "$tmp/rota"
git -C "$tmp/rota" checkout -q "$rev"
[ ! -e "$tmp/rota/host-wasmtime/policy/rota_policy.wasm" ] ||
  die "the clone has a policy module: it is not clean"
if [ -d "$ROOT/target/wasm-abi" ]; then
  mkdir -p "$tmp/rota/target"
  cp -a "$ROOT/target/wasm-abi" "$tmp/rota/target/"
fi

mkdir -p "$tmp/app/src"
cat >"$tmp/app/Cargo.toml" <<'EOF'
[package]
name = "rota-dependent"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rota-host = { path = "../rota/host-wasmtime" }
serde_json = "1"
tokio = { version = "1", features = ["macros", "rt-multi-thread"] }

# Not a member of any workspace around it.
[workspace]
EOF
cp host-wasmtime/examples/lease.rs "$tmp/app/src/main.rs"
cp Cargo.lock "$tmp/app/Cargo.lock"

note "clone: $tmp/rota ($rev); crate: $tmp/app"
CARGO_TARGET_DIR="$ROOT/target" ROTA_CACHE_DIR="$tmp/cache" \
  cargo run -q --manifest-path "$tmp/app/Cargo.toml" >"$tmp/out.txt" 2>"$tmp/err.txt" || {
  cat "$tmp/err.txt" >&2
  die "the scratch crate did not build or run"
}
[ -f "$tmp/rota/host-wasmtime/policy/rota_policy.wasm" ] ||
  die "rota-host's build script did not build the policy module in the clone"
for want in "coding on claude-sonnet" "excluded: Some(" "next lease on local-qwen" "a coder now would go to"; do
  grep -qF "$want" "$tmp/out.txt" || { cat "$tmp/out.txt" "$tmp/err.txt" >&2; die "the example's output lacks '$want'"; }
done
sed 's/^/    | /' "$tmp/out.txt" >&2
note "ok: built the policy module in the clone and ran the example ($((SECONDS - t0)) s)"
