//! `rota`: check a roster, simulate one, replay a trace, explain a decision.
//!
//! Exit codes: 0 fine; 1 the check failed (violations, a replay that differs, an
//! invalid roster, state file or role); 2 the command could not run (an unreadable
//! file, a file that is not a trace, no policy module, bad arguments). With `--json`,
//! every command prints one JSON object on stdout, success or failure (the README
//! gives the shapes). A roster argument `-` is read from standard input.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{CommandFactory, Parser, Subcommand};
use comfy_table::{presets, CellAlignment, Table};
use rota_core::{Document, ExplainRequest, Level, Output, Violation};
use rota_host::clock::system_now_ms;
use rota_host::engine::{CacheDir, EngineConfig, HostEngine, PolicyModule};
use rota_host::sim::{simulate, SimConfig};
use rota_host::source::{split_list, RosterSource};
use rota_host::trace::{replay, NativeEngine, StepEngine, Trace, TraceWriter};
use rota_host::{HostError, PolicyRuntime};
use serde_json::{json, Map, Value};

/// How a roster read from standard input (`-`) is named in messages.
const STDIN: &str = "standard input";

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
    /// Log events to stderr (-v info, -vv debug; `simulate` logs the core's events in virtual time); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Print the result as one JSON object on stdout, failures included (shapes: see the README).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug, Clone)]
struct RosterArgs {
    /// The roster file: JSON ({ "executors": [...] }), or YAML when named .yaml/.yml; `-` reads standard input (JSON when it starts with `{` or `[`, else YAML).
    roster: PathBuf,
    /// A repository roster (JSON or YAML) merged over it: same id replaces, `disabled: true` removes, new ids add.
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
    fn file(roster: &Path) -> RosterArgs {
        RosterArgs {
            roster: roster.to_path_buf(),
            repo: None,
            executors: None,
            kinds: None,
        }
    }

    /// Whether the roster comes from standard input (`-`).
    fn is_stdin(&self) -> bool {
        self.roster.as_os_str() == "-"
    }

    fn source(&self) -> RosterSource {
        RosterSource {
            roster: (!self.is_stdin()).then(|| self.roster.clone()),
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
        let roster = if self.is_stdin() {
            STDIN.to_string()
        } else {
            self.roster.display().to_string()
        };
        match &self.repo {
            Some(repo) => format!("{roster} + {}", repo.display()),
            None => roster,
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
        /// The roster, JSON or YAML (default: the bundled example).
        roster: Option<PathBuf>,
        /// Seed of every random draw (a whole number; same seed, same run).
        #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = parse_seed)]
        seed: u64,
        /// Virtual hours to simulate (above 0, at most 8784).
        #[arg(long, default_value_t = 8.0, allow_negative_numbers = true, value_parser = parse_hours)]
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
        /// The trace file (what `rota simulate --trace` writes).
        trace: PathBuf,
        /// Replay on the native core instead of the policy module.
        #[arg(long)]
        native: bool,
    },
    /// Why each executor can or cannot take a role now.
    Explain {
        #[command(flatten)]
        roster: RosterArgs,
        /// The state file (exclusions) to restore first; read only.
        #[arg(long, value_name = "STATE")]
        state: Option<PathBuf>,
        /// The role to explain.
        #[arg(long)]
        role: String,
        /// Executors the request must not use (comma-separated).
        #[arg(long, value_name = "a,b")]
        avoid: Option<String>,
        /// The executor the request would rather have.
        #[arg(long, value_name = "ID")]
        prefer: Option<String>,
        /// The only executor the request may use.
        #[arg(long, value_name = "ID")]
        pin: Option<String>,
        /// The instant to explain at: epoch milliseconds or RFC 3339 (2026-01-01T09:30:00Z); default now.
        #[arg(long, value_name = "TIME", allow_negative_numbers = true, value_parser = parse_instant)]
        now: Option<u64>,
    },
    /// Print a shell completion script (e.g. `rota completions bash > ~/.local/share/bash-completion/completions/rota`).
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::Check { .. } => "check",
            Command::Simulate { .. } => "simulate",
            Command::Replay { .. } => "replay",
            Command::Explain { .. } => "explain",
            Command::Completions { .. } => "completions",
        }
    }
}

/// `--seed`: a whole number, not negative.
fn parse_seed(text: &str) -> Result<u64, String> {
    if text.trim_start().starts_with('-') {
        return Err(format!("a seed is not negative: {text}"));
    }
    text.parse()
        .map_err(|_| format!("a seed is a whole number, not '{text}'"))
}

/// `--hours`: a number of hours above 0, at most a leap year.
fn parse_hours(text: &str) -> Result<f64, String> {
    let hours: f64 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number of hours"))?;
    if hours.is_nan() || hours <= 0.0 {
        return Err(format!("the hours must be above 0, not {text}"));
    }
    if hours > 24.0 * 366.0 {
        return Err(format!("at most 8784 hours (a leap year), not {text}"));
    }
    Ok(hours)
}

/// `--now`: epoch milliseconds, or an RFC 3339 time; not before 1970.
fn parse_instant(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(format!(
            "a time is not negative: {text} (epoch milliseconds count from 1970)"
        ));
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map_err(|_| format!("{text} milliseconds is out of range"));
    }
    let instant: jiff::Timestamp = text.parse().map_err(|e| {
        format!("'{text}' is neither epoch milliseconds nor an RFC 3339 time (2026-01-01T09:30:00Z): {e}")
    })?;
    u64::try_from(instant.as_millisecond())
        .map_err(|_| format!("{text} is before 1970: rota's times are epoch milliseconds"))
}

/// What a command printed: text for people, and the JSON of `--json`.
struct Report {
    text: String,
    json: Value,
}

/// A command's failure: exit 1 (the thing checked is wrong) or 2 (could not run);
/// `detail` adds fields to the JSON answer (`violations`, `mismatch`).
enum Failure {
    Check { message: String, detail: Value },
    Run(String),
}

impl Failure {
    fn check(message: impl Into<String>) -> Failure {
        Failure::Check {
            message: message.into(),
            detail: Value::Null,
        }
    }

    /// Every violation of `label`'s roster, one a line.
    fn violations(label: &str, violations: &[Violation]) -> Failure {
        Failure::Check {
            message: print_violations(label, violations),
            detail: json!({ "violations": violations, "file": label }),
        }
    }

    /// A host error about `label`'s roster: its violations one a line when it has any.
    fn roster(label: &str, error: HostError) -> Failure {
        match error {
            HostError::Invalid { violations } => Failure::violations(label, &violations),
            HostError::Policy { violations, .. } if !violations.is_empty() => {
                Failure::violations(label, &violations)
            }
            other => other.into(),
        }
    }
}

impl From<HostError> for Failure {
    fn from(error: HostError) -> Failure {
        match error {
            HostError::Invalid { .. } | HostError::Policy { .. } => Failure::Check {
                message: error.to_string(),
                detail: match &error {
                    HostError::Policy { code, .. } => json!({ "code": code }),
                    _ => Value::Null,
                },
            },
            other => Failure::Run(other.to_string()),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let simulating = matches!(cli.command, Command::Simulate { .. });
    init_tracing(cli.verbose, simulating);
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
        } => {
            let request = ExplainRequest {
                role: role.clone(),
                avoid: avoid.as_deref().map(split_list).unwrap_or_default(),
                prefer: prefer.clone(),
                pin: pin.clone(),
                request: None,
                affinity: None,
            };
            explain(&cli, roster, state.as_deref(), &request, *now)
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "rota", &mut script);
            out(&String::from_utf8_lossy(&script));
            return ExitCode::SUCCESS;
        }
    };
    let command = cli.command.name();
    let (code, json, text) = match result {
        Ok(report) => (0, envelope(command, true, report.json), Ok(report.text)),
        Err(Failure::Check { message, detail }) => {
            let mut json = envelope(command, false, detail);
            json["exit"] = json!(1);
            json["error"] = json!(message);
            (1, json, Err(message))
        }
        Err(Failure::Run(message)) => {
            let json = envelope(
                command,
                false,
                json!({ "exit": 2, "error": format!("rota: {message}") }),
            );
            (2, json, Err(format!("rota: {message}")))
        }
    };
    if cli.json {
        out(&format!("{json:#}\n"));
    } else {
        match text {
            Ok(text) => out(&text),
            Err(message) => eprintln!("{message}"),
        }
    }
    ExitCode::from(code)
}

/// `{"command", "ok", ...fields}`: the one shape of every `--json` answer.
fn envelope(command: &str, ok: bool, fields: Value) -> Value {
    let mut object = Map::new();
    object.insert("command".into(), json!(command));
    object.insert("ok".into(), json!(ok));
    if let Value::Object(fields) = fields {
        object.extend(fields);
    }
    Value::Object(object)
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

fn init_tracing(verbose: u8, simulating: bool) {
    let default = match (verbose, simulating) {
        // A simulation's events are the simulated world's, not the command's: only
        // when asked for.
        (0, true) => "warn,rota::core=off",
        (0, false) => "warn",
        (1, _) => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // In a simulation the wall clock means nothing: the span gives the virtual time.
    let _ = if simulating {
        builder.without_time().try_init()
    } else {
        builder.try_init()
    };
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
    let loaded = if args.is_stdin() {
        let user = read_stdin_roster()?;
        args.source().load_over(user)
    } else {
        args.source().load_with_warnings()
    };
    loaded.map_err(|error| Failure::roster(&args.label(), error))
}

/// The roster on standard input (`rota check -`): JSON when its first character
/// (after white space) is `{` or `[`, else YAML. Not JSON/YAML: exit 1 with why.
fn read_stdin_roster() -> Result<Value, Failure> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Failure::Run(format!("cannot read {STDIN}: {e}")))?;
    let not = |format: &str, error: &dyn std::fmt::Display| {
        Failure::violations(
            STDIN,
            &[Violation {
                path: format!("{STDIN}: $"),
                message: format!("not {format}: {error}"),
            }],
        )
    };
    let document: Value = if text.trim_start().starts_with(['{', '[']) {
        serde_json::from_str(&text).map_err(|e| not("JSON", &e))?
    } else {
        serde_norway::from_str(&text).map_err(|e| not("YAML", &e))?
    };
    if document.is_null() {
        return Err(not(
            "a roster",
            &"it is empty (a roster is { \"executors\": [...] }, in JSON or YAML)",
        ));
    }
    Ok(document)
}

/// `FILE: warning: executors[0].env.API_KEY: ...` lines.
fn print_warnings(label: &str, warnings: &[Violation]) -> String {
    let mut out = String::new();
    for w in warnings {
        out.push_str(&format!("{label}: warning: {}: {}\n", w.path, w.message));
    }
    out
}

/// A table without borders: columns line up in a terminal, a pipe and a test alike.
fn plain_table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::NOTHING);
    if !header.is_empty() {
        table.set_header(header.to_vec());
    }
    table
}

/// The table's text, without the padding that ends its lines.
fn render(table: &Table) -> String {
    table
        .lines()
        .map(|line| line.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn check(cli: &Cli, args: &RosterArgs, strict: bool) -> Result<Report, Failure> {
    let (document, mut warnings) = load_roster_with_warnings(args)?;
    let module = module(cli)?;
    // The module's violations and its warnings (a literal secret in `env`), beside
    // the narrowing's.
    let check = module.check(&document, &args.options())?;
    let violations = check.violations;
    warnings.extend(check.warnings.into_iter().map(|w| Violation {
        path: w.path,
        message: w.message,
    }));
    if !violations.is_empty() {
        let failure = Failure::violations(&args.label(), &violations);
        return Err(match failure {
            Failure::Check {
                message,
                mut detail,
            } => {
                detail["warnings"] = json!(warnings);
                Failure::Check {
                    message: format!("{}{message}", print_warnings(&args.label(), &warnings)),
                    detail,
                }
            }
            other => other,
        });
    }
    if !warnings.is_empty() {
        let text = print_warnings(&args.label(), &warnings);
        if strict {
            return Err(Failure::Check {
                message: format!(
                    "{text}{} warning{} in {} (--strict)",
                    warnings.len(),
                    if warnings.len() == 1 { "" } else { "s" },
                    args.label()
                ),
                detail: json!({ "warnings": warnings, "file": args.label() }),
            });
        }
        if !cli.json {
            eprint!("{text}");
        }
    }
    let mut runtime = PolicyRuntime::new(module, &document, &args.options())
        .map_err(|e| Failure::roster(&args.label(), e))?;
    let parsed = Document::from_json(&document, None)
        .map_err(|violations| Failure::violations(&args.label(), &violations))?;
    let mut slots = Map::new();
    for role in &parsed.roles {
        slots.insert(role.clone(), json!(runtime.slots(role)?));
    }
    let mut text = format!(
        "{}: ok, {} executor{}; roles: {}\n\n",
        args.label(),
        parsed.executors.len(),
        if parsed.executors.len() == 1 { "" } else { "s" },
        parsed.roles.join(", ")
    );
    let mut table = plain_table(&["executor", "harness", "roles", "slots", "priority", ""]);
    let mut executors = Vec::new();
    for e in &parsed.executors {
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
        let slots_text = if caps.is_empty() {
            e.slots.to_string()
        } else {
            format!("{} ({})", e.slots, caps.join(" "))
        };
        let mut priorities: Vec<(f64, Vec<String>)> = Vec::new();
        for role in &e.roles {
            let p = e.priority_for(role);
            match priorities.iter_mut().find(|(q, _)| *q == p) {
                Some((_, roles)) => roles.push(role.clone()),
                None => priorities.push((p, vec![role.clone()])),
            }
        }
        let priority = match priorities.as_slice() {
            [(p, _)] => p.to_string(),
            _ => priorities
                .iter()
                .map(|(p, roles)| format!("{}:{p}", roles.join("/")))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let mut extra = Vec::new();
        if let Some(health) = &e.health {
            extra.push(format!("health {health}"));
        }
        if e.provision {
            extra.push("provision".into());
        }
        if let Some(cooldown) = e.raw.get("cooldown").and_then(Value::as_object) {
            let parts: Vec<String> = cooldown
                .iter()
                .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or_default()))
                .collect();
            extra.push(format!("cooldown {}", parts.join(", ")));
        }
        table.add_row([
            e.id.clone(),
            harness,
            e.roles.join(","),
            slots_text,
            priority,
            extra.join("; "),
        ]);
        executors.push(json!({
            "id": e.id,
            "harness": e.harness,
            "model": e.model,
            "kind": e.kind,
            "roles": e.roles,
            "slots": e.slots,
            "roleSlots": e.roles.iter().map(|r| (r.clone(), json!(e.cap_for(r)))).collect::<Map<_, _>>(),
            "priority": e.roles.iter().map(|r| (r.clone(), json!(e.priority_for(r)))).collect::<Map<_, _>>(),
            "health": e.health,
            "provision": e.provision,
            "cooldownMs": e.cooldown,
        }));
    }
    text.push_str(&format!("{}\n", render(&table)));
    text.push_str("\nslots per role:");
    for role in &parsed.roles {
        text.push_str(&format!(" {role} {}", slots[role]));
    }
    text.push('\n');
    Ok(Report {
        text,
        json: json!({
            "roster": args.label(),
            "warnings": warnings,
            "roles": parsed.roles,
            "slotsPerRole": slots,
            "executors": executors,
        }),
    })
}

/// The simulation's progress on stderr: a bar in a terminal (indicatif), a line at
/// every quarter otherwise (a log, a CI run).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    next_line: f64,
    hours: f64,
    quiet: bool,
}

impl Progress {
    const STEPS: u64 = 1000;

    fn new(hours: f64, quiet: bool) -> Progress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(Self::STEPS),
                indicatif::ProgressDrawTarget::stderr(),
            );
            let style = indicatif::ProgressStyle::with_template(
                "[{bar:30}] {percent:>3}%  {msg}  {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("#>.");
            bar.set_style(style);
            bar
        });
        Progress {
            bar,
            next_line: 0.0,
            hours,
            quiet,
        }
    }

    fn update(&mut self, share: f64, steps: u64) {
        if self.quiet {
            return;
        }
        let done = format!("{:.1}/{} h  {steps} steps", share * self.hours, self.hours);
        match &self.bar {
            Some(bar) => {
                bar.set_position((share * Self::STEPS as f64).round() as u64);
                bar.set_message(done);
                if share >= 1.0 {
                    bar.finish();
                }
            }
            None if share >= self.next_line => {
                eprintln!("{:>3.0}%  {done}", share * 100.0);
                self.next_line = (share + 0.25).min(1.0);
            }
            None => {}
        }
    }
}

fn run_simulate(
    cli: &Cli,
    roster: Option<&Path>,
    seed: u64,
    hours: f64,
    trace_path: Option<&Path>,
    quiet: bool,
) -> Result<Report, Failure> {
    let (document, label) = match roster {
        Some(path) => (
            load_roster(&RosterArgs::file(path))?,
            path.display().to_string(),
        ),
        None => (
            serde_json::from_str(EXAMPLE_ROSTER).map_err(|e| {
                Failure::Run(format!("the bundled example roster is not JSON: {e}"))
            })?,
            "the bundled example roster".to_string(),
        ),
    };
    let started = stopwatch();
    let module = module(cli)?;
    let loaded = started.elapsed();
    let options = json!({});
    let mut runtime = PolicyRuntime::new(module.clone(), &document, &options)
        .map_err(|e| Failure::roster(&label, e))?;
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
    let mut progress = Progress::new(hours, quiet);
    let report = simulate(
        &mut runtime,
        &document,
        &config,
        trace.as_mut(),
        |share, steps| progress.update(share, steps),
    )
    .map_err(|e| Failure::roster(&label, e))?;
    let elapsed = started.elapsed();
    let (trace_note, trace_json) = match (trace, trace_path) {
        (Some(trace), Some(path)) => {
            let steps = trace.finish()?;
            (
                format!("trace: {} ({steps} steps)\n", path.display()),
                json!({ "path": path.display().to_string(), "steps": steps }),
            )
        }
        _ => (String::new(), Value::Null),
    };
    let per_step_us = (elapsed - loaded).as_secs_f64() * 1e6 / report.steps.max(1) as f64;
    let mut text = report.render();
    text.push_str(&format!(
        "\nwall time {:.2} s (module load {:.0} ms), {per_step_us:.1} µs per step through wasmtime\n",
        elapsed.as_secs_f64(),
        loaded.as_secs_f64() * 1000.0,
    ));
    if runtime.recoveries() > 0 {
        text.push_str(&format!("guest recoveries: {}\n", runtime.recoveries()));
    }
    text.push_str(&trace_note);
    Ok(Report {
        text,
        json: json!({
            "roster": label,
            "seed": seed,
            "hours": hours,
            "policy": { "hash": module.hash(), "source": module.source(), "fromCache": module.from_cache() },
            "report": report.to_json(),
            "guestRecoveries": runtime.recoveries(),
            "trace": trace_json,
            "wallSeconds": elapsed.as_secs_f64(),
        }),
    })
}

/// Exit 1 only when the replay differs; a file that is not a trace, or one whose
/// document or options the policy refuses, cannot be replayed (exit 2).
fn run_replay(cli: &Cli, path: &Path, native: bool) -> Result<Report, Failure> {
    let not_a_trace = |why: &dyn std::fmt::Display| {
        Failure::Run(format!(
            "{} is not a trace `rota replay` can replay ({why}); a trace is what `rota simulate --trace FILE` writes",
            path.display()
        ))
    };
    let trace = Trace::read(path).map_err(|e| match e {
        HostError::Invalid { violations } => not_a_trace(
            &violations
                .iter()
                .map(|v| v.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
        other => Failure::Run(other.to_string()),
    })?;
    let engine: Result<Box<dyn StepEngine>, HostError> = if native {
        NativeEngine::new(&trace.document, &trace.options).map(|e| Box::new(e) as _)
    } else {
        PolicyRuntime::new(module(cli)?, &trace.document, &trace.options).map(|e| Box::new(e) as _)
    };
    let mut engine = engine.map_err(|e| match e {
        HostError::Invalid { .. } | HostError::Policy { .. } => {
            not_a_trace(&format!("its document or options: {e}"))
        }
        other => Failure::Run(other.to_string()),
    })?;
    let engine_name = if native { "native" } else { "module" };
    let started = stopwatch();
    let replayed = replay(engine.as_mut(), &trace, |_, _| {})
        .map_err(|e| Failure::Run(format!("{}: {e}", path.display())))?;
    match replayed {
        None => Ok(Report {
            text: format!(
                "{}: {} steps replayed on {}, every output matches ({:.2} s)\n",
                path.display(),
                trace.steps.len(),
                if native {
                    "the native core"
                } else {
                    "the policy module"
                },
                started.elapsed().as_secs_f64()
            ),
            json: json!({
                "trace": path.display().to_string(),
                "steps": trace.steps.len(),
                "engine": engine_name,
            }),
        }),
        Some(mismatch) => Err(Failure::Check {
            message: format!("{}: {mismatch}", path.display()),
            detail: json!({
                "trace": path.display().to_string(),
                "steps": trace.steps.len(),
                "engine": engine_name,
                "mismatch": {
                    "step": mismatch.step,
                    "at": mismatch.at,
                    "input": mismatch.input,
                    "expected": mismatch.expected,
                    "actual": mismatch.actual,
                },
            }),
        }),
    }
}

fn explain(
    cli: &Cli,
    args: &RosterArgs,
    state: Option<&Path>,
    request: &ExplainRequest,
    now: Option<u64>,
) -> Result<Report, Failure> {
    let document = load_roster(args)?;
    let module = module(cli)?;
    let mut runtime = PolicyRuntime::new(module, &document, &args.options())
        .map_err(|e| Failure::roster(&args.label(), e))?;
    let now = now.unwrap_or_else(system_now_ms);
    let mut notes = Vec::new();
    // Read without moving a corrupt file aside: explain only looks. A state file that
    // does not exist yet holds no exclusions, as a roster starting on it finds.
    let text = match state {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => Some((path, text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                notes.push(format!("nothing ({} does not exist yet)", path.display()));
                None
            }
            Err(e) => return Err(Failure::Run(format!("cannot read {}: {e}", path.display()))),
        },
        None => None,
    };
    if let Some((path, text)) = text {
        let state = runtime
            .state_file_restore(&text, now)
            .map_err(|e| Failure::check(format!("{}: {e}", path.display())))?;
        let input = json!({ "type": "restore", "now": now, "state": state });
        let step = runtime.step(&input)?;
        for raw in &step.outputs {
            match rota_host::output::read(raw) {
                Ok(Output::Event { level, message, .. }) => {
                    if level != Level::Debug {
                        notes.push(message);
                    }
                }
                // A restore asks for nothing else that explain carries out.
                Ok(
                    Output::Granted { .. }
                    | Output::Exhausted { .. }
                    | Output::TimedOut { .. }
                    | Output::Unavailable { .. }
                    | Output::Cancelled { .. }
                    | Output::Waiting { .. }
                    | Output::Probe { .. }
                    | Output::CreateMachine { .. }
                    | Output::DeleteMachine { .. }
                    | Output::Preflight { .. }
                    | Output::StartFailed { .. }
                    | Output::Persist { .. },
                ) => {}
                Err(unreadable) => unreadable.log(),
            }
        }
    } else {
        runtime.step(&json!({ "type": "tick", "now": now }))?;
    }
    let explanation = runtime.explain(request)?;
    let mut json = serde_json::to_value(&explanation).map_err(|e| Failure::Run(e.to_string()))?;
    json["now"] = json!(now);
    json["restored"] = json!(notes);

    let mut text = String::new();
    for note in &notes {
        text.push_str(&format!("restored: {note}\n"));
    }
    text.push_str(&format!(
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
    let mut table = plain_table(&["executor", "now", "priority", "why not"]);
    for e in &explanation.executors {
        table.add_row([
            e.id.clone(),
            if e.ok { "ok" } else { "no" }.to_string(),
            e.priority.map(|p| p.to_string()).unwrap_or_default(),
            e.reasons.join("; "),
        ]);
    }
    if let Some(column) = table.column_mut(2) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    text.push_str(&format!("{}\n", render(&table)));
    Ok(Report { text, json })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_has_help_text() {
        fn walk(command: &clap::Command, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if id != "help" && id != "version" && arg.get_help().is_none() {
                    missing.push(format!("{} {id}", command.get_name()));
                }
            }
            for sub in command.get_subcommands() {
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    missing.push(format!("{} (no about)", sub.get_name()));
                }
                walk(sub, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), &mut missing);
        assert!(missing.is_empty(), "without help: {missing:?}");
        Cli::command().debug_assert();
    }

    #[test]
    fn times_and_numbers() {
        assert_eq!(parse_instant("1767225600000"), Ok(1_767_225_600_000));
        assert_eq!(parse_instant("2026-01-01T00:00:00Z"), Ok(1_767_225_600_000));
        assert_eq!(
            parse_instant("2026-01-01T01:30:00+01:30"),
            Ok(1_767_225_600_000)
        );
        assert!(parse_instant("-5").unwrap_err().contains("not negative"));
        assert!(parse_instant("1969-12-31T23:59:59Z")
            .unwrap_err()
            .contains("before 1970"));
        assert!(parse_instant("tomorrow").unwrap_err().contains("RFC 3339"));
        assert!(parse_seed("-1").unwrap_err().contains("not negative"));
        assert!(parse_hours("-2").unwrap_err().contains("above 0"));
        assert!(parse_hours("0").unwrap_err().contains("above 0"));
        assert!(parse_hours("9000").unwrap_err().contains("8784"));
        assert_eq!(parse_hours("0.5"), Ok(0.5));
    }
}
