//! Checks the artefacts that `make wasm` builds from this crate:
//!
//! - `host-wasmtime/policy/rota_policy.wasm` (feature `abi`): a valid module with ZERO
//!   imports that exports the plain-ABI functions, `rota_abi_version` first of all;
//! - `npm/pkg/{web,node}/rota_wasm_bg.wasm` (feature `js`, after wasm-bindgen): present
//!   and valid.
//!
//! These read files; they do not build them. Run `make wasm` (or `make test`) first.

use std::path::PathBuf;

use wasmparser::{ExternalKind, Parser, Payload};

/// The repository root (this crate lives in `wasm/`).
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("wasm/ has a parent")
        .to_path_buf()
}

fn read_artefact(rel: &str) -> Vec<u8> {
    let path = repo_root().join(rel);
    match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => panic!(
            "cannot read {} ({e}): build it with `make wasm` (or run everything with `make test`)",
            path.display()
        ),
    }
}

/// A module's imports as `module::name` and its exports as `(name, kind)`.
struct Surface {
    imports: Vec<String>,
    exports: Vec<(String, ExternalKind)>,
}

fn surface(bytes: &[u8]) -> Surface {
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.expect("parses as WebAssembly") {
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.expect("import entry");
                    imports.push(format!("{}::{}", import.module, import.name));
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.expect("export entry");
                    exports.push((export.name.to_string(), export.kind));
                }
            }
            _ => {}
        }
    }
    Surface { imports, exports }
}

const POLICY: &str = "host-wasmtime/policy/rota_policy.wasm";

#[test]
fn policy_module_is_valid_wasm() {
    let bytes = read_artefact(POLICY);
    wasmparser::validate(&bytes).unwrap_or_else(|e| panic!("{POLICY} does not validate: {e}"));
}

#[test]
fn policy_module_has_zero_imports() {
    let s = surface(&read_artefact(POLICY));
    assert!(
        s.imports.is_empty(),
        "{POLICY} must import nothing (a wasmtime host gives it no functions), but imports: {:?}",
        s.imports
    );
}

#[test]
fn policy_module_exports_abi_version() {
    let s = surface(&read_artefact(POLICY));
    assert!(
        s.exports
            .iter()
            .any(|(name, kind)| name == "rota_abi_version" && *kind == ExternalKind::Func),
        "{POLICY} must export the function rota_abi_version; exports: {:?}",
        s.exports
    );
}

#[test]
fn wasm_bindgen_outputs_exist_and_validate() {
    let rel = "npm/pkg/web/rota_wasm_bg.wasm";
    let bytes = read_artefact(rel);
    wasmparser::validate(&bytes).unwrap_or_else(|e| panic!("{rel} does not validate: {e}"));
    let glue = rel.replace("_bg.wasm", ".js");
    assert!(
        repo_root().join(&glue).is_file(),
        "{glue} is missing: build it with `make wasm`"
    );
}
