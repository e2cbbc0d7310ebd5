//! Every import runs down (issue 24 part 4): the crate's top-level modules
//! sit on the layers of [`LAYERS`], and a module may use only modules on
//! layers below its own: not its own layer, not a higher one. This file is
//! the one place the layers are declared; the picture in `src/lib.rs` must
//! show the same (checked below), and README.md's code map describes them.
//!
//! What is checked, in every `src/**/*.rs` with its comments, string and
//! character literals blanked out (a doc link is not an import):
//!
//! - each `crate::<module>` path, and each module named in a
//!   `crate::{a, b::c}` group, names a module on a lower layer than the
//!   file's own top-level module (or that module itself); a failure names
//!   `file:line`. `crate::BUILD`, the root's build identity (a constant
//!   that depends on nothing), may be used from anywhere, and so may
//!   `crate::floor` and `crate::engine`: the workspace crates
//!   `herdsim-floor` and `herdsim-engine` re-exported at the root, whose
//!   layering Cargo keeps (they do not depend on herdsim, so they cannot
//!   name it). `src/lib.rs` and
//!   `src/main.rs` are the root: they sit above every layer.
//! - every top-level module of `src/` is on exactly one layer, and every
//!   name on a layer is a module of `src/`;
//! - the graph of those references has no cycle (implied by the layers,
//!   checked on its own so that a wrong layer table cannot hide one).
//!
//! Why this order, bottom first (each layer only needs the ones below):
//!
//! - below every layer, crates of their own: `floor` (the arbitration,
//!   which a server or agent author embeds) and `engine` (the virtual
//!   clock);
//! - 0: `files` (how files are opened),
//!   `limits` (the documented bounds), `names` (agent and message ids) and
//!   `progress` (the [`Observer`] a long operation reports to) and
//!   `allocator` (the memory allocator the binary and benchmarks install)
//!   use nothing of the crate;
//! - 1: `metrics` (a run's measures; a `Job` names a floor policy) and
//!   `dist` (distributions; reads empirical files, clamps to the limits);
//! - 2: `agent`, the sans-IO actors: floor clients drawing from `dist`;
//! - 3: `scenario`: files parsed into agents' parameters, distributions,
//!   ids and limits;
//! - 4: `model` (the world: agents, engine, floor server and metrics wired
//!   by a scenario) and `error` (the two kinds of failure, one of which is
//!   a scenario's);
//! - 5: `report`, which reads results (metrics, a scenario's axis labels)
//!   and writes them, through one output API;
//! - 6: `sweep`: model runs planned, run and written through report;
//! - 7: `term` (the terminal side of the front ends) and `tune` (a search
//!   run through sweep);
//! - 8: `tls` and `replay` (the `arbitrate` log format and its replay),
//!   the live side's foundations;
//! - 9: `serve`, the live server: floor, the replay format, TLS, term;
//! - 10: `live`: the agents against serve (or any server), compared with
//!   sweep's simulation;
//! - 11: `calibrate` (observed logs fitted and predicted through sweep);
//! - 12: `observe` (a member on live's connection code, whose log it
//!   calibrates);
//! - 13: `cli`, a front end to everything.
//!
//! [`Observer`]: herdsim::progress::Observer

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first.
const LAYERS: &[&[&str]] = &[
    &["files", "limits", "names", "progress", "allocator"],
    &["metrics", "dist"],
    &["agent"],
    &["scenario"],
    &["model", "error"],
    &["report"],
    &["sweep"],
    &["term", "tune"],
    &["tls", "replay"],
    &["serve"],
    &["live"],
    &["calibrate"],
    &["observe"],
    &["cli"],
];

/// Items of the crate root (`src/lib.rs`) other modules may name.
const ROOT_ITEMS: &[&str] = &["BUILD", "floor", "engine"];

/// The root's files: above every layer.
const ROOT_FILES: &[&str] = &["lib", "main"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`lib`, `main` for
/// the root's files).
fn module_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .expect("a path under src/")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.strip_suffix(".rs").unwrap_or(&first).to_string()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` with comments (`//`, `///`, `//!`, nested `/* */`), string
/// literals (plain, byte, raw) and character literals replaced by spaces;
/// newlines are kept, so line numbers stay right. Lifetimes stay.
fn code_only(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = Vec::with_capacity(s.len());
    let blank = |out: &mut Vec<char>, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(s[i - 1]);
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                blank(&mut out, s[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    blank(&mut out, s[i]);
                    blank(&mut out, s[i + 1]);
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    blank(&mut out, s[i]);
                    blank(&mut out, s[i + 1]);
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, s[i]);
                    i += 1;
                }
            }
        } else if c == 'r'
            && (!prev_ident
                || (i == 1 && s[0] == 'b')
                || (i >= 2 && s[i - 1] == 'b' && !is_ident(s[i - 2])))
            && matches!(next, Some('"' | '#'))
        {
            // A raw string r"..", r#".."#, br"..", or an identifier
            // starting with r followed by `#` (r#type): count the hashes.
            let mut j = i + 1;
            while s.get(j) == Some(&'#') {
                j += 1;
            }
            if s.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            let mut k = j + 1;
            while k < s.len() {
                if s[k] == '"' && (1..=hashes).all(|h| s.get(k + h) == Some(&'#')) {
                    k += 1 + hashes;
                    break;
                }
                k += 1;
            }
            for &ch in &s[i..k.min(s.len())] {
                blank(&mut out, ch);
            }
            i = k;
        } else if c == '"' {
            blank(&mut out, c);
            i += 1;
            while i < s.len() {
                let ch = s[i];
                blank(&mut out, ch);
                i += 1;
                if ch == '\\' {
                    if i < s.len() {
                        blank(&mut out, s[i]);
                        i += 1;
                    }
                } else if ch == '"' {
                    break;
                }
            }
        } else if c == '\'' && (next == Some('\\') || s.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{..}', '\''); anything
            // else after a quote is a lifetime or a label.
            blank(&mut out, c);
            i += 1;
            if s.get(i) == Some(&'\\') {
                blank(&mut out, '\\');
                i += 1;
                if i < s.len() {
                    blank(&mut out, s[i]);
                    i += 1;
                }
            }
            while i < s.len() {
                let ch = s[i];
                blank(&mut out, ch);
                i += 1;
                if ch == '\'' {
                    break;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// One `crate::` path: where, and the first name after `crate::`.
#[derive(Debug)]
struct Ref {
    line: usize,
    name: String,
}

/// The first identifier of `s` (after spaces).
fn first_ident(s: &[char]) -> String {
    s.iter()
        .skip_while(|c| c.is_whitespace())
        .take_while(|c| is_ident(**c))
        .collect()
}

/// Every name a `crate::` path of `code` (already blanked) starts with,
/// each module of a `crate::{..}` group included.
fn crate_refs(code: &str) -> Vec<Ref> {
    let s: Vec<char> = code.chars().collect();
    let key: Vec<char> = "crate".chars().collect();
    let mut refs = Vec::new();
    let line_at = |pos: usize| s[..pos].iter().filter(|c| **c == '\n').count() + 1;
    let mut i = 0;
    while i + key.len() <= s.len() {
        if s[i..i + key.len()] != key[..] || (i > 0 && is_ident(s[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i + key.len();
        while s.get(j).is_some_and(|c| c.is_whitespace()) {
            j += 1;
        }
        if !(s.get(j) == Some(&':') && s.get(j + 1) == Some(&':')) {
            i += key.len();
            continue;
        }
        j += 2;
        while s.get(j).is_some_and(|c| c.is_whitespace()) {
            j += 1;
        }
        if s.get(j) == Some(&'{') {
            // A group: the first name of each item at depth 1.
            let mut depth = 0;
            let mut start = j + 1;
            let mut k = j;
            while k < s.len() {
                match s[k] {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        let name = first_ident(&s[start..k]);
                        if !name.is_empty() && name != "self" {
                            refs.push(Ref {
                                line: line_at(
                                    start
                                        + s[start..k]
                                            .iter()
                                            .take_while(|c| c.is_whitespace())
                                            .count(),
                                ),
                                name,
                            });
                        }
                        start = k + 1;
                        if s[k] == '}' {
                            break;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
                k += 1;
            }
            i = k.max(i + 1);
        } else {
            let name = first_ident(&s[j..]);
            if !name.is_empty() {
                refs.push(Ref {
                    line: line_at(i),
                    name,
                });
            }
            i = j;
        }
    }
    refs
}

/// Layer of each module.
fn layer_of() -> BTreeMap<&'static str, usize> {
    let mut at = BTreeMap::new();
    for (n, layer) in LAYERS.iter().enumerate() {
        for m in layer.iter() {
            assert!(at.insert(*m, n).is_none(), "`{m}` is on two layers");
        }
    }
    at
}

/// The top-level modules of `src/` (the root's files left out).
fn modules() -> BTreeSet<String> {
    std::fs::read_dir(src())
        .expect("src/ reads")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
        .map(|p| module_of(Path::new(p.file_name().expect("a name"))))
        .filter(|m| !ROOT_FILES.contains(&m.as_str()))
        .collect()
}

/// (file, line, from, to) for every `crate::` path of `src/` to another
/// top-level module or to a root item.
fn references() -> Vec<(String, usize, String, String)> {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 20, "src/ holds the crate's files");
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root).expect("under src/").to_path_buf();
        let from = module_of(&rel);
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for r in crate_refs(&code_only(&text)) {
            if r.name != from {
                let shown = format!("src/{}", rel.to_string_lossy().replace('\\', "/"));
                out.push((shown, r.line, from.clone(), r.name));
            }
        }
    }
    out
}

#[test]
fn every_module_is_on_one_layer() {
    let at = layer_of();
    let mods = modules();
    let missing: Vec<&String> = mods
        .iter()
        .filter(|m| !at.contains_key(m.as_str()))
        .collect();
    let stale: Vec<&&str> = at.keys().filter(|m| !mods.contains(**m)).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "modules of src/ on no layer: {missing:?}; names on a layer that are no module of src/: {stale:?} (tests/layers.rs, LAYERS)"
    );
}

#[test]
fn imports_run_down() {
    let at = layer_of();
    let mods = modules();
    let mut bad = Vec::new();
    for (file, line, from, to) in references() {
        if ROOT_FILES.contains(&from.as_str()) || ROOT_ITEMS.contains(&to.as_str()) {
            continue;
        }
        if !mods.contains(&to) {
            bad.push(format!(
                "{file}:{line}: `crate::{to}` is neither a module nor a root item"
            ));
            continue;
        }
        let (Some(&lf), Some(&lt)) = (at.get(from.as_str()), at.get(to.as_str())) else {
            continue; // every_module_is_on_one_layer names it
        };
        if lt >= lf {
            bad.push(format!(
                "{file}:{line}: {from} (layer {lf}) uses {to} (layer {lt}): imports run down, to layers below {lf} only"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "imports that do not run down:\n{}",
        bad.join("\n")
    );
}

#[test]
fn module_graph_has_no_cycle() {
    let mods = modules();
    let mut deps: BTreeMap<String, BTreeSet<String>> =
        mods.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for (_, _, from, to) in references() {
        if mods.contains(&from) && mods.contains(&to) {
            deps.entry(from).or_default().insert(to);
        }
    }
    // Take away modules that use nothing left, until none can go.
    let mut left = deps.clone();
    loop {
        let free: Vec<String> = left
            .iter()
            .filter(|(_, d)| d.iter().all(|x| !left.contains_key(x)))
            .map(|(m, _)| m.clone())
            .collect();
        if free.is_empty() {
            break;
        }
        for m in free {
            left.remove(&m);
        }
    }
    if let Some(start) = left.keys().next() {
        // Every module left uses one left: walk until one repeats.
        let mut path = vec![start.clone()];
        loop {
            let last = path.last().expect("a module");
            let next = left[last]
                .iter()
                .find(|d| left.contains_key(*d))
                .expect("a module left uses another left")
                .clone();
            if let Some(k) = path.iter().position(|m| *m == next) {
                let cycle = path[k..].join(" -> ");
                panic!("the module graph has a cycle: {cycle} -> {next}");
            }
            path.push(next);
        }
    }
}

#[test]
fn lib_rs_shows_the_layers() {
    let text = std::fs::read_to_string(src().join("lib.rs")).expect("src/lib.rs reads");
    // Lines `//!  N    a b c   what they are`, top first.
    let mut shown: Vec<(usize, Vec<String>)> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("//!") else {
            continue;
        };
        let rest = rest.trim_start();
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() || !rest[digits.len()..].starts_with(' ') {
            continue;
        }
        let names = rest[digits.len()..].trim_start();
        let names = names.split("  ").next().unwrap_or_default();
        let layer = digits.parse().expect("a layer number");
        shown.push((
            layer,
            names.split_whitespace().map(str::to_string).collect(),
        ));
    }
    shown.reverse();
    let want: Vec<(usize, Vec<String>)> = LAYERS
        .iter()
        .enumerate()
        .map(|(n, l)| (n, l.iter().map(|m| m.to_string()).collect()))
        .collect();
    assert_eq!(
        shown, want,
        "the layer picture in src/lib.rs (`//! N  modules  what`, top first) differs from LAYERS"
    );
}

#[test]
fn the_scanner_sees_paths_not_comments_or_strings() {
    let code = code_only(
        "use crate::a::X; // crate::b\n/* crate::c /* crate::d */ */ let s = \"crate::e\";\n\
         let r = r#\"crate::f\"#; let c = '\"'; fn g<'a>(x: &'a str) { crate::h::y(); }\n\
         use crate::{\n    i::J,\n    self,\n    k::{l, m},\n};\n",
    );
    let refs = crate_refs(&code);
    let got: Vec<(usize, &str)> = refs.iter().map(|r| (r.line, r.name.as_str())).collect();
    assert_eq!(got, [(1, "a"), (3, "h"), (5, "i"), (7, "k")]);
}
