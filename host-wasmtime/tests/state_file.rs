//! The state file under stress, with the real policy module (its `rota_state_file` is
//! the rule; `state_file.rs` the IO):
//! - the seed's envelope restores, and what rota writes is the seed's envelope;
//! - two processes x 25 exclusions into one file: every entry present;
//! - a writer killed (SIGKILL) again and again mid-write: the file always parses, and
//!   the next start leaves no temp file and no lock behind;
//! - EACCES: a writer running as `nobody` (setpriv) facing a file it cannot read: left
//!   alone, retried, written once readable, nothing lost;
//! - ENOSPC: a 64 KiB tmpfs filled up (mount needs root): retried, written once there
//!   is room, nothing lost.
//!
//! The other processes are this test binary again, running `child_writer` with
//! `ROTA_STATE_CHILD` set. The kill loop prints its seed; `ROTA_KILL_SEED` replays it.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::policy;
use rota_core::ExclusionKind;
use rota_host::{HostError, Roster, StateRetry};
use serde_json::{json, Value};

const CHILD: &str = "ROTA_STATE_CHILD";

fn document(ids: &[String]) -> Value {
    json!({ "executors": ids.iter().map(|id| json!({ "id": id, "harness": "pi", "roles": ["coder"] })).collect::<Vec<_>>() })
}

fn ids(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}

async fn roster(state: &Path, ids: &[String]) -> Roster {
    Roster::builder()
        .document(document(ids))
        .state_file(state)
        .state_retry(StateRetry {
            first: Duration::from_millis(20),
            max: Duration::from_millis(200),
        })
        .module(policy())
        .build()
        .await
        .expect("roster")
}

/// The entries of a state file, by the core's own parser.
fn entries(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("read the state file");
    rota_core::state_file::parse(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}"))
        .exclusions
        .into_iter()
        .map(|x| x.id)
        .collect()
}

/// Temp files and locks left in `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-") || n.ends_with(".lock"))
        .collect()
}

/// Not a test of its own: the writer process the other tests start (see the docs).
#[test]
fn child_writer() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (state, prefix, count, mode) = (
        PathBuf::from(parts[0]),
        parts[1],
        parts[2].parse::<usize>().expect("count"),
        parts[3],
    );
    let runtime = tokio::runtime::Runtime::new().expect("tokio");
    runtime.block_on(async move {
        let ids = ids(prefix, count);
        let roster = roster(&state, &ids).await;
        let mut events = roster.subscribe();
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                if event.name.starts_with("stateFile") {
                    println!("ROTA {} {}", event.name, event.message);
                }
            }
        });
        for event in roster.host_events() {
            println!("ROTA {} {}", event.name, event.message);
        }
        println!("ROTA started");
        if mode == "gated" {
            // Both writers of a trial start writing together, on a line on stdin.
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        }
        if mode == "loop" {
            for i in 0.. {
                let id = &ids[i % ids.len()];
                roster
                    .exclude(id, ExclusionKind::Manual, &format!("round {i}"), None)
                    .expect("exclude");
                // A contended attempt may fail; it is retried, and the end waits for it.
                let _ = roster.flush().await;
                if i % 3 == 0 {
                    roster.resume(id).expect("resume");
                    let _ = roster.flush().await;
                }
            }
        }
        for id in &ids {
            roster
                .exclude(
                    id,
                    ExclusionKind::Manual,
                    &format!("{id} paused by {}", std::process::id()),
                    None,
                )
                .expect("exclude");
            let _ = roster.flush().await;
        }
        // Until every write has landed (the writer retries with back-off).
        while roster.flush().await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        println!("ROTA done");
    });
}

/// Starts `child_writer` (as `user` when given, through setpriv).
fn spawn_writer(state: &Path, prefix: &str, count: usize, mode: &str, user: Option<&str>) -> Child {
    let exe = std::env::current_exe().expect("the test binary");
    let args = ["child_writer", "--exact", "--nocapture", "--test-threads=1"];
    let stdin = if mode == "gated" {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut command = match user {
        None => Command::new(&exe),
        Some(user) => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid", user, "--regid", user, "--clear-groups"])
                .arg(&exe);
            c
        }
    };
    command
        .args(args)
        .env(
            CHILD,
            format!("{}|{prefix}|{count}|{mode}", state.display()),
        )
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the writer")
}

/// Reads the child's `ROTA ...` lines until one starts with `want`; every line read.
fn read_until(lines: &mut impl Iterator<Item = String>, want: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        // libtest may print "test child_writer ... " before the first line.
        if let Some(rest) = line.split_once("ROTA ").map(|(_, rest)| rest) {
            seen.push(rest.to_string());
            if rest.starts_with(want) {
                return seen;
            }
        }
    }
    panic!("the writer ended before '{want}': {seen:?}");
}

fn child_lines(child: &mut Child) -> impl Iterator<Item = String> {
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout).lines().map_while(Result::ok)
}

#[tokio::test]
async fn the_seeds_envelope_restores_and_is_what_rota_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("roster-state.json");
    // What the seed's saveVersioned writes (JSON.stringify(v, undefined, 2) + "\n").
    std::fs::write(
        &state,
        "{\n  \"schemaVersion\": 1,\n  \"value\": {\n    \"exclusions\": [\n      {\n        \"id\": \"s-0\",\n        \"reason\": \"operator\",\n        \"kind\": \"manual\"\n      },\n      {\n        \"id\": \"theirs\",\n        \"reason\": \"another roster's\",\n        \"kind\": \"health\"\n      }\n    ]\n  }\n}\n",
    )
    .expect("write");
    let ids = ids("s", 2);
    let roster = roster(&state, &ids).await;
    let snapshot = roster.snapshot().expect("snapshot");
    let restored = snapshot.executors[0].exclusion.as_ref().expect("restored");
    assert_eq!(
        (restored.kind, restored.reason.as_str()),
        (ExclusionKind::Manual, "operator")
    );
    roster
        .exclude("s-1", ExclusionKind::Manual, "mine", None)
        .expect("exclude");
    roster.flush().await.expect("flushed");
    assert_eq!(entries(&state), ["s-0", "theirs", "s-1"]);
    let text = std::fs::read_to_string(&state).expect("read");
    assert!(
        text.starts_with("{\n  \"schemaVersion\": 1,\n  \"value\": {\n    \"exclusions\": [\n"),
        "{text}"
    );
}

#[test]
fn two_processes_x_25_exclusions_into_one_file_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("shared.json");
    let mut children: Vec<Child> = ["p1", "p2"]
        .iter()
        .map(|p| spawn_writer(&state, p, 25, "gated", None))
        .collect();
    let mut outputs: Vec<_> = children.iter_mut().map(child_lines).collect();
    for lines in &mut outputs {
        read_until(lines, "started");
    }
    for child in &mut children {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"go\n").expect("go");
    }
    for (child, lines) in children.iter_mut().zip(&mut outputs) {
        read_until(lines, "done");
        assert!(child.wait().expect("wait").success());
    }
    let mut found = entries(&state);
    found.sort();
    let mut want: Vec<String> = ids("p1", 25).into_iter().chain(ids("p2", 25)).collect();
    want.sort();
    assert_eq!(found, want, "{} of 50 entries", found.len());
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

/// splitmix64: the kill loop's delays (the seed is printed).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[tokio::test]
async fn a_writer_killed_mid_write_again_and_again_leaves_a_parseable_file_and_the_next_start_cleans_up(
) {
    let seed = std::env::var("ROTA_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            use std::hash::{BuildHasher, Hasher};
            // A fresh seed each run (printed): the standard library's random hasher keys.
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        });
    println!("kill -9 loop seed {seed} (replay: ROTA_KILL_SEED={seed})");
    let mut rng = seed;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("killed.json");
    for round in 0..12 {
        let mut child = spawn_writer(&state, &format!("k{}", round % 3), 10, "loop", None);
        let mut lines = child_lines(&mut child);
        read_until(&mut lines, "started");
        std::thread::sleep(Duration::from_millis(20 + splitmix(&mut rng) % 200));
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
        if state.exists() {
            let text = std::fs::read_to_string(&state).expect("read");
            assert!(
                rota_core::state_file::parse(&text).is_ok(),
                "round {round} (seed {seed}): the file does not parse: {text}"
            );
        }
    }
    let ids = vec!["k0-0".to_string()];
    let roster = roster(&state, &ids).await;
    assert_eq!(leftovers(dir.path()), Vec::<String>::new(), "seed {seed}");
    assert!(
        !roster
            .host_events()
            .iter()
            .any(|e| e.name == "stateFileCorrupt"),
        "seed {seed}"
    );
    roster
        .exclude("k0-0", ExclusionKind::Manual, "after", None)
        .expect("exclude");
    roster.flush().await.expect("flushed");
    assert!(entries(&state).contains(&"k0-0".to_string()));
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

fn can_setpriv() -> bool {
    Command::new("setpriv")
        .args([
            "--reuid",
            "nobody",
            "--regid",
            "nogroup",
            "--clear-groups",
            "true",
        ])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn eacces_a_file_the_writer_cannot_read_is_left_alone_and_written_once_readable() {
    if !can_setpriv() {
        eprintln!("skipped: setpriv cannot run as nobody here");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let state = dir.path().join("private.json");
    let before = "{\n  \"schemaVersion\": 1,\n  \"value\": {\n    \"exclusions\": [\n      {\n        \"id\": \"root-only\",\n        \"reason\": \"another user's\",\n        \"kind\": \"manual\"\n      }\n    ]\n  }\n}\n";
    std::fs::write(&state, before).expect("write");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let mut child = spawn_writer(&state, "n", 25, "once", Some("65534"));
    let mut lines = child_lines(&mut child);
    let seen = read_until(&mut lines, "stateFileUnreadable");
    assert!(
        seen.last().is_some_and(|l| l.contains("denied")),
        "{seen:?}"
    );
    // A write attempt, retried (not only the start's read).
    let seen = read_until(&mut lines, "stateFileUnreadable");
    assert!(
        seen.last().is_some_and(|l| l.contains("retrying")),
        "{seen:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&state).expect("read"),
        before,
        "not written over"
    );
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    read_until(&mut lines, "stateFileRecovered");
    read_until(&mut lines, "done");
    assert!(child.wait().expect("wait").success());
    let mut found = entries(&state);
    found.sort();
    let mut want: Vec<String> = ids("n", 25);
    want.push("root-only".into());
    want.sort();
    assert_eq!(found, want);
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

#[tokio::test]
async fn enospc_a_full_disk_fails_the_writes_and_every_entry_lands_once_there_is_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(dir.path().to_path_buf());
    let state = dir.path().join("state.json");
    let ids = ids("s", 25);
    let roster = roster(&state, &ids).await;
    let filler = dir.path().join("filler");
    let filled = std::fs::write(&filler, vec![1u8; 128 * 1024]);
    assert!(
        filled.is_err_and(|e| e.raw_os_error() == Some(28)),
        "ENOSPC"
    );
    let mut events = roster.subscribe();
    for id in &ids {
        roster
            .exclude(id, ExclusionKind::Manual, &format!("{id}: disk full"), None)
            .expect("exclude");
    }
    // The flush reports the failed attempt; the entries stay pending for a retry.
    match roster.flush().await {
        Err(HostError::Write { path, source }) => {
            assert_eq!(path, state);
            assert_eq!(source.raw_os_error(), Some(28), "{source}");
        }
        other => panic!("the write failed: {other:?}"),
    }
    let failed = loop {
        let event = events.recv().await.expect("an event");
        if event.name == "stateFileWriteFailed" {
            break event;
        }
    };
    assert!(
        failed.message.contains("No space left"),
        "{}",
        failed.message
    );
    assert!(!state.exists());
    std::fs::remove_file(&filler).expect("make room");
    loop {
        let event = events.recv().await.expect("an event");
        if event.name == "stateFileRecovered" {
            break;
        }
    }
    roster
        .flush()
        .await
        .expect("nothing pending after the retry");
    assert_eq!(entries(&state), ids);
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}
