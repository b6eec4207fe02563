//! The README says what the code does: it shows the examples as CI builds them (and
//! as `scripts/test-dependent.sh` runs `lease`), and lists every metric the host records.

fn read(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Each Rust snippet of the README is an example that cargo builds (`shared` with
/// `--features shared`), quoted whole: its imports included, so it compiles as written.
#[test]
fn the_readme_shows_the_examples_as_they_are() {
    let readme = read("README.md");
    let examples = ["examples/lease.rs", "examples/shared.rs"];
    for path in examples {
        let example = read(path);
        assert!(
            readme.contains(&format!("```rust\n{example}```")),
            "README.md's example differs from {path}: copy the file in"
        );
    }
    assert_eq!(
        readme.matches("```rust").count(),
        examples.len(),
        "a Rust snippet in README.md that is not one of {examples:?}: make it an example"
    );
}

#[test]
fn the_readme_lists_every_metric() {
    use rota_host::telemetry::*;
    let readme = read("README.md");
    for name in [
        LEASES_GRANTED,
        LEASE_WAIT,
        EXCLUSIONS,
        PROBES,
        QUEUE_LENGTH,
        STATE_WRITES,
        SLOTS_IN_USE,
        CAPACITY,
        EXCLUDED,
        FAILURES,
        BUDGET_WAITS,
    ] {
        assert!(readme.contains(&format!("| `{name}` |")), "{name}");
    }
}
