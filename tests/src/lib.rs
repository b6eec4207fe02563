//! # rota-conformance: the same decisions on every host
//!
//! DESIGN.md: "Same document + same inputs = byte-identical outputs, on every host:
//! native, wasmtime, Node, browser. Conformance tests prove it." This crate holds the
//! two kinds of proof and the Rust runners:
//!
//! * **Vectors** (`vectors/*.json`, format in `README.md` and [`vector`]): hand-checked
//!   scenarios, each a document, options and a timed list of steps with the exact
//!   answer expected, checked against DESIGN.md and the seeds by reading. Every host
//!   runs every vector through the same [`Host`] contract: create, step (JSON text in,
//!   JSON text out), query.
//! * **Random traces** ([`traces`]): 1,000 input sequences drawn from one seed
//!   (splitmix64), bad inputs included, generated against the native core; every other
//!   host must give byte-identical output text (compared by FNV-1a hashes, the first
//!   differing step printed with the seed).
//!
//! The runners: `runners/native.rs` and `runners/wasmtime.rs` (cargo tests of this
//! crate), `runners/node/` (node:test, from the packed npm tarball) and
//! `runners/browser/` (headless Chromium). `tests/run.sh` runs them all; `make test`
//! calls it.

#![forbid(unsafe_code)]

pub mod diff;
pub mod fnv;
pub mod host;
pub mod jsonfmt;
pub mod matching;
pub mod prng;
pub mod state_file;
pub mod traces;
pub mod vector;

pub use host::{Host, NativeHost};
pub use vector::{load_vectors, Step, Vector};

use std::path::PathBuf;

/// The repository root (this crate lives in `tests/`).
pub fn repo_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}

/// Where the vectors live.
pub fn vectors_dir() -> PathBuf {
    repo_root().join("tests").join("vectors")
}

/// Where generated files go (`target/conformance/`).
pub fn out_dir() -> PathBuf {
    repo_root().join("target").join("conformance")
}
