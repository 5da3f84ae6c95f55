//! The crate's layout as DESIGN.md states it: at most 20 entries in `src/`,
//! and no import circle spanning two of its top-level modules, so each
//! subsystem can be read (and changed) from the ones below it alone.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const MAX_TOP_LEVEL_ENTRIES: usize = 20;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level modules: `src/x/` and `src/x.rs`, but not `lib.rs`.
fn top_level_modules() -> BTreeSet<String> {
    fs::read_dir(src())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            if path.is_dir() {
                Some(name)
            } else {
                name.strip_suffix(".rs")
                    .filter(|stem| *stem != "lib")
                    .map(str::to_owned)
            }
        })
        .collect()
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The first segment of every `crate::` path in `source`, including each
/// one of a `crate::{a, b::c}` group.
fn crate_paths(source: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for (at, _) in source.match_indices("crate::") {
        let rest = &source[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            found.push(identifier(rest));
            continue;
        };
        let mut depth = 0;
        let mut item_start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    found.push(identifier(group[item_start..i].trim_start()));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    found.push(identifier(group[item_start..i].trim_start()));
                    item_start = i + 1;
                }
                _ => {}
            }
        }
    }
    found
}

/// Which top-level modules each top-level module imports, with a file that
/// does it.
fn imports() -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let modules = top_level_modules();
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut graph: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&root).unwrap();
        let first = relative.components().next().unwrap();
        let first = first.as_os_str().to_str().unwrap();
        let from = first.strip_suffix(".rs").unwrap_or(first).to_owned();
        if from == "lib" {
            continue;
        }
        let source = fs::read_to_string(&file).unwrap();
        for to in crate_paths(&source) {
            if to != from && modules.contains(to) {
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to.to_owned())
                    .or_insert_with(|| relative.to_owned());
            }
        }
    }
    graph
}

#[test]
fn src_has_at_most_twenty_entries() {
    let entries = fs::read_dir(src())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| !name.starts_with('.'))
        .collect::<BTreeSet<_>>();
    assert!(
        entries.len() <= MAX_TOP_LEVEL_ENTRIES,
        "src/ has {} entries: {entries:?}",
        entries.len()
    );
}

#[test]
fn no_import_circle_spans_two_top_level_modules() {
    let graph = imports();
    // A module reaching itself through another is a circle.
    for start in graph.keys() {
        let mut path = vec![start.clone()];
        let mut seen = BTreeSet::new();
        if let Some(circle) = find_circle(&graph, start, &mut path, &mut seen) {
            let steps = circle
                .windows(2)
                .map(|step| {
                    format!(
                        "{} -> {} ({})",
                        step[0],
                        step[1],
                        graph[&step[0]][&step[1]].display()
                    )
                })
                .collect::<Vec<_>>();
            panic!("import circle: {}", steps.join(", "));
        }
    }
}

fn find_circle(
    graph: &BTreeMap<String, BTreeMap<String, PathBuf>>,
    start: &str,
    path: &mut Vec<String>,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    let current = path.last().unwrap().clone();
    for next in graph.get(&current).into_iter().flat_map(BTreeMap::keys) {
        if next == start {
            let mut circle = path.clone();
            circle.push(next.clone());
            return Some(circle);
        }
        if seen.insert(next.clone()) {
            path.push(next.clone());
            if let Some(circle) = find_circle(graph, start, path, seen) {
                return Some(circle);
            }
            path.pop();
        }
    }
    None
}

#[test]
fn crate_paths_reads_single_paths_and_groups() {
    let source = "use crate::a::B;\nuse crate::{c, d::{E, F}, g::H};\nlet x = crate::i::j();";
    assert_eq!(crate_paths(source), ["a", "c", "d", "g", "i"]);
}
