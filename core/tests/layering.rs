//! Imports in `core/src` run one way: the JSON step at the top, then the policy, then
//! the wire types and the document, then the leaves. This test reads every source
//! file, collects the crate modules it names (`use crate::x`, `crate::x::y` in code),
//! and fails on an import against the declared order or on any cycle.
//!
//! A new module must be given a layer here: an unplaced module fails the test.
//!
//! Inside `policy/` the files run one way too: `mod.rs` (the `Policy` struct, `handle`
//! and the run loop), the flow files (those with an `impl Policy`: flows that touch
//! several sub-states), and the leaves (a sub-state's type and its own methods, the
//! keys and indexes). A leaf names neither `Policy` (nor anything else of `mod.rs`)
//! nor a flow file, and the files' imports form no cycle. In-file test modules
//! (`#[cfg(test)] mod tests`, at a file's end) are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top first. A module may use modules of its own layer or below, never above, and
/// the imports within a layer must not form a cycle.
const LAYERS: &[&[&str]] = &[
    // The JSON step every host calls; a shared roster's log rules, over it.
    &["json", "log"],
    // The state machine; beside it, literal secrets in `env` (warnings next to
    // `validate`'s violations, redaction), which read the document too.
    &["policy", "secrets"],
    // What the policy reads and answers: the document, inputs and outputs, queries'
    // shapes, failure classification, errors.
    // The state file's rule (parse, merge, render) reads protocol's exclusions; a
    // usage limit's reset time read from its message, beside the classification.
    &[
        "document",
        "status",
        "protocol",
        "classify",
        "reset_time",
        "error",
        "state_file",
    ],
    // The leaves: JSON reading and writing helpers, sorted maps, the name map, time
    // and durations (and the decimal numbers of durations), the named bounds.
    &[
        "read", "write", "sorted", "names", "time", "duration", "decimal", "limits",
    ],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The crate module a source file belongs to: `src/x.rs` and `src/x/**` are `x`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    match name {
        "lib" => None,
        other => Some(other.to_string()),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("core/src is readable")
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

/// The code of a line without its `//` comment (doc comments included). Good enough
/// for this crate: no string literal in it holds `//` next to `crate::`.
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(at) => &line[..at],
        None => line,
    }
}

/// Every crate module named in `text`: `crate::x` and `use crate::{x, y::z}`.
fn references(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines().map(code) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            // Not `rota_crate::` or the like: `crate` must start a path.
            let before = rest[..at].chars().next_back();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        found.insert(name);
                    }
                }
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `crate::Foo` (a re-export at the root) names no module.
            if name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                found.insert(name);
            }
        }
    }
    found
}

/// The module graph of `core/src`: module -> the modules it names (itself left out).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(&src, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        let uses = graph.entry(module.clone()).or_default();
        uses.extend(references(&text).into_iter().filter(|m| *m != module));
    }
    graph
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
                Some(_) => {}
                None if graph.contains_key(used) => {} // reported as unplaced
                None => problems.push(format!("`{module}` names `crate::{used}`, no module")),
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
    let graph = graph();
    assert!(graph.contains_key("policy") && graph.contains_key("json"));
    let problems = problems(&graph);
    assert!(
        problems.is_empty(),
        "core/src imports: {problems:#?}\ngraph: {graph:#?}"
    );
}

#[test]
fn the_check_finds_an_upward_import_and_a_cycle() {
    let mut graph = BTreeMap::new();
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    graph.insert("json".to_string(), set(&["policy"]));
    graph.insert("policy".to_string(), set(&["document"]));
    // The cycle issue 12 found: document -> json -> policy -> document.
    graph.insert("document".to_string(), set(&["json"]));
    let found = problems(&graph);
    assert!(found
        .iter()
        .any(|p| p.contains("`document` (layer 2) uses `json`")));
    assert!(found.iter().any(|p| p.starts_with("import cycle")));
    // Sideways within a layer is allowed, a loop there is not.
    let mut sideways = BTreeMap::new();
    sideways.insert("status".to_string(), set(&["protocol"]));
    sideways.insert("protocol".to_string(), set(&["status"]));
    let found = problems(&sideways);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("import cycle"));
}

#[test]
fn references_reads_paths_groups_and_skips_comments() {
    let text = "use crate::read::{self, Read};\nuse crate::{document, time::iso};\n\
                // crate::json is only mentioned\nlet x = crate::sorted::get(a);\n\
                let y = crate::Policy::new();\n";
    let found: Vec<String> = references(text).into_iter().collect();
    assert_eq!(found, ["document", "read", "sorted", "time"]);
}

// ---- inside `policy/` ------------------------------------------------------------------

/// `policy/mod.rs` as a node of the policy's graph.
const POLICY_ROOT: &str = "mod";

/// A policy file's text without its comments and without its in-file test module.
fn policy_code(text: &str) -> String {
    let end = text
        .match_indices("#[cfg(test)]\n")
        .map(|(at, marker)| (at, text[at + marker.len()..].lines().next().unwrap_or("")))
        .find(|(_, next)| next.contains("mod ") && next.ends_with('{'))
        .map_or(text.len(), |(at, _)| at);
    text[..end].lines().map(code).collect::<Vec<_>>().join("\n")
}

/// Whether `text` has an identifier `name` followed by `::` (a path through it).
fn names_path(text: &str, name: &str) -> bool {
    let pattern = format!("{name}::");
    text.match_indices(&pattern).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

/// The policy files a policy file names: in `mod.rs`, `x::` for a sibling `x`; in a
/// child, `super::x` and `super::{x, ..}`, and `super::Name` (an item of `mod.rs`).
fn policy_references(file: &str, text: &str, files: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    if file == POLICY_ROOT {
        found.extend(files.iter().filter(|f| names_path(text, f)).cloned());
        return found;
    }
    let mut rest = text;
    while let Some(at) = rest.find("super::") {
        rest = &rest[at + "super::".len()..];
        let items: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group[..group.find('}').unwrap_or(group.len())]
                .split(',')
                .collect(),
            None => vec![rest],
        };
        for item in items {
            let name: String = item
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
                found.insert(POLICY_ROOT.to_string());
            } else if files.contains(&name) {
                found.insert(name);
            }
        }
    }
    found
}

/// The graph of `policy/`'s files (file stem -> the files it names) and the flow
/// files among them (those with an `impl Policy`).
fn policy_graph() -> (BTreeMap<String, BTreeSet<String>>, BTreeSet<String>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/policy");
    let mut texts = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("core/src/policy is readable") {
        let path = entry.expect("a directory entry").path();
        let Some(stem) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".rs"))
        else {
            continue;
        };
        if stem == "tests" {
            continue; // the policy's test module
        }
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        texts.insert(stem.to_string(), policy_code(&text));
    }
    let files: BTreeSet<String> = texts
        .keys()
        .filter(|f| *f != POLICY_ROOT)
        .cloned()
        .collect();
    let flows = texts
        .iter()
        .filter(|(f, text)| *f != POLICY_ROOT && text.contains("impl Policy "))
        .map(|(f, _)| f.clone())
        .collect();
    let graph = texts
        .iter()
        .map(|(f, text)| {
            let mut uses = policy_references(f, text, &files);
            uses.remove(f);
            (f.clone(), uses)
        })
        .collect();
    (graph, flows)
}

/// What is wrong with the policy's graph: a leaf naming `mod.rs` or a flow, a cycle.
fn policy_problems(
    graph: &BTreeMap<String, BTreeSet<String>>,
    flows: &BTreeSet<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (file, uses) in graph {
        if file == POLICY_ROOT || flows.contains(file) {
            continue;
        }
        for used in uses {
            if used == POLICY_ROOT {
                problems.push(format!(
                    "leaf `policy/{file}.rs` names an item of `policy/mod.rs`"
                ));
            } else if flows.contains(used) {
                problems.push(format!(
                    "leaf `policy/{file}.rs` uses flow file `{used}.rs`"
                ));
            }
        }
    }
    if let Some(around) = cycle(graph) {
        problems.push(format!("import cycle in policy/: {}", around.join(" -> ")));
    }
    problems
}

#[test]
fn policy_files_run_one_way_without_a_cycle() {
    let (graph, flows) = policy_graph();
    assert!(graph.contains_key(POLICY_ROOT) && graph.contains_key("roster"));
    assert!(flows.contains("granting") && !flows.contains("roster"));
    let problems = policy_problems(&graph, &flows);
    assert!(
        problems.is_empty(),
        "core/src/policy imports: {problems:#?}\nflows: {flows:?}\ngraph: {graph:#?}"
    );
}

#[test]
fn the_policy_check_finds_a_leaf_above_itself_and_a_cycle() {
    let files: BTreeSet<String> = ["queue", "roster", "granting"].map(String::from).into();
    let text = "use super::queue::Ending;\nuse super::{roster::Roster, Policy};\n";
    let found: Vec<String> = policy_references("granting", text, &files)
        .into_iter()
        .collect();
    assert_eq!(found, ["mod", "queue", "roster"]);
    let root = "use queue::Queue;\npub use crate::error::E;\nlet x = roster::f();\n";
    let found: Vec<String> = policy_references(POLICY_ROOT, root, &files)
        .into_iter()
        .collect();
    assert_eq!(found, ["queue", "roster"]);

    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    let flows = set(&["granting"]);
    let mut graph = BTreeMap::new();
    graph.insert("mod".to_string(), set(&["queue"]));
    graph.insert("granting".to_string(), set(&["mod", "queue"]));
    graph.insert("queue".to_string(), set(&["roster"]));
    graph.insert("roster".to_string(), set(&[]));
    assert_eq!(policy_problems(&graph, &flows), Vec::<String>::new());
    // A leaf naming `Policy`: both rules see it (mod -> queue -> mod).
    graph.insert("queue".to_string(), set(&["roster", "mod"]));
    let found = policy_problems(&graph, &flows);
    assert!(
        found
            .iter()
            .any(|p| p.contains("leaf `policy/queue.rs` names")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|p| p.starts_with("import cycle")),
        "{found:?}"
    );
    // A cycle among leaves alone.
    graph.insert("queue".to_string(), set(&["roster"]));
    graph.insert("roster".to_string(), set(&["queue"]));
    let found = policy_problems(&graph, &flows);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("import cycle"));
}
