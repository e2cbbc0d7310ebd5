//! Pinned results: every library scenario, run reduced through the CLI,
//! writes exactly the `summary.csv` and `runs.csv` it wrote when the pins
//! were taken, and a traced default run writes the same trace.
//!
//! This is the safety net of refactors and speed work (they must not change
//! a single byte of a result). A change that legitimately changes results
//! (a model fix, a new policy rule) re-pins on purpose:
//! `HERDSIM_REPIN=1 cargo test --release --test pinned`, then commit
//! `tests/data/pinned.txt` with a message that says why the bytes changed.
//!
//! Each run is reduced as `.ci/run` reduces it (2 replications, 40 posts
//! unless the workload is scripted, the large channel at 10 and 30 agents),
//! so the whole file runs in a few seconds. The hash is FNV-1a (64 bits),
//! stable across machines and Rust versions; results themselves are
//! promised byte-identical on one platform (ln/exp come from its libm).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn fnv(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn herdsim(args: &[&str], out: &Path) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_herdsim"))
        .current_dir(ROOT)
        .args(args)
        .arg("--out")
        .arg(out)
        .args(["--quiet", "--no-plot", "--jobs", "2"])
        .output()
        .expect("herdsim runs");
    assert!(
        o.status.success(),
        "herdsim {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn library() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("scenarios"))
        .expect("scenarios/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// The hashes of every pinned output: `name/file` -> hash.
fn actual() -> BTreeMap<String, String> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut got = BTreeMap::new();
    for file in library() {
        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a file name")
            .to_string();
        let text = std::fs::read_to_string(&file).expect("read scenario");
        let rel = format!("scenarios/{stem}.toml");
        let mut args = vec!["run", rel.as_str(), "--reps", "2"];
        // A scripted workload (count = 0) keeps its posts.
        if !text
            .lines()
            .any(|l| l.trim_start().starts_with("count = 0"))
        {
            args.extend(["--set", "workload.count=40"]);
        }
        if text.contains("\"agents.0.count\"") {
            args.extend(["--set", "sweep.agents.0.count=[10, 30]"]);
        }
        let out = tmp.path().join(&stem);
        herdsim(&args, &out);
        // One scenario per out folder: its only subfolder.
        let dir = std::fs::read_dir(&out)
            .expect("out")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.is_dir())
            .expect("a results folder");
        for csv in ["summary.csv", "runs.csv"] {
            let bytes = std::fs::read(dir.join(csv)).expect("csv written");
            got.insert(format!("{stem}/{csv}"), fnv(&bytes));
        }
    }
    // A trace: the default scenario's first replication under spec.
    let trace = tmp.path().join("default-spec.jsonl");
    let trace_arg = trace.to_str().expect("utf-8 temp path").to_string();
    herdsim(
        &[
            "run",
            "scenarios/default.toml",
            "--reps",
            "1",
            "--set",
            "workload.count=100",
            "--trace",
            &trace_arg,
            "--trace-policy",
            "spec",
        ],
        &tmp.path().join("traced"),
    );
    let bytes = std::fs::read(&trace).expect("trace written");
    got.insert("default/trace-spec.jsonl".into(), fnv(&bytes));
    got
}

#[test]
fn library_results_match_their_pins() {
    let pins = Path::new(ROOT).join("tests/data/pinned.txt");
    let got = actual();
    if std::env::var_os("HERDSIM_REPIN").is_some() {
        let mut text = String::from(
            "# FNV-1a of each pinned output (tests/pinned.rs); re-pin only on purpose.\n",
        );
        for (k, v) in &got {
            text.push_str(&format!("{k} {v}\n"));
        }
        std::fs::write(&pins, text).expect("write pins");
        return;
    }
    let text = std::fs::read_to_string(&pins).expect("tests/data/pinned.txt");
    let want: BTreeMap<String, String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect();
    let mut wrong = Vec::new();
    for (k, v) in &got {
        match want.get(k) {
            Some(w) if w == v => {}
            Some(w) => wrong.push(format!("{k}: pinned {w}, now {v}")),
            None => wrong.push(format!("{k}: not pinned (new scenario?)")),
        }
    }
    for k in want.keys().filter(|k| !got.contains_key(*k)) {
        wrong.push(format!("{k}: pinned but no longer produced"));
    }
    assert!(
        wrong.is_empty(),
        "results changed; if on purpose, re-pin with HERDSIM_REPIN=1 (see tests/pinned.rs):\n{}",
        wrong.join("\n")
    );
}
