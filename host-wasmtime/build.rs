//! Bundles the policy module, `policy/rota_policy.wasm`, into the crate.
//!
//! Where the module comes from, the first way that works:
//! 1. the file is there: a package from a registry ships it (`include` in Cargo.toml),
//!    and `make wasm` writes it in a checkout;
//! 2. the crate sits in a rota checkout (a path or git dependency, or this workspace)
//!    whose `scripts/build-wasm.sh` can build it: that runs once (`abi` only, the same
//!    as `make wasm-abi`);
//! 3. otherwise the build fails, saying what to run.
//!
//! `ROTA_POLICY_OPTIONAL=1` builds without a module instead: the crate then answers
//! `HostError::ModuleNotBuilt` at run time unless given a module path.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dir = manifest.join("policy");
    let wasm = dir.join("rota_policy.wasm");
    // Watch the directory: it changes when the file appears, goes or is rewritten.
    // (A missing path would rerun this script on every build; policy/ holds a README.)
    println!("cargo::rerun-if-changed=build.rs");
    if dir.is_dir() {
        println!("cargo::rerun-if-changed={}", dir.display());
    }
    println!("cargo::rerun-if-env-changed=ROTA_POLICY_OPTIONAL");
    println!("cargo::rustc-check-cfg=cfg(rota_policy_bundled)");

    if !wasm.is_file() {
        let optional = std::env::var_os("ROTA_POLICY_OPTIONAL").is_some_and(|v| v == "1");
        if optional {
            println!(
                "cargo::warning=rota-host built without its policy module (ROTA_POLICY_OPTIONAL=1)"
            );
            return;
        }
        let script = manifest.join("../scripts/build-wasm.sh");
        if let Err(why) = build_with(&script) {
            panic!(
                "\n\nrota-host: the policy module {} is missing, and {why}.\n\
                 In a rota checkout, run `make wasm` (it installs the wasm toolchain first: \
                 `make setup-wasm`), then build again.\n\
                 To build without the module (it must then be given at run time with \
                 `RosterBuilder::module_path` or `rota --module`), set ROTA_POLICY_OPTIONAL=1.\n",
                wasm.display()
            );
        }
        println!(
            "cargo::warning=rota-host: built the policy module with {} abi",
            script.display()
        );
    }
    println!("cargo::rustc-cfg=rota_policy_bundled");
    println!("cargo::rustc-env=ROTA_POLICY_WASM={}", wasm.display());
}

/// Runs the checkout's `scripts/build-wasm.sh abi`, in an environment without the
/// outer cargo's build-script variables (the wasm build has its own toolchain, flags
/// and target dir).
fn build_with(script: &Path) -> Result<(), String> {
    if !script.is_file() {
        return Err(format!(
            "this is no rota checkout that could build it ({} is not there)",
            script.display()
        ));
    }
    let mut command = Command::new("bash");
    command.arg(script).arg("abi");
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let outer = (key.starts_with("CARGO") && key != "CARGO_HOME")
            || key.starts_with("RUSTC")
            || key.starts_with("RUSTDOC")
            || key.starts_with("DEP_")
            || matches!(
                key,
                "RUSTFLAGS"
                    | "TARGET"
                    | "HOST"
                    | "PROFILE"
                    | "OPT_LEVEL"
                    | "DEBUG"
                    | "OUT_DIR"
                    | "NUM_JOBS"
                    | "MAKEFLAGS"
                    | "MFLAGS"
            );
        if outer {
            command.env_remove(key);
        }
    }
    let output = command
        .output()
        .map_err(|e| format!("running {} failed: {e}", script.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!(
        "`{} abi` could not build it ({}):\n    {}",
        script.display(),
        output.status,
        tail.join("\n    ")
    ))
}
