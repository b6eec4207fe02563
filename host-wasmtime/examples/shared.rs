//! One instance of a roster shared by several processes through a log on PostgreSQL.
//! (The README's example; run it with `ROTA_PG_URL=postgres://... cargo run -p
//! rota-host --features shared --example shared`, several at once if you like.)

use std::process::ExitCode;
use std::time::Duration;

use rota_host::shared::SharedRoster;
use rota_host::{Choice, HostError, LeaseOptions, Options};
use serde_json::json;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), HostError> {
    let url = std::env::var("ROTA_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let roster = SharedRoster::builder()
        .url(url)
        .roster("pool") // one log per name
        // Written into the genesis if the log is empty (so are the options).
        .document(json!({ "executors": [
            { "id": "claude-sonnet", "harness": "claude", "roles": ["coder"], "slots": 2 },
            { "id": "local-qwen", "harness": "pi", "roles": ["coder"], "slots": 2 },
        ] }))
        .options(Options {
            choice: Some(Choice::Declared), // the first declared free executor first
            ..Options::default()
        })
        .ttl(Duration::from_secs(10)) // heartbeats every ttl/4; the leader lease too
        .connect()
        .await?;

    let lease = roster.lease("coder", LeaseOptions::default()).await?; // fair across instances
    println!("{} leased {}", roster.instance(), lease.executor());
    roster
        .report_http(lease.executor(), 429, &[("retry-after", "30")], "")
        .await?; // settles once its entry is folded
    drop(lease); // a `release` entry (batched)
    roster.close().await // cancels, steps down, expires itself
}
