//! Imports in `host-wasmtime/src` run one way: the flows (simulator, replay, the
//! shared roster's builder and tasks, the embedded roster) above the sub-states and
//! the sandbox they drive, the leaves at the bottom. This test reads every source file
//! of the library, collects the crate modules it names (`crate::x`, `super::x` in
//! `shared/`, a parent's `use child::...`), and fails on an import against the
//! declared order or on any cycle, `shared/`'s modules included.
//!
//! A new module must be given a layer here: an unplaced module fails the test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top first. A module may use modules of its own layer or below, never above, and
/// the imports within a layer must not form a cycle. `shared` is `shared/mod.rs`
/// (the feature's facade: its re-exports name every child it exposes).
const LAYERS: &[&[&str]] = &[
    // The engines of `rota simulate` and `rota replay`; the shared roster's facade.
    &["sim", "trace", "shared"],
    // The shared roster (a roster over a remote log): joining, then its calls and the
    // membership's tasks (heartbeats, the leader's duties), then the driver that
    // appends and folds, then the PostgreSQL backend.
    &["shared::builder"],
    &["shared::roster", "shared::leader"],
    &["shared::driver"],
    &["shared::pg"],
    // The roster: its API, then what it is made of, then requests and leases, then
    // the fold with its one output dispatcher and the work outputs ask for, then what
    // it holds, then what the caller gives.
    &["roster"],
    &["roster::builder"],
    &["roster::requests"],
    &[
        "roster::fold",
        "roster::machines",
        "roster::probes",
        "roster::timers",
        "roster::writer",
        "roster::fence",
        "roster::events",
    ],
    &["roster::state"],
    &["roster::provisioner", "roster::document", "roster::metrics"],
    // One policy in its sandbox with its last good state; the state file's IO.
    &["runtime", "state_file"],
    // The wasmtime engine and its module cache; then one instance, call by call.
    &["engine"],
    &["guest"],
    // Leaves: typed outputs, probes, failure facts, roster files, metrics, tables,
    // the clock.
    &[
        "output",
        "probe",
        "classify",
        "source",
        "telemetry",
        "table",
        "clock",
    ],
    // The error type (a log error is one of its sources).
    &["error"],
    // Events, the shared log's contract, atomic file writes.
    &["event", "shared::log", "atomic"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("host-wasmtime/src is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a source file is: `x.rs` is `x`, `shared/mod.rs` is `shared`,
/// `shared/y.rs` is `shared::y`. The crate root and the binary are left out (the
/// binary uses the library by its public paths).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?.with_extension("");
    let parts: Vec<&str> = relative
        .components()
        .map(|c| c.as_os_str().to_str().unwrap_or_default())
        .collect();
    match parts.as_slice() {
        ["lib"] | ["main"] => None,
        [dir, "mod"] => Some((*dir).to_string()),
        parts => Some(parts.join("::")),
    }
}

/// The code of `text` without its `//` comments (doc comments included). Good enough
/// for this crate: no string literal in it holds `//` before a path it names.
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (&text[..end], &text[end..])
}

/// The paths a path expression starting at `text` names (after `crate::`, say), with
/// `{...}` groups expanded: `a::{b, c::d}` is `a::b` and `a::c::d`.
fn paths(text: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut segments = prefix.to_vec();
    let mut rest = text.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut inner = group;
            loop {
                inner = inner.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
                if let Some(after) = inner.strip_prefix('}') {
                    return text.len() - after.len();
                }
                if inner.is_empty() {
                    return text.len();
                }
                let taken = paths(inner, &segments, out);
                inner = &inner[taken.max(1)..];
            }
        }
        let (name, after) = ident(rest);
        if name.is_empty() {
            break;
        }
        segments.push(name.to_string());
        rest = after;
        match rest.strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    if segments.len() > prefix.len() {
        out.push(segments);
    }
    text.len() - rest.len()
}

/// Every path (as absolute segments) that the code of module `module` names.
fn named_paths(module: &str, text: &str, modules: &BTreeSet<String>) -> Vec<Vec<String>> {
    let text = code(text);
    let own: Vec<String> = module.split("::").map(str::to_string).collect();
    let parent: Vec<String> = own[..own.len() - 1].to_vec();
    let mut found = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let before = text[..at].chars().next_back();
        let starts = !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
        let mut step = rest.chars().next().map_or(1, char::len_utf8);
        if starts {
            if let Some(path) = rest.strip_prefix("crate::") {
                step = "crate::".len() + paths(path, &[], &mut found);
            } else if let Some(path) = rest.strip_prefix("super::") {
                step = "super::".len() + paths(path, &parent, &mut found);
            } else if let Some(path) = rest
                .strip_prefix("pub use ")
                .or_else(|| rest.strip_prefix("use "))
            {
                // A parent's `use child::...` names its child module.
                let (name, _) = ident(path.trim_start());
                let mut child = own.clone();
                child.push(name.to_string());
                if modules.contains(&child.join("::")) {
                    step = rest.len() - path.len() + paths(path, &own, &mut found);
                }
            }
        }
        at += step;
    }
    found
}

/// The module a path names: its longest prefix that is a module (`None`: the crate
/// root, as in `crate::Result`).
fn resolve(path: &[String], modules: &BTreeSet<String>) -> Result<Option<String>, String> {
    for len in (1..=path.len()).rev() {
        let name = path[..len].join("::");
        if modules.contains(&name) {
            return Ok(Some(name));
        }
    }
    match path.first() {
        Some(first) if first.chars().next().is_some_and(|c| c.is_ascii_lowercase()) => {
            Err(path.join("::"))
        }
        _ => Ok(None),
    }
}

/// The module graph of `host-wasmtime/src`: module -> the modules it names (itself
/// left out); and the paths that name no module.
fn graph() -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let sources: Vec<(String, String)> = files
        .iter()
        .filter_map(|file| {
            let module = module_of(&src, file)?;
            Some((
                module,
                std::fs::read_to_string(file).expect("a source file"),
            ))
        })
        .collect();
    let modules: BTreeSet<String> = sources.iter().map(|(m, _)| m.clone()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut unknown = Vec::new();
    for (module, text) in &sources {
        let uses = graph.entry(module.clone()).or_default();
        for path in named_paths(module, text, &modules) {
            match resolve(&path, &modules) {
                Ok(Some(used)) if used != *module => {
                    uses.insert(used);
                }
                Ok(_) => {}
                Err(path) => unknown.push(format!("`{module}` names `{path}`, no module")),
            }
        }
    }
    (graph, unknown)
}

/// A cycle in `graph`, as the list of modules around it, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut around = path[at..].to_vec();
            around.push(node.to_string());
            return Some(around);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(found) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(found);
        }
    }
    None
}

/// What is wrong with `graph`: unplaced modules, upward imports, a cycle.
fn problems(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut problems = Vec::new();
    for (module, uses) in graph {
        let Some(from) = layer_of(module) else {
            problems.push(format!("module `{module}` has no layer in LAYERS"));
            continue;
        };
        for used in uses {
            match layer_of(used) {
                Some(to) if to < from => problems.push(format!(
                    "`{module}` (layer {from}) uses `{used}` (layer {to}, above it)"
                )),
                _ => {}
            }
        }
    }
    if let Some(around) = cycle(graph) {
        problems.push(format!("import cycle: {}", around.join(" -> ")));
    }
    problems
}

#[test]
fn imports_run_one_way_without_a_cycle() {
    let (graph, unknown) = graph();
    assert!(graph.contains_key("roster") && graph.contains_key("roster::state"));
    assert!(graph["engine"].contains("guest"), "{graph:#?}");
    let mut problems = problems(&graph);
    problems.extend(unknown);
    assert!(
        problems.is_empty(),
        "host-wasmtime/src imports: {problems:#?}\ngraph: {graph:#?}"
    );
}

#[test]
fn the_check_finds_an_upward_import_and_a_cycle() {
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    // The circles this crate had: engine -> guest -> engine, and in `shared/`,
    // driver <-> replica (since merged into the roster's modules).
    let mut graph = BTreeMap::new();
    graph.insert("engine".to_string(), set(&["guest"]));
    graph.insert("guest".to_string(), set(&["engine"]));
    let found = problems(&graph);
    assert!(found
        .iter()
        .any(|p| p.contains("`guest` (layer 13) uses `engine`")));
    assert!(found.iter().any(|p| p.starts_with("import cycle")));
    // Sideways within a layer is allowed, a loop there is not.
    let mut sideways = BTreeMap::new();
    sideways.insert("roster::fold".to_string(), set(&["roster::machines"]));
    sideways.insert("roster::machines".to_string(), set(&["roster::fold"]));
    let found = problems(&sideways);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("import cycle"));
}

#[test]
fn paths_read_crate_super_groups_and_a_parents_children() {
    let modules = set(&["error", "event", "shared", "shared::log", "shared::driver"]);
    let text = "use crate::error::{HostError, Result};\nuse super::log::{\n    LogError,\n    LogStore,\n};\n\
                // crate::roster is only mentioned\nlet e = crate::event::Event::host(a);\n\
                use super::{driver::Shared, LogEntry};\nlet r: crate::Result<()> = x;\n";
    let found: BTreeSet<String> = named_paths("shared::pg", text, &modules)
        .iter()
        .filter_map(|p| resolve(p, &modules).ok().flatten())
        .collect();
    assert_eq!(
        found,
        set(&["error", "event", "shared", "shared::driver", "shared::log"])
    );
    let parent = "mod log;\npub use log::{LogError, LogStore};\nuse std::sync::Arc;\n";
    let found: BTreeSet<String> = named_paths("shared", parent, &modules)
        .iter()
        .filter_map(|p| resolve(p, &modules).ok().flatten())
        .collect();
    assert_eq!(found, set(&["shared::log"]));
    assert_eq!(
        resolve(&["nowhere".to_string()], &modules),
        Err("nowhere".to_string())
    );

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }
}
