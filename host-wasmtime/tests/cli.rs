//! The `rota` command, run as a user runs it: every subcommand, good and bad input.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

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

/// `rota ARGS` with `input` on its standard input.
fn rota_with_stdin(args: &[&str], input: &str) -> Output {
    let _ = common::policy();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rota"))
        .arg("--cache-dir")
        .arg(common::cache_dir())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rota");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("rota's output")
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

/// The example roster's path, borrowed for an argument list.
fn example_str() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/roster.json")
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
    let out = rota(&["check", &example(), "--repo", &overlay]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("ci-workers"));
    // A host that names its kinds refuses an executor without one (the scheduler
    // seed's `validateWorkers`), and one of another kind.
    let out = rota(&["check", &example(), "--repo", &overlay, "--kinds", "k8s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("executors[0].kind: executor 'claude-opus' has no kind"),
        "{}",
        text(&out.stderr)
    );
    let out = rota(&[
        "check",
        &example(),
        "--executors",
        "ci-workers",
        "--kinds",
        "vm",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
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
fn check_warns_about_a_misspelt_field_and_strict_fails_on_it() {
    // Issue 43: `priorty: 2` or `helth:` passed `rota check`, even `--strict`.
    let dir = tempfile::tempdir().expect("tempdir");
    let roster = write(
        dir.path(),
        "typo.json",
        &json!({ "signal": { "outage": ["x"] }, "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "image": "mine" },
            { "id": "b", "harness": "pi", "roles": ["coder"], "priorty": 2 },
        ] })
        .to_string(),
    );
    let out = rota(&["check", &roster]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "still valid: {stderr}");
    assert!(
        stderr.contains("executors[1]: unknown field 'priorty' — did you mean 'priority'?"),
        "{stderr}"
    );
    assert!(
        stderr.contains("unknown field 'signal' — did you mean 'signals'?"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("image"),
        "a field of the user's own: {stderr}"
    );
    let out = rota(&["check", &roster, "--strict"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("2 warnings in"),
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
    // A state file that cannot be read (a directory in its place); one that does
    // not exist yet is an empty state (explain_with_a_state_file_not_there_yet).
    let out = rota(&[
        "explain",
        &example(),
        "--role",
        "coder",
        "--state",
        env!("CARGO_MANIFEST_DIR"),
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
}

#[test]
fn replay_of_a_file_that_is_not_a_trace_exits_2_saying_why() {
    // Exit 1 is "the replay differs"; a file that is not a trace cannot be replayed.
    let dir = tempfile::tempdir().expect("tempdir");
    let junk = write(dir.path(), "junk.json", r#"{"format":"something else"}"#);
    let roster = example();
    let not_json = write(dir.path(), "notes.txt", "steps: none");
    let bad_document = write(
        dir.path(),
        "bad-document.json",
        &json!({ "format": "rota-trace", "version": 1, "steps": [],
                 "document": { "executors": [ { "id": "a", "roles": ["coder"] } ] } })
        .to_string(),
    );
    for (file, says) in [
        (junk.as_str(), "`format` is \"something else\""),
        (roster.as_str(), "`format` is missing"),
        (not_json.as_str(), "not JSON"),
        (bad_document.as_str(), "its document or options"),
    ] {
        for native in [false, true] {
            let mut args = vec!["replay", file];
            if native {
                args.push("--native");
            }
            let out = rota(&args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!(
                    "rota: {file} is not a trace `rota replay` can replay ("
                )) && stderr.contains(says)
                    && stderr.contains("what `rota simulate --trace FILE` writes"),
                "{args:?}: {stderr}"
            );
        }
    }
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
    assert!(
        text(&out.stderr).starts_with(&format!("{corrupt}: the state file is not JSON: ")),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&corrupt).expect("left alone"),
        "nope"
    );
    // A roster given as the state file: what was found, what rota reads, the path.
    let out = rota(&[
        "explain",
        &example(),
        "--state",
        &example(),
        "--role",
        "judge",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "{}: the state file's envelope is wrong: neither `schemaVersion` nor `version`, \
             only `executors`; rota reads {{\"schemaVersion\": 1, \"value\": {{\"exclusions\": \
             [...]}}}} (or its earlier {{\"version\": 1, \"exclusions\": [...]}})",
            example()
        )
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
fn explain_with_a_state_file_not_there_yet() {
    // A roster starting on a state file that does not exist yet starts with no
    // exclusions; explain reads it the same way.
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("state.json").display().to_string();
    for json in [false, true] {
        let mut args = vec![
            "explain",
            example_str(),
            "--state",
            &missing,
            "--role",
            "judge",
            "--now",
            "1800000000000",
        ];
        if json {
            args.push("--json");
        }
        let out = rota(&args);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
        if json {
            let value: Value = serde_json::from_str(&stdout).expect("JSON");
            assert_eq!(value["pick"], "claude-opus");
            assert_eq!(
                value["restored"],
                json!([format!("nothing ({missing} does not exist yet)")])
            );
        } else {
            assert!(
                stdout.starts_with(&format!(
                    "restored: nothing ({missing} does not exist yet)\n"
                )),
                "{stdout}"
            );
            assert!(stdout.contains("would go to claude-opus"), "{stdout}");
        }
    }
    assert!(!Path::new(&missing).exists(), "explain only looks");
}

#[test]
fn check_dash_reads_the_roster_on_standard_input() {
    let roster = std::fs::read_to_string(example()).expect("the example");
    let out = rota_with_stdin(&["check", "-"], &roster);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("standard input: ok, 6 executors;"),
        "{stdout}"
    );
    // YAML, with an overlay and a narrowing, and through explain too.
    let dir = tempfile::tempdir().expect("tempdir");
    let overlay = write(
        dir.path(),
        "repo.json",
        &json!({ "executors": [ { "id": "b", "disabled": true } ] }).to_string(),
    );
    let yaml = "executors:\n  - id: a\n    harness: pi\n    roles: [coder]\n  - id: b\n    harness: pi\n    roles: [coder]\n";
    let out = rota_with_stdin(&["check", "-", "--repo", &overlay, "--json"], yaml);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let checked = json_out(&out);
    assert_eq!(checked["roster"], format!("standard input + {overlay}"));
    assert_eq!(checked["executors"].as_array().map(Vec::len), Some(1));
    let out = rota_with_stdin(&["explain", "-", "--role", "coder"], yaml);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("would go to a"));
    // What is wrong with it, named as standard input.
    for (input, says) in [
        ("{ \"executors\": [", "standard input: $: not JSON: "),
        ("", "standard input: $: not a roster: it is empty"),
        (
            "executors:\n  - id: a\n    roles: [coder]\n",
            "standard input: executors[0].harness: ",
        ),
    ] {
        let out = rota_with_stdin(&["check", "-"], input);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{input:?}: {stderr}");
        assert!(stderr.contains(says), "{input:?}: {stderr}");
    }
}

/// The one JSON object `--json` prints on stdout.
fn json_out(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}):\n{}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

#[test]
fn json_on_every_subcommand() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = rota(&["check", &example(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let check = json_out(&out);
    assert_eq!(check["command"], "check");
    assert_eq!(check["ok"], true);
    assert_eq!(check["executors"].as_array().map(Vec::len), Some(6));
    assert_eq!(check["executors"][0]["id"], "claude-opus");
    assert!(check["slotsPerRole"]["coder"].as_u64().is_some(), "{check}");

    let bad = write(
        dir.path(),
        "bad.json",
        &json!({ "executors": [ { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 0 } ] })
            .to_string(),
    );
    let out = rota(&["--json", "check", &bad]);
    assert_eq!(out.status.code(), Some(1));
    let failed = json_out(&out);
    assert_eq!(failed["ok"], false);
    assert_eq!(failed["exit"], 1);
    assert_eq!(failed["violations"][0]["path"], "executors[0].slots");
    assert!(out.stderr.is_empty() || !text(&out.stderr).contains("violation"));

    let trace = dir.path().join("t.json").display().to_string();
    let out = rota(&[
        "simulate", "--hours", "1", "--seed", "5", "--trace", &trace, "-q", "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sim = json_out(&out);
    assert_eq!(sim["command"], "simulate");
    assert_eq!(sim["seed"], 5);
    for key in [
        "requests",
        "granted",
        "timedOut",
        "leftWaiting",
        "probes",
        "stateWrites",
    ] {
        assert!(sim["report"][key].is_u64(), "{key} in {sim}");
    }
    assert!(sim["report"]["waitMs"]["p99"].is_u64(), "{sim}");
    assert_eq!(sim["report"]["executors"].as_array().map(Vec::len), Some(6));
    let steps = sim["trace"]["steps"].as_u64().expect("trace steps");
    assert_eq!(sim["report"]["steps"].as_u64(), Some(steps));

    let out = rota(&["replay", &trace, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let replayed = json_out(&out);
    assert_eq!(replayed["steps"].as_u64(), Some(steps));
    assert_eq!(replayed["engine"], "module");
    let junk = write(dir.path(), "junk.json", r#"{"format":"something else"}"#);
    let out = rota(&["replay", &junk, "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let refused = json_out(&out);
    assert_eq!(refused["ok"], false);
    assert_eq!(refused["exit"], 2);

    let out = rota(&["explain", &example(), "--role", "judge", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let explained = json_out(&out);
    assert_eq!(explained["command"], "explain");
    assert_eq!(explained["role"], "judge");
    assert!(explained["executors"].is_array() && explained["restored"].is_array());

    let out = rota(&["check", "/nonexistent/roster.json", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let unreadable = json_out(&out);
    assert_eq!(unreadable["exit"], 2);
    assert!(unreadable["error"]
        .as_str()
        .is_some_and(|e| e.contains("cannot read")));
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef rota"),
        ("fish", "complete -c rota"),
    ] {
        let out = rota(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("simulate"), "{shell}");
    }
    let out = rota(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn verbose_simulate_logs_the_core_events_in_virtual_time() {
    let out = rota(&["simulate", "--hours", "0.5", "-q"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !text(&out.stderr).contains("rota::core"),
        "no events unless asked: {}",
        text(&out.stderr)
    );
    let out = rota(&["-v", "simulate", "--hours", "0.5", "-q"]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    // -v is info and up: an exclusion, not a request's lifecycle (debug).
    let excluded = stderr
        .lines()
        .find(|l| l.contains("rota::core") && l.contains("name=excluded"))
        .unwrap_or_else(|| panic!("an excluded event: {stderr}"));
    assert!(excluded.contains("at=2026-01-01T00:"), "{excluded}");
    assert!(excluded.contains("executor="), "its own key: {excluded}");
    assert!(!stderr.contains("name=granted"), "grants only at -vv");
    assert!(!stderr.contains("rota::sim: input"), "inputs only at -vv");
    let out = rota(&["-vv", "simulate", "--hours", "0.1", "-q"]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("input="), "{stderr}");
    assert!(stderr.contains("name=granted"), "{stderr}");
}

#[test]
fn a_bad_roster_is_one_violation_a_line_for_every_subcommand() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = write(
        dir.path(),
        "bad.json",
        &json!({ "executors": [
            { "id": "a", "harness": "pi", "roles": ["coder"], "slots": 0 },
            { "id": "b", "roles": ["coder"] },
        ] })
        .to_string(),
    );
    for args in [
        vec!["check", bad.as_str()],
        vec!["simulate", bad.as_str(), "-q"],
        vec!["explain", bad.as_str(), "--role", "coder"],
    ] {
        let out = rota(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{bad}: executors[0].slots: "))),
            "{args:?}: {stderr}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{bad}: executors[1].harness: "))),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            lines.last(),
            Some(&format!("2 violations in {bad}").as_str())
        );
    }
}

#[test]
fn times_are_epoch_ms_or_rfc_3339_and_negative_numbers_are_refused() {
    let at = |now: &str| {
        let out = rota(&[
            "explain",
            &example(),
            "--role",
            "coder",
            "--now",
            now,
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{now}: {}", text(&out.stderr));
        json_out(&out)
    };
    let epoch = at("1767225600000");
    assert_eq!(epoch["now"], 1_767_225_600_000u64);
    assert_eq!(at("2026-01-01T00:00:00Z"), epoch);
    assert_eq!(at("2026-01-01T01:00:00+01:00"), epoch);

    for (args, says) in [
        (vec!["simulate", "--seed", "-1"], "not negative"),
        (vec!["simulate", "--hours", "-2"], "above 0"),
        (vec!["simulate", "--hours", "abc"], "not a number"),
        (
            vec!["explain", "ROSTER", "--role", "coder", "--now", "-5"],
            "not negative",
        ),
        (
            vec!["explain", "ROSTER", "--role", "coder", "--now", "noon"],
            "RFC 3339",
        ),
    ] {
        let example = example();
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "ROSTER" { example.as_str() } else { a })
            .collect();
        let out = rota(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn yaml_rosters_for_every_subcommand() {
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = write(
        dir.path(),
        "roster.yaml",
        "executors:\n  - id: solo\n    harness: pi\n    model: qwen3-coder\n    roles: [coder, reviewer]\n    slots: 2\n",
    );
    let overlay = write(
        dir.path(),
        "repo.yml",
        "executors:\n  - id: extra\n    harness: claude\n    roles: [reviewer]\n",
    );
    let out = rota(&["check", &yaml, "--repo", &overlay]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("2 executors"),
        "{}",
        text(&out.stdout)
    );
    let out = rota(&["simulate", &yaml, "--hours", "0.5", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = rota(&["explain", &yaml, "--role", "coder"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("would go to solo"));

    let broken = write(dir.path(), "broken.yml", "executors: [\n");
    let out = rota(&["check", &broken]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not YAML"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_simulation_feeds_a_tick_only_when_the_wake_up_time_has_come() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.json").display().to_string();
    let out = rota(&["simulate", "--hours", "8", "--trace", &path, "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let trace: Value = serde_json::from_slice(&std::fs::read(&path).expect("trace")).expect("JSON");
    let steps = trace["steps"].as_array().expect("steps");
    let mut ticks = 0;
    for (index, step) in steps.iter().enumerate() {
        if step["input"]["type"] != "tick" {
            continue;
        }
        ticks += 1;
        let now = step["input"]["now"].as_u64().expect("now");
        let before = &steps[index - 1];
        let previous_now = before["input"]["now"].as_u64().expect("now");
        assert!(
            now > previous_now,
            "step {index}: a tick at the last input's time"
        );
        assert_eq!(
            before["wakeAt"].as_u64(),
            Some(now),
            "step {index}: a tick at the wake-up time the core asked for"
        );
        assert!(
            step["outputs"].as_array().is_some_and(|o| !o.is_empty()),
            "step {index}: a tick that does nothing: {step}"
        );
    }
    assert!(ticks > 10, "{ticks} ticks");
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
