//! The `rota` command, run as a user runs it: every subcommand, good and bad input.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

fn rota(args: &[&str]) -> Output {
    // Load the bundled module once: common::policy() fills the shared cache first.
    let _ = common::policy();
    Command::new(env!("CARGO_BIN_EXE_rota"))
        .arg("--cache-dir")
        .arg(common::cache_dir())
        .args(args)
        .output()
        .expect("run rota")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/roster.json")
        .display()
        .to_string()
}

fn write(dir: &Path, name: &str, contents: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write");
    path.display().to_string()
}

#[test]
fn check_prints_a_summary_of_a_clean_roster() {
    let out = rota(&["check", &example()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for id in [
        "claude-opus",
        "claude-sonnet",
        "codex",
        "local-qwen",
        "pi-gemini",
        "ci-workers",
    ] {
        assert!(stdout.contains(id), "{id} missing from:\n{stdout}");
    }
    assert!(stdout.contains("slots per role"), "{stdout}");
    assert!(
        stdout.contains("health http://127.0.0.1:1234/health"),
        "{stdout}"
    );
}

#[test]
fn check_reports_every_violation_with_its_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = write(
        dir.path(),
        "bad.json",
        &json!({ "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder", "chef"], "slots": 0 },
            { "id": "a", "roles": ["planner"], "cooldown": { "outage": "soon" } },
        ] })
        .to_string(),
    );
    let out = rota(&["check", &bad]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for place in [
        "executors[0].roles",
        "executors[0].slots",
        "executors[1].harness",
        "executors[1].cooldown.outage",
        "executors[1].id",
    ] {
        assert!(
            stderr.contains(&format!("{bad}: {place}: ")),
            "{place} missing from:\n{stderr}"
        );
    }
    assert!(stderr.contains("5 violations"), "{stderr}");

    let not_json = write(dir.path(), "broken.json", "{ \"executors\": [");
    let out = rota(&["check", &not_json]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not JSON"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn check_with_an_overlay_narrowing_and_kinds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let overlay = write(
        dir.path(),
        "repo.json",
        &json!({ "executors": [ { "id": "ci-workers", "disabled": true } ] }).to_string(),
    );
    let out = rota(&["check", &example(), "--repo", &overlay, "--kinds", "k8s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("ci-workers"));
    let out = rota(&["check", &example(), "--kinds", "k8s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("executors[5].kind"),
        "{}",
        text(&out.stderr)
    );
    // An unknown id is ignored with a warning naming it, as the seed's narrowing
    // does (issue 13); `--strict` makes the warning fail the check.
    let out = rota(&["check", &example(), "--executors", "codex,nobody"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("warning: executors: executor 'nobody' is not in the roster"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("1 executor;"));
    let out = rota(&[
        "check",
        &example(),
        "--executors",
        "codex,nobody",
        "--strict",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let out = rota(&["check", &example(), "--executors", "codex"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("1 executor;"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn check_warns_about_a_literal_secret_in_env_and_strict_fails_on_it() {
    // Issue 13 item 5: a literal secret passed `rota check` silently.
    let dir = tempfile::tempdir().expect("tempdir");
    let roster = write(
        dir.path(),
        "secret.json",
        &json!({ "executors": [
            { "id": "a", "harness": "claude", "roles": ["coder"],
              "env": { "ANTHROPIC_API_KEY": "sk-ant-api03-0123456789abcdef", "HOME_REF": "${HOME}" } },
        ] })
        .to_string(),
    );
    let out = rota(&["check", &roster]);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning keeps the roster valid: {stderr}"
    );
    assert!(
        stderr.contains("warning: executors[0].env.ANTHROPIC_API_KEY:"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("0123456789abcdef"),
        "the value is never printed: {stderr}"
    );
    let out = rota(&["check", &roster, "--strict"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("1 warning in"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn unreadable_paths_exit_2() {
    let out = rota(&["check", "/nonexistent/roster.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read /nonexistent/roster.json"));
    let out = rota(&["replay", "/nonexistent/trace.json"]);
    assert_eq!(out.status.code(), Some(2));
    let out = rota(&[
        "explain",
        &example(),
        "--role",
        "coder",
        "--state",
        "/nonexistent/state.json",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = rota(&["--module", "/nonexistent/policy.wasm", "check", &example()]);
    assert_eq!(out.status.code(), Some(2));
    let out = rota(&["simulate", "/nonexistent/roster.json"]);
    assert_eq!(out.status.code(), Some(2));
    // A directory is not a roster file either.
    let out = rota(&["check", env!("CARGO_MANIFEST_DIR")]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn simulate_is_deterministic_and_its_trace_replays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = dir.path().join("one.json").display().to_string();
    let second = dir.path().join("two.json").display().to_string();
    let out = rota(&["simulate", "--hours", "2", "--seed", "7", "--trace", &first]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for row in [
        "leases granted",
        "mean wait",
        "p99 wait",
        "exclusions by kind",
        "utilization per executor",
        "claude-opus",
    ] {
        assert!(stdout.contains(row), "{row} missing from:\n{stdout}");
    }
    assert!(
        text(&out.stderr).contains("100%"),
        "a progress bar: {}",
        text(&out.stderr)
    );
    let out = rota(&[
        "simulate", "--hours", "2", "--seed", "7", "--trace", &second, "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read(&first).expect("trace"),
        std::fs::read(&second).expect("trace"),
        "the same seed gives the same trace"
    );
    let trace: Value =
        serde_json::from_slice(&std::fs::read(&first).expect("trace")).expect("JSON");
    assert_eq!(trace["format"], "rota-trace");
    assert!(trace["steps"].as_array().is_some_and(|s| s.len() > 100));

    let out = rota(&["replay", &first]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("every output matches"));
    let out = rota(&["replay", "--native", &first]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn replay_reports_the_first_difference() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.json").display().to_string();
    let out = rota(&[
        "simulate", "--hours", "1", "--seed", "3", "--trace", &path, "-q",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let mut trace: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("trace")).expect("JSON");
    let steps = trace["steps"].as_array_mut().expect("steps");
    let (index, _) = steps
        .iter()
        .enumerate()
        .find(|(_, s)| {
            s["outputs"]
                .as_array()
                .is_some_and(|o| o.iter().any(|o| o["type"] == "granted"))
        })
        .expect("a grant");
    let tampered = steps[index]["outputs"]
        .as_array_mut()
        .and_then(|o| o.iter_mut().find(|o| o["type"] == "granted"))
        .expect("a grant");
    tampered["executor"] = json!("somebody-else");
    let tampered_path = write(dir.path(), "tampered.json", &trace.to_string());
    let out = rota(&["replay", &tampered_path]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("step {index} differs")),
        "{stderr}"
    );
    assert!(
        stderr.contains("somebody-else"),
        "expected vs actual: {stderr}"
    );

    let junk = write(dir.path(), "junk.json", r#"{"format":"something else"}"#);
    let out = rota(&["replay", &junk]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not a rota trace"));
}

#[test]
fn explain_restores_the_state_file_then_explains() {
    let dir = tempfile::tempdir().expect("tempdir");
    let now: u64 = 1_800_000_000_000;
    let state = write(
        dir.path(),
        "state.json",
        &json!({ "version": 1, "exclusions": [
            { "id": "codex", "reason": "usage limit", "kind": "until", "until": now + 3_600_000 },
            { "id": "pi-gemini", "reason": "operator", "kind": "manual" },
        ] })
        .to_string(),
    );
    let now_arg = now.to_string();
    let out = rota(&[
        "explain",
        &example(),
        "--state",
        &state,
        "--role",
        "judge",
        "--now",
        &now_arg,
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("would go to claude-opus"), "{stdout}");
    let codex = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("codex"))
        .expect("a codex line");
    assert!(
        codex.contains("no") && codex.contains("usage limit"),
        "{codex}"
    );
    let sonnet = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("claude-sonnet"))
        .expect("a line");
    assert!(sonnet.contains("lacks the role"), "{sonnet}");

    let out = rota(&[
        "explain",
        &example(),
        "--state",
        &state,
        "--role",
        "judge",
        "--now",
        &now_arg,
        "--json",
    ]);
    let value: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(value["pick"], "claude-opus");

    let corrupt = write(dir.path(), "corrupt.json", "nope");
    let out = rota(&[
        "explain",
        &example(),
        "--state",
        &corrupt,
        "--role",
        "judge",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not a state file"));
    assert_eq!(
        std::fs::read_to_string(&corrupt).expect("left alone"),
        "nope"
    );

    let out = rota(&["explain", &example(), "--role", "chef"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("unknown role"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn simulate_traces_redact_literal_env_values_and_still_replay() {
    // Issue 13 item 5: a literal secret in `env` was copied into `--trace` files.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut roster: Value =
        serde_json::from_str(&std::fs::read_to_string(example()).expect("example")).unwrap();
    roster["executors"][0]["env"] = json!({
        "ANTHROPIC_API_KEY": "sk-ant-api03-literal-secret-0123456789",
        "REF": "${ANTHROPIC_API_KEY}"
    });
    let path = write(dir.path(), "roster.json", &roster.to_string());
    let trace = dir.path().join("trace.json").display().to_string();
    let out = rota(&[
        "simulate", &path, "--hours", "1", "--quiet", "--trace", &trace,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&trace).expect("trace");
    assert!(
        !written.contains("literal-secret"),
        "the secret is in the trace"
    );
    let parsed: Value = serde_json::from_str(&written).expect("trace JSON");
    assert_eq!(
        parsed["document"]["executors"][0]["env"],
        json!({ "ANTHROPIC_API_KEY": "[redacted]", "REF": "${ANTHROPIC_API_KEY}" })
    );
    // Env values decide nothing: the redacted trace replays to the same outputs.
    let out = rota(&["replay", &trace]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
