//! Helpers shared by the library-level test files: build a world from
//! scenario text, run it (optionally traced), read a metric.

#![allow(dead_code)] // each test file uses its own subset

use herdsim::floor::PolicyKind;
use herdsim::metrics::RunResult;
use herdsim::model::{Prepared, TraceBuf, simulate};
use herdsim::scenario::Loaded;
use std::path::Path;

/// `text` with every run of white space (line breaks included) as one
/// space: what a report says, whatever the width its lines were wrapped
/// to and wherever the length of a path put the breaks. Compare reports
/// with this, never line by line.
pub fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `herdsim <args>` in `dir` (a hang past 60 s fails) must exit 2 with one
/// `herdsim: error:` line that contains every `expect`; returns the line.
pub fn refused<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(
    dir: &Path,
    args: &[S],
    expect: &[&str],
) -> String {
    let out = assert_cmd::Command::cargo_bin("herdsim")
        .expect("binary")
        .timeout(std::time::Duration::from_secs(60))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.starts_with("herdsim: error: "), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one message: {err}");
    for e in expect {
        assert!(err.contains(e), "{args:?}: `{e}` missing in: {err}");
    }
    err
}

/// Two agents answering each other for ever under `none`, each answer
/// taking 1e10 ms: virtual time passes the horizon of 1e13 ms after about
/// 1000 hops (the 7998th event is the first past it), long before
/// `max_depth` ends the cascade.
pub const ENDLESS_CASCADE: &str = "reps = 1
policies = [\"none\"]
[workload]
count = 1
reply_to_agent_p = 1
max_depth = 4000
[[agents]]
count = 2
respond_p = 1
inference = { kind = \"fixed\", ms = 1e10 }
";

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

fn ensure(ok: bool, what: String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what) }
}

/// The invariants of one traced replication (tests/invariants.rs): no
/// agent answers a message twice, every started inference ends exactly
/// once unless hung, and the metric identities hold. `loss`: the scenario
/// loses messages.
pub fn check_invariants(
    r: &RunResult,
    buf: &[u8],
    policy: PolicyKind,
    loss: bool,
) -> Result<(), String> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut answered: BTreeSet<(String, String)> = BTreeSet::new();
    // (agent, msg) -> hung?
    let mut open: BTreeMap<(String, String), bool> = BTreeMap::new();
    let mut started = 0u64;
    for line in buf.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| e.to_string())?;
        let agent = v["agent"].as_str().unwrap_or("").to_string();
        let msg = v["msg_id"].as_str().unwrap_or("").to_string();
        match v["ev"].as_str().unwrap_or("") {
            "server_recv" if v["msg"]["type"] == "MSG" => {
                if let Some(parent) = v["msg"]["in_reply_to"].as_str() {
                    let fresh = answered.insert((agent, parent.to_string()));
                    ensure(fresh, format!("an agent answered {parent} twice"))?;
                }
            }
            "infer" => {
                started += 1;
                let hung = v["hung"].as_bool().unwrap_or(false);
                let was = open.insert((agent, msg), hung);
                ensure(was.is_none(), "inference started twice at once".into())?;
            }
            "done" | "abort" => {
                let was = open.remove(&(agent, msg));
                ensure(
                    was == Some(false),
                    "an inference ended that was not running (or was hung)".into(),
                )?;
            }
            "crash" => open.retain(|(a, _), _| *a != agent),
            _ => {}
        }
    }
    ensure(
        open.values().all(|hung| *hung),
        "a non-hung inference never ended".into(),
    )?;

    let g = |m: &str| r.get(m).unwrap_or(f64::NAN);
    for m in [
        "duplicate_rate",
        "unanswered_rate",
        "wasted_inference_rate",
        "wasted_inference_count_rate",
        "single_starter_rate",
    ] {
        ensure((0.0..=1.0).contains(&g(m)), format!("{m} = {}", g(m)))?;
    }
    let single = 1.0 - g("duplicate_rate") - g("unanswered_rate");
    ensure(single >= -1e-12, "duplicate + unanswered exceed 1".into())?;
    let msgs = g("messages");
    // Replies >= 1 per singly answered message + 2 per duplicated one.
    ensure(
        g("responses_per_msg") * msgs + 1e-9 >= single * msgs + 2.0 * g("duplicate_rate") * msgs,
        "fewer replies than the shares imply".into(),
    )?;
    ensure(
        g("inferences") >= 0.0 && g("inferences") <= started as f64,
        "more inferences than started".into(),
    )?;
    ensure(
        g("lost") == 0.0 || loss,
        "messages lost without loss_p".into(),
    )?;
    if policy == PolicyKind::None {
        ensure(
            g("claims") == 0.0 && g("yields") == 0.0,
            "claims under none".into(),
        )?;
    }
    Ok(())
}

/// An example, built by `cargo test` beside the test binaries
/// (`target/<profile>/examples/`).
pub fn example_bin(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/");
    let bin = profile
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test` without a target filter builds the examples; \
         with one, run `cargo build --release --examples` first",
        bin.display()
    );
    bin
}
