//! The native runner: every vector through `rota_core::json` (the reference host),
//! with the checks only the native host can make (a rejected input leaves the whole
//! exported state unchanged; every persist decision restores to the same exclusions;
//! `check_invariants` after every input), and the random traces replayed twice to
//! catch hidden nondeterminism.

use rota_conformance::host::{run_all, NativeHost};
use rota_conformance::traces::{self, describe_mismatch, replay};
use rota_conformance::{load_vectors, vectors_dir};

#[test]
fn every_vector_on_native() {
    let vectors = load_vectors(&vectors_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        vectors.len() >= 60,
        "DESIGN.md's behaviours need at least 60 vectors; found {}",
        vectors.len()
    );
    let failures = run_all(&mut NativeHost::new(), &vectors);
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed on native:\n\n{}",
        failures.len(),
        vectors.len(),
        failures.join("\n\n")
    );
}

/// Generating the traces checks the core on every input (invariants, rejected inputs,
/// restores); replaying them in a second policy must give the same hashes (madsim's
/// "run a seed twice and compare").
#[test]
fn random_traces_are_deterministic_on_native() {
    let (file, problems) = traces::generate(traces::DEFAULT_SEED, traces::DEFAULT_COUNT);
    assert!(
        problems.is_empty(),
        "the native core failed its own checks on random traces:\n{}",
        problems.join("\n")
    );
    let mut failures = Vec::new();
    for trace in &file.traces {
        if let Some(m) = replay(&mut NativeHost::unchecked(), trace) {
            failures.push(describe_mismatch("native (second run)", trace, &m));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The state file's rule (`vectors/state-file/`), through `rota_core::state_file`.
#[test]
fn every_state_file_vector_on_native() {
    use rota_conformance::state_file::{
        load_state_file_vectors, run_state_file_vectors, state_file_dir, NativeStateFile,
    };
    let vectors = load_state_file_vectors(&state_file_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        vectors.len() >= 5,
        "found {} state-file vectors",
        vectors.len()
    );
    let failures = run_state_file_vectors(&mut NativeStateFile, &vectors);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
