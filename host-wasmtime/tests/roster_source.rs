//! A roster file and its repository overlay, as `rota check … --repo` and the
//! builder read them (`RosterSource`): an executor id listed twice in one file is
//! refused before the merge, as the npm package refuses it (issue 42: Rust merged
//! it silently), with the core's wording (`rota_core::duplicate_ids`).

use rota_host::{HostError, RosterSource};

#[test]
fn an_id_listed_twice_in_a_file_with_an_overlay_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let roster = dir.path().join("roster.json");
    let repo = dir.path().join("repo.json");
    std::fs::write(
        &roster,
        r#"{"executors": [{"id": "a", "harness": "pi", "roles": ["coder"]},
                          {"id": "a", "harness": "pi", "roles": ["reviewer"]}]}"#,
    )
    .expect("written");
    std::fs::write(
        &repo,
        r#"{"executors": [{"id": "b", "harness": "pi", "roles": ["coder"]}]}"#,
    )
    .expect("written");
    let source = RosterSource {
        roster: Some(roster.clone()),
        repo: Some(repo.clone()),
        executors: Vec::new(),
    };
    match source.load() {
        Err(HostError::Invalid { violations }) => {
            assert_eq!(violations.len(), 1, "{violations:?}");
            assert_eq!(
                violations[0].path,
                format!("{}: executors[1].id", roster.display())
            );
            assert_eq!(violations[0].message, "executor 'a' is listed twice");
        }
        other => panic!("merged silently: {other:?}"),
    }
    // Without the repeat, the two merge.
    std::fs::write(
        &roster,
        r#"{"executors": [{"id": "a", "harness": "pi", "roles": ["coder"]}]}"#,
    )
    .expect("written");
    let merged = source.load().expect("merged");
    assert_eq!(merged["executors"].as_array().map(Vec::len), Some(2));
}
