//! `rota`: check a roster, simulate one, replay a trace, explain a decision.
//!
//! Exit codes: 0 fine; 1 the check failed (violations, a replay that differs, an
//! invalid roster); 2 the command could not run (an unreadable file, no policy
//! module, bad arguments).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use rota_core::{ExplainRequest, Violation};
use rota_host::clock::system_now_ms;
use rota_host::engine::{CacheDir, EngineConfig, HostEngine, PolicyModule};
use rota_host::sim::{simulate, SimConfig};
use rota_host::source::{split_list, RosterSource};
use rota_host::trace::{replay, NativeEngine, StepEngine, Trace, TraceWriter};
use rota_host::{HostError, PolicyRuntime};
use serde_json::{json, Value};

/// The example roster `rota simulate` uses when given none.
const EXAMPLE_ROSTER: &str = include_str!("../examples/roster.json");

#[derive(Parser, Debug)]
#[command(
    name = "rota",
    version,
    about = "Lease a pool of executors by role: check, simulate, replay, explain"
)]
struct Cli {
    /// A policy module (.wasm) instead of the bundled one.
    #[arg(long, global = true, value_name = "WASM")]
    module: Option<PathBuf>,
    /// Where precompiled modules are cached (default: $ROTA_CACHE_DIR, $XDG_CACHE_HOME/rota or ~/.cache/rota).
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Do not cache precompiled modules.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Log events (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug, Clone)]
struct RosterArgs {
    /// The roster file (JSON: { "executors": [...] }).
    roster: PathBuf,
    /// A repository roster merged over it.
    #[arg(long, value_name = "OVERLAY")]
    repo: Option<PathBuf>,
    /// Only these executors (comma-separated ids).
    #[arg(long, value_name = "a,b")]
    executors: Option<String>,
    /// The executor kinds this host can run (comma-separated); others are violations.
    #[arg(long, value_name = "k1,k2")]
    kinds: Option<String>,
}

impl RosterArgs {
    fn source(&self) -> RosterSource {
        RosterSource {
            roster: Some(self.roster.clone()),
            repo: self.repo.clone(),
            executors: self
                .executors
                .as_deref()
                .map(split_list)
                .unwrap_or_default(),
        }
    }

    fn options(&self) -> Value {
        match &self.kinds {
            Some(kinds) => json!({ "kinds": split_list(kinds) }),
            None => Value::Null,
        }
    }

    fn label(&self) -> String {
        match &self.repo {
            Some(repo) => format!("{} + {}", self.roster.display(), repo.display()),
            None => self.roster.display().to_string(),
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate a roster: every violation with its place (exit 1 on any), else a summary;
    /// warnings (a literal secret in `env`, an unknown `--executors` id) are printed too.
    Check {
        #[command(flatten)]
        roster: RosterArgs,
        /// Warnings fail the check too (exit 1).
        #[arg(long)]
        strict: bool,
    },
    /// Drive the policy module through simulated executors in virtual time.
    Simulate {
        /// The roster (default: the bundled example).
        roster: Option<PathBuf>,
        /// Seed of every random draw (same seed, same run).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Virtual hours to simulate.
        #[arg(long, default_value_t = 8.0)]
        hours: f64,
        /// Write the input trace with its outputs here (for `rota replay` and the visualizer).
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Feed a recorded trace and check every output matches (exit 1 at the first difference).
    Replay {
        trace: PathBuf,
        /// Replay on the native core instead of the policy module.
        #[arg(long)]
        native: bool,
    },
    /// Why each executor can or cannot take a role now.
    Explain {
        #[command(flatten)]
        roster: RosterArgs,
        /// The state file (exclusions) to restore first.
        #[arg(long, value_name = "STATE")]
        state: Option<PathBuf>,
        #[arg(long)]
        role: String,
        /// Executors the request must not use (comma-separated).
        #[arg(long, value_name = "a,b")]
        avoid: Option<String>,
        #[arg(long)]
        prefer: Option<String>,
        #[arg(long)]
        pin: Option<String>,
        /// The instant to explain at (epoch ms; default: now).
        #[arg(long, value_name = "MS")]
        now: Option<u64>,
        /// Print the explanation as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A command's failure: exit 1 (the thing checked is wrong) or 2 (could not run).
enum Failure {
    Check(String),
    Run(String),
}

impl From<HostError> for Failure {
    fn from(error: HostError) -> Failure {
        match error {
            HostError::Invalid { .. } | HostError::Policy { .. } => {
                Failure::Check(error.to_string())
            }
            other => Failure::Run(other.to_string()),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let result = match &cli.command {
        Command::Check { roster, strict } => check(&cli, roster, *strict),
        Command::Simulate {
            roster,
            seed,
            hours,
            trace,
            quiet,
        } => run_simulate(
            &cli,
            roster.as_deref(),
            *seed,
            *hours,
            trace.as_deref(),
            *quiet,
        ),
        Command::Replay { trace, native } => run_replay(&cli, trace, *native),
        Command::Explain {
            roster,
            state,
            role,
            avoid,
            prefer,
            pin,
            now,
            json,
        } => {
            let request = ExplainRequest {
                role: role.clone(),
                avoid: avoid.as_deref().map(split_list).unwrap_or_default(),
                prefer: prefer.clone(),
                pin: pin.clone(),
                request: None,
            };
            explain(&cli, roster, state.as_deref(), &request, *now, *json)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Check(message)) => {
            eprintln!("{message}");
            ExitCode::from(1)
        }
        Err(Failure::Run(message)) => {
            eprintln!("rota: {message}");
            ExitCode::from(2)
        }
    }
}

/// Wall time, for the reports (the host reads clocks; the core never does).
#[allow(clippy::disallowed_methods)]
fn stopwatch() -> Instant {
    Instant::now()
}

/// Prints to stdout; a closed pipe (`rota ... | head`) is not an error.
fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn module(cli: &Cli) -> Result<PolicyModule, Failure> {
    let cache = if cli.no_cache {
        CacheDir::Disabled
    } else if let Some(dir) = &cli.cache_dir {
        CacheDir::Dir(dir.clone())
    } else {
        CacheDir::Auto
    };
    let engine = HostEngine::new(EngineConfig {
        cache,
        ..EngineConfig::default()
    })?;
    Ok(engine.load(cli.module.as_deref())?)
}

fn print_violations(label: &str, violations: &[Violation]) -> String {
    let mut out = String::new();
    for v in violations {
        // A file-level violation names its file already.
        if v.path.ends_with(": $") {
            out.push_str(&format!("{}: {}\n", v.path, v.message));
        } else {
            out.push_str(&format!("{label}: {}: {}\n", v.path, v.message));
        }
    }
    out.push_str(&format!(
        "{} violation{} in {label}",
        violations.len(),
        if violations.len() == 1 { "" } else { "s" }
    ));
    out
}

/// The merged roster, or exit 1 with every violation of its files.
fn load_roster(args: &RosterArgs) -> Result<Value, Failure> {
    load_roster_with_warnings(args).map(|(document, _)| document)
}

/// The merged roster and narrowing's warnings, or exit 1 with every violation.
fn load_roster_with_warnings(args: &RosterArgs) -> Result<(Value, Vec<Violation>), Failure> {
    match args.source().load_with_warnings() {
        Ok(loaded) => Ok(loaded),
        Err(HostError::Invalid { violations }) => {
            Err(Failure::Check(print_violations(&args.label(), &violations)))
        }
        Err(other) => Err(other.into()),
    }
}

/// "FILE: warning: executors[0].env.API_KEY: ..." lines, and a count.
fn print_warnings(label: &str, warnings: &[Violation]) -> String {
    let mut out = String::new();
    for w in warnings {
        out.push_str(&format!("{label}: warning: {}: {}\n", w.path, w.message));
    }
    out
}

fn check(cli: &Cli, args: &RosterArgs, strict: bool) -> Result<(), Failure> {
    let (document, mut warnings) = load_roster_with_warnings(args)?;
    let module = module(cli)?;
    let violations = module.validate(&document, &args.options())?;
    // Literal secrets in `env`: the core's rule, on the document as checked.
    warnings.extend(rota_core::secrets::warnings(&document));
    if !violations.is_empty() {
        let mut text = print_warnings(&args.label(), &warnings);
        text.push_str(&print_violations(&args.label(), &violations));
        return Err(Failure::Check(text));
    }
    if !warnings.is_empty() {
        let text = print_warnings(&args.label(), &warnings);
        if strict {
            return Err(Failure::Check(format!(
                "{text}{} warning{} in {} (--strict)",
                warnings.len(),
                if warnings.len() == 1 { "" } else { "s" },
                args.label()
            )));
        }
        eprint!("{text}");
    }
    let mut runtime = PolicyRuntime::new(module, &document, &args.options())?;
    let snapshot = runtime.snapshot()?;
    let mut out = String::new();
    out.push_str(&format!(
        "{}: ok, {} executor{}; roles: {}\n\n",
        args.label(),
        snapshot.executors.len(),
        if snapshot.executors.len() == 1 {
            ""
        } else {
            "s"
        },
        snapshot.roles.join(", ")
    ));
    let executors: Vec<&Value> = document["executors"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let rows: Vec<[String; 6]> = snapshot
        .executors
        .iter()
        .map(|e| {
            let raw = executors.iter().find(|x| x["id"] == e.id.as_str());
            let harness = match &e.model {
                Some(model) => format!("{}/{model}", e.harness),
                None => e.harness.clone(),
            };
            let caps: Vec<String> = e
                .role_caps
                .iter()
                .filter(|(_, cap)| **cap < e.slots)
                .map(|(r, c)| format!("{r} ≤ {c}"))
                .collect();
            let slots = if caps.is_empty() {
                e.slots.to_string()
            } else {
                format!("{} ({})", e.slots, caps.join(" "))
            };
            let mut priorities: Vec<(f64, Vec<String>)> = Vec::new();
            for role in &e.roles {
                let p = e.priority.get(role).copied().unwrap_or(1.0);
                match priorities.iter_mut().find(|(q, _)| *q == p) {
                    Some((_, roles)) => roles.push(role.clone()),
                    None => priorities.push((p, vec![role.clone()])),
                }
            }
            let priority = if priorities.len() == 1 {
                priorities[0].0.to_string()
            } else {
                priorities
                    .iter()
                    .map(|(p, roles)| format!("{}:{p}", roles.join("/")))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let mut extra = Vec::new();
            if let Some(health) = raw.and_then(|r| r["health"].as_str()) {
                extra.push(format!("health {health}"));
            }
            if e.provision {
                extra.push("provision".into());
            }
            if let Some(cooldown) = raw.and_then(|r| r["cooldown"].as_object()) {
                let parts: Vec<String> = cooldown
                    .iter()
                    .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or_default()))
                    .collect();
                extra.push(format!("cooldown {}", parts.join(", ")));
            }
            [
                e.id.clone(),
                harness,
                e.roles.join(","),
                slots,
                priority,
                extra.join("; "),
            ]
        })
        .collect();
    let headers = ["executor", "harness", "roles", "slots", "priority", ""];
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                .max(headers[i].len())
        })
        .collect();
    let line = |cells: [&str; 6]| {
        let mut text = String::from(" ");
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            text.push(' ');
            text.push_str(cell);
            if i < 5 {
                text.push_str(&" ".repeat(pad + 1));
            }
        }
        text.trim_end().to_string() + "\n"
    };
    out.push_str(&line(headers));
    for row in &rows {
        out.push_str(&line([
            &row[0], &row[1], &row[2], &row[3], &row[4], &row[5],
        ]));
    }
    out.push_str("\nslots per role:");
    for role in &snapshot.roles {
        out.push_str(&format!(" {role} {}", runtime.slots(role)?));
    }
    out.push('\n');
    self::out(&out);
    Ok(())
}

fn run_simulate(
    cli: &Cli,
    roster: Option<&Path>,
    seed: u64,
    hours: f64,
    trace_path: Option<&Path>,
    quiet: bool,
) -> Result<(), Failure> {
    let (document, label) = match roster {
        Some(path) => {
            let args = RosterArgs {
                roster: path.to_path_buf(),
                repo: None,
                executors: None,
                kinds: None,
            };
            (load_roster(&args)?, path.display().to_string())
        }
        None => (
            serde_json::from_str(EXAMPLE_ROSTER).map_err(|e| {
                Failure::Run(format!("the bundled example roster is not JSON: {e}"))
            })?,
            "the bundled example roster".to_string(),
        ),
    };
    if !(hours.is_finite() && hours > 0.0 && hours <= 24.0 * 366.0) {
        return Err(Failure::Run(format!(
            "--hours must be in (0, 8784], not {hours}"
        )));
    }
    let started = stopwatch();
    let module = module(cli)?;
    let loaded = started.elapsed();
    let options = json!({});
    let mut runtime = PolicyRuntime::new(module.clone(), &document, &options)?;
    let mut trace = match trace_path {
        Some(path) => Some(TraceWriter::create(path, &document, &options)?),
        None => None,
    };
    let config = SimConfig {
        seed,
        hours,
        ..SimConfig::default()
    };
    eprintln!(
        "simulating {label}: {hours} h, seed {seed}, policy {} ({}{})",
        &module.hash()[..12],
        module.source(),
        if module.from_cache() {
            ", precompiled from cache"
        } else {
            ""
        }
    );
    let interactive = std::io::stderr().is_terminal();
    let mut next_line = 0.0;
    let progress = |share: f64, steps: u64| {
        if quiet {
            return;
        }
        let width = 30;
        let filled = ((share * width as f64).round() as usize).min(width);
        let bar = format!(
            "[{}{}] {:>3.0}%  {:.1}/{hours} h  {steps} steps",
            "#".repeat(filled),
            ".".repeat(width - filled),
            share * 100.0,
            share * hours
        );
        if interactive {
            eprint!("\r{bar}");
            if share >= 1.0 {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        } else if share >= next_line {
            eprintln!("{bar}");
            next_line = (share + 0.25).min(1.0);
        }
    };
    let report = simulate(&mut runtime, &document, &config, trace.as_mut(), progress)?;
    let elapsed = started.elapsed();
    let trace_note = match (trace, trace_path) {
        (Some(trace), Some(path)) => {
            let steps = trace.finish()?;
            format!("trace: {} ({steps} steps)\n", path.display())
        }
        _ => String::new(),
    };
    let mut text = report.render();
    text.push_str(&format!(
        "\nwall time {:.2} s (module load {:.0} ms), {:.1} µs per step through wasmtime\n",
        elapsed.as_secs_f64(),
        loaded.as_secs_f64() * 1000.0,
        (elapsed - loaded).as_secs_f64() * 1e6 / report.steps.max(1) as f64
    ));
    if runtime.recoveries() > 0 {
        text.push_str(&format!("guest recoveries: {}\n", runtime.recoveries()));
    }
    text.push_str(&trace_note);
    out(&text);
    Ok(())
}

fn run_replay(cli: &Cli, path: &Path, native: bool) -> Result<(), Failure> {
    let trace = Trace::read(path).map_err(|e| match e {
        HostError::Invalid { .. } => Failure::Check(e.to_string()),
        other => Failure::Run(other.to_string()),
    })?;
    let mut engine: Box<dyn StepEngine> = if native {
        Box::new(NativeEngine::new(&trace.document, &trace.options)?)
    } else {
        Box::new(PolicyRuntime::new(
            module(cli)?,
            &trace.document,
            &trace.options,
        )?)
    };
    let started = stopwatch();
    match replay(engine.as_mut(), &trace, |_, _| {})? {
        None => {
            out(&format!(
                "{}: {} steps replayed on {}, every output matches ({:.2} s)\n",
                path.display(),
                trace.steps.len(),
                if native {
                    "the native core"
                } else {
                    "the policy module"
                },
                started.elapsed().as_secs_f64()
            ));
            Ok(())
        }
        Some(mismatch) => Err(Failure::Check(format!("{}: {mismatch}", path.display()))),
    }
}

fn explain(
    cli: &Cli,
    args: &RosterArgs,
    state: Option<&Path>,
    request: &ExplainRequest,
    now: Option<u64>,
    as_json: bool,
) -> Result<(), Failure> {
    let document = load_roster(args)?;
    let module = module(cli)?;
    let mut runtime = PolicyRuntime::new(module, &document, &args.options())?;
    let now = now.unwrap_or_else(system_now_ms);
    let mut notes = Vec::new();
    if let Some(path) = state {
        if !path.exists() {
            return Err(Failure::Run(format!(
                "cannot read {}: no such file",
                path.display()
            )));
        }
        // Read without moving a corrupt file aside: explain only looks.
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Run(format!("cannot read {}: {e}", path.display())))?;
        let state = runtime
            .state_file_restore(&text, now)
            .map_err(|e| Failure::Check(format!("{}: not a state file: {e}", path.display())))?;
        let input = json!({ "type": "restore", "now": now, "state": state });
        let step = runtime.step(&input)?;
        for output in &step.outputs {
            if output["type"] == "event" && output["level"] != "debug" {
                notes.push(output["message"].as_str().unwrap_or_default().to_string());
            }
        }
    } else {
        runtime.step(&json!({ "type": "tick", "now": now }))?;
    }
    let explanation = runtime.explain(request)?;
    if as_json {
        let text =
            serde_json::to_string_pretty(&explanation).map_err(|e| Failure::Run(e.to_string()))?;
        out(&format!("{text}\n"));
        return Ok(());
    }
    let mut out = String::new();
    for note in notes {
        out.push_str(&format!("restored: {note}\n"));
    }
    out.push_str(&format!(
        "role {}: {}{}\n",
        explanation.role,
        match &explanation.pick {
            Some(pick) => format!("would go to {pick} now"),
            None => "no executor can take it now".to_string(),
        },
        if explanation.can_ever_serve {
            ""
        } else {
            " (and none ever can: the request would end exhausted)"
        }
    ));
    let width = explanation
        .executors
        .iter()
        .map(|e| e.id.len())
        .max()
        .unwrap_or(0);
    for e in &explanation.executors {
        let verdict = if e.ok { "ok" } else { "no" };
        let priority = e
            .priority
            .map(|p| format!(" (priority {p})"))
            .unwrap_or_default();
        let why = if e.reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", e.reasons.join("; "))
        };
        out.push_str(&format!("  {:<width$}  {verdict}{priority}{why}\n", e.id));
    }
    self::out(&out);
    Ok(())
}
