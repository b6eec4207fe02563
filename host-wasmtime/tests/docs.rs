//! The README says what the code does: it shows the example as CI builds it (and as
//! `scripts/test-dependent.sh` runs it), and lists every metric the host records.

fn read(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_readme_shows_the_example_as_it_is() {
    let example = read("examples/lease.rs");
    assert!(
        read("README.md").contains(&format!("```rust\n{example}```")),
        "README.md's library example differs from examples/lease.rs: copy the file in"
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
    ] {
        assert!(readme.contains(&format!("| `{name}` |")), "{name}");
    }
}
