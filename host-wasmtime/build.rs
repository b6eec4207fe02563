//! Bundles the policy module when `make wasm` has built it.
//!
//! `include_bytes!` of a missing file would break `cargo clippy`/`cargo test` on a
//! fresh clone before the wasm build ran; instead the crate compiles either way and,
//! without the file, says at run time: "policy module not built; run `make wasm`".

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("policy");
    let wasm = dir.join("rota_policy.wasm");
    // Watch the directory: it changes when the file appears, goes or is rewritten.
    // (A missing path would rerun this script on every build; policy/ holds a README.)
    println!("cargo::rerun-if-changed=build.rs");
    if dir.is_dir() {
        println!("cargo::rerun-if-changed={}", dir.display());
    }
    println!("cargo::rustc-check-cfg=cfg(rota_policy_bundled)");
    if wasm.is_file() {
        println!("cargo::rustc-cfg=rota_policy_bundled");
        println!("cargo::rustc-env=ROTA_POLICY_WASM={}", wasm.display());
    }
}
