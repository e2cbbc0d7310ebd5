//! Helpers shared by the library-level test files: build a world from
//! scenario text, run it (optionally traced), read a metric.

#![allow(dead_code)] // each test file uses its own subset

use herdsim::floor::PolicyKind;
use herdsim::metrics::RunResult;
use herdsim::model::{Prepared, TraceBuf, simulate};
use herdsim::scenario::Loaded;
use std::path::Path;

/// A prepared world from scenario TOML (panics on an invalid scenario).
pub fn prepare(toml: &str) -> Prepared {
    let l = Loaded::from_text("test.toml", toml, Path::new(".")).expect("valid scenario");
    let s = l.base().expect("resolves");
    Prepared::new(&s, Path::new(".")).expect("prepares")
}

/// One replication under `policy`.
pub fn run(toml: &str, policy: PolicyKind, seed: u64) -> RunResult {
    simulate(&prepare(toml), policy, seed, None).expect("within the run limits")
}

/// One replication with its trace, one JSON value per line.
pub fn traced(toml: &str, policy: PolicyKind, seed: u64) -> (RunResult, Vec<serde_json::Value>) {
    let p = prepare(toml);
    let mut buf = TraceBuf::new();
    let r = simulate(&p, policy, seed, Some(&mut buf)).expect("within the run limits");
    (r, trace_lines(&buf))
}

/// Parse a trace buffer into its lines.
pub fn trace_lines(buf: &[u8]) -> Vec<serde_json::Value> {
    buf.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("trace line is JSON"))
        .collect()
}

/// A metric by name (panics if unknown).
pub fn get(r: &RunResult, m: &str) -> f64 {
    r.get(m).unwrap_or_else(|| panic!("no metric {m}"))
}
