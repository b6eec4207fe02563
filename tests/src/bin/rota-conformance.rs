//! The conformance tool.
//!
//! ```text
//! rota-conformance record [--force] [FILE...]   fill in missing `expect`s from the native core
//!                                               (a first draft: review every one by reading)
//! rota-conformance check [FILE...]              run vectors on the native core, print failures
//! rota-conformance traces [--seed HEX] [--count N] [--out PATH] [--check]
//!                                               write the random traces + native hashes
//!                                               (default target/conformance/traces.json;
//!                                               --check: the native host's extra checks,
//!                                               which `cargo test` makes anyway)
//! rota-conformance trace SEED                   print one random trace with native answers
//! rota-conformance stats [--seed HEX]           what the random traces exercise: inputs,
//!                                               error codes, outputs and events, counted
//! rota-conformance replay-traces [--out DIR]    write every vector as a `rota replay` trace
//!                                               (default target/conformance/replay/)
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rota_conformance::host::{run_vector, Host, NativeHost};
use rota_conformance::vector::{load_vector, vector_files, Action, Vector};
use rota_conformance::{jsonfmt, traces, vectors_dir};
use serde_json::Value;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("record") => record(&args[1..]),
        Some("record-state-file") => record_state_file(),
        Some("check") => check(&args[1..]),
        Some("traces") => write_traces(&args[1..]),
        Some("trace") => show_trace(&args[1..]),
        Some("stats") => stats(&args[1..]),
        Some("replay-traces") => replay_traces(&args[1..]),
        _ => Err(
            "usage: rota-conformance record|check|traces|trace|replay-traces ... (see the source's docs)"
                .into(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn files_or_all(args: &[String]) -> Result<Vec<PathBuf>, String> {
    let files: Vec<PathBuf> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    if files.is_empty() {
        vector_files(&vectors_dir())
    } else {
        Ok(files)
    }
}

/// Fills in `expect` (and nothing else) from the native core, and rewrites the file in
/// the canonical layout. `--force` re-records every expectation.
fn record(args: &[String]) -> Result<(), String> {
    let force = args.iter().any(|a| a == "--force");
    for file in files_or_all(args)? {
        let mut vector = load_vector(&file)?;
        let mut host = NativeHost::new();
        let created = host.create(&vector.document_text(), &vector.options_text());
        if let Err(answer) = created {
            if vector.create.is_none() || force {
                vector.create = Some(serde_json::from_str(&answer).map_err(|e| e.to_string())?);
            }
        } else {
            let mut changed = 0;
            for (i, step) in vector.steps.iter_mut().enumerate() {
                let answer = match step.action()? {
                    Action::Input(text) => host.step(&text),
                    Action::Query(text) => host.query(&text),
                };
                for problem in host.take_problems() {
                    eprintln!("{} step {}: PROBLEM: {problem}", file.display(), i + 1);
                }
                if step.expect.is_none() || force {
                    step.expect = Some(serde_json::from_str(&answer).map_err(|e| e.to_string())?);
                    changed += 1;
                }
            }
            eprintln!("{}: {changed} expectation(s) recorded", file.display());
        }
        write_vector(&file, &vector)?;
    }
    Ok(())
}

/// Fills in every state-file case without `expect` (or `"expect": null`) from the
/// native core, keeping the file's layout (one case per line). Review them by reading.
fn record_state_file() -> Result<(), String> {
    use rota_conformance::state_file::{load_state_file_vectors, state_file_dir};
    for vector in load_state_file_vectors(&state_file_dir())? {
        let mut changed = 0;
        let mut lines = Vec::new();
        for case in &vector.cases {
            let mut value = serde_json::to_value(CaseOut::from(case)).map_err(|e| e.to_string())?;
            if case.expect.is_none() {
                let answer = rota_core::state_file::answer(&case.text()?);
                value["expect"] = serde_json::from_str(&answer).map_err(|e| e.to_string())?;
                changed += 1;
            }
            lines.push(format!("    {}", jsonfmt::inline(&value)));
        }
        let text = format!(
            "{{\n  \"name\": {},\n  \"checks\": {},\n  \"cases\": [\n{}\n  ]\n}}\n",
            Value::from(vector.name.clone()),
            Value::from(vector.checks.clone()),
            lines.join(",\n")
        );
        std::fs::write(&vector.file, text)
            .map_err(|e| format!("{}: {e}", vector.file.display()))?;
        eprintln!(
            "{}: {changed} expectation(s) recorded",
            vector.file.display()
        );
    }
    Ok(())
}

/// A case in its written field order.
#[derive(serde::Serialize)]
struct CaseOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<&'a Value>,
    #[serde(rename = "requestText", skip_serializing_if = "Option::is_none")]
    request_text: Option<&'a String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expect: Option<&'a Value>,
}

impl<'a> From<&'a rota_conformance::state_file::Case> for CaseOut<'a> {
    fn from(case: &'a rota_conformance::state_file::Case) -> Self {
        CaseOut {
            note: case.note.as_ref(),
            request: case.request.as_ref(),
            request_text: case.request_text.as_ref(),
            expect: case.expect.as_ref(),
        }
    }
}

fn write_vector(file: &Path, vector: &Vector) -> Result<(), String> {
    std::fs::write(file, jsonfmt::pretty(&vector.to_json()))
        .map_err(|e| format!("{}: {e}", file.display()))
}

fn check(args: &[String]) -> Result<(), String> {
    let mut failed = 0;
    let files = files_or_all(args)?;
    for file in &files {
        let vector = load_vector(file)?;
        vector.check_shape()?;
        if let Err(failure) = run_vector(&mut NativeHost::new(), &vector) {
            failed += 1;
            eprintln!("{}\n", failure.report);
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {} vectors failed", files.len()));
    }
    eprintln!("{} vectors pass on native", files.len());
    Ok(())
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn parse_seed(text: &str) -> Result<u64, String> {
    u64::from_str_radix(text.trim_start_matches("0x"), 16)
        .map_err(|e| format!("a seed is hex ({text}: {e})"))
}

fn write_traces(args: &[String]) -> Result<(), String> {
    let seed = flag(args, "--seed")
        .map(parse_seed)
        .transpose()?
        .unwrap_or(traces::DEFAULT_SEED);
    let count = flag(args, "--count")
        .map(|c| c.parse::<usize>().map_err(|e| format!("--count: {e}")))
        .transpose()?
        .unwrap_or(traces::DEFAULT_COUNT);
    let out = flag(args, "--out")
        .map(PathBuf::from)
        .unwrap_or_else(|| rota_conformance::out_dir().join("traces.json"));
    let check = args.iter().any(|a| a == "--check");
    let (file, problems) = traces::generate_with(seed, count, check);
    traces::write_file(&out, &file)?;
    let steps: usize = file.traces.iter().map(|t| t.inputs.len()).sum();
    eprintln!(
        "wrote {} traces ({steps} inputs) from seed {seed:016x} to {}",
        file.traces.len(),
        out.display()
    );
    if !problems.is_empty() {
        return Err(format!(
            "the native core failed its own checks:\n{}",
            problems.join("\n")
        ));
    }
    Ok(())
}

fn show_trace(args: &[String]) -> Result<(), String> {
    let seed = parse_seed(args.first().ok_or("trace SEED")?)?;
    let (trace, problems) = traces::generate_one(seed);
    println!("document: {}", trace.document);
    println!("options: {}", trace.options);
    let mut host = NativeHost::new();
    host.create(&trace.document, &trace.options)?;
    for (i, input) in trace.inputs.iter().enumerate() {
        println!("\n[{}] {input}", i + 1);
        let answer = host.step(input);
        match serde_json::from_str::<Value>(&answer) {
            Ok(value) => print!("{}", rota_conformance::matching::answer_lines(&value)),
            Err(_) => println!("{answer}"),
        }
    }
    for problem in problems {
        println!("PROBLEM: {problem}");
    }
    Ok(())
}

/// Counts what the random traces exercise, from the native answers.
fn stats(args: &[String]) -> Result<(), String> {
    use std::collections::BTreeMap;
    let seed = flag(args, "--seed")
        .map(parse_seed)
        .transpose()?
        .unwrap_or(traces::DEFAULT_SEED);
    let (file, _) = traces::generate_with(seed, traces::DEFAULT_COUNT, false);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut bump = |key: String| *counts.entry(key).or_default() += 1;
    for trace in &file.traces {
        let mut host = NativeHost::unchecked();
        host.create(&trace.document, &trace.options)?;
        for input in &trace.inputs {
            let kind = serde_json::from_str::<Value>(input)
                .ok()
                .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_else(|| "(not an object with a type)".into());
            bump(format!("input   {kind}"));
            let answer: Value =
                serde_json::from_str(&host.step(input)).map_err(|e| e.to_string())?;
            if let Some(code) = answer["error"]["code"].as_str() {
                bump(format!("error   {code}"));
            }
            for output in answer["outputs"].as_array().into_iter().flatten() {
                match output["type"].as_str() {
                    Some("event") => bump(format!(
                        "event   {}",
                        output["name"].as_str().unwrap_or("?")
                    )),
                    Some(kind) => bump(format!("output  {kind}")),
                    None => {}
                }
            }
        }
    }
    for (key, n) in counts {
        println!("{n:>7}  {key}");
    }
    Ok(())
}

/// Every vector as a trace for `rota replay` (creation failures have nothing to
/// replay; queries and non-JSON input texts are left out of the trace).
fn replay_traces(args: &[String]) -> Result<(), String> {
    let dir = flag(args, "--out")
        .map(PathBuf::from)
        .unwrap_or_else(|| rota_conformance::out_dir().join("replay"));
    if dir.is_dir() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (mut written, mut skipped_vectors, mut skipped_steps) = (0, 0, 0);
    for file in vector_files(&vectors_dir())? {
        let vector = load_vector(&file)?;
        match rota_conformance::vector::replay_trace(&vector) {
            Some((trace, skipped)) => {
                let out = dir.join(format!("{}.trace.json", vector.name));
                std::fs::write(&out, format!("{trace}\n"))
                    .map_err(|e| format!("{}: {e}", out.display()))?;
                written += 1;
                skipped_steps += skipped;
            }
            None => skipped_vectors += 1,
        }
    }
    eprintln!(
        "wrote {written} replay traces to {} ({skipped_vectors} creation-failure vectors and {skipped_steps} query or non-JSON steps have nothing to replay)",
        dir.display()
    );
    Ok(())
}
