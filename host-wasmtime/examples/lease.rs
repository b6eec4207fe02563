//! Lease an executor by role, report a failed call, release it, ask why.
//! (The README's example; run it with `cargo run -p rota-host --example lease`.)

use std::process::ExitCode;
use std::time::Duration;

use rota_host::{Explain, HostError, LeaseOptions, Level, Options, Roster, Unservable};
use serde_json::json;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Display, not Debug: the message says what to do.
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), HostError> {
    let state = std::env::temp_dir().join(format!("rota-example-{}.json", std::process::id()));
    let roster = Roster::builder()
        // Or .roster_file("roster.json") (JSON or YAML), .repo_overlay(".flow/roster.json"),
        // .executors(vec!["claude-sonnet".into()]).
        .document(json!({ "executors": [
            { "id": "claude-sonnet", "harness": "claude", "model": "claude-sonnet-4-5",
              "roles": ["coder", "reviewer"], "slots": 2 },
            { "id": "local-qwen", "harness": "pi", "model": "qwen3-coder", "roles": ["coder"],
              "priority": 2, "baseUrl": "http://127.0.0.1:8080/v1" },
        ] }))
        // The core's options (defaults: the seeds'); every field is public.
        .options(Options {
            unservable: Some(Unservable::Wait), // wait for a reload rather than fail
            min_event_level: Level::Info,       // no debug events
            ..Options::default()
        })
        .state_file(&state) // exclusions that outlive a run
        .build()
        .await?;

    let options = LeaseOptions {
        timeout: Some(Duration::from_secs(600)),
        label: Some("issue 17".into()),
        ..LeaseOptions::default()
    };
    let lease = roster.lease("coder", options).await?;
    let spec = lease.spec(); // the executor's roster entry
    println!("coding on {} ({:?})", lease.executor(), spec.model);

    // The call failed: HTTP 429 with `Retry-After: 30`.
    let exclusion = roster.report_http(
        lease.executor(),
        429,
        &[("retry-after", "30")],
        "rate limited",
    )?;
    println!("excluded: {exclusion:?}");
    drop(lease); // released

    // While it cools down, the next coder lease goes to the other executor.
    if let Some(next) = roster.try_lease("coder", LeaseOptions::default()).await? {
        println!(
            "next lease on {}, base URL {:?}",
            next.executor(),
            next.field("baseUrl")
        );
        next.release()?;
    }
    let why = roster.explain(Explain::role("coder"))?;
    println!("a coder now would go to {:?}", why.pick);

    roster.flush().await?; // the state file is on disk
    let _ = std::fs::remove_file(&state);
    Ok(())
}
