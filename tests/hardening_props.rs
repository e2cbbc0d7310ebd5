//! Property test over scenario inputs generated from the schema
//! (crates/model/src/scenario/schema.rs and validate.rs): random assignments to every
//! key, with values inside, at and beyond each documented bound, of the
//! wrong type, or non-finite, given both as a scenario file and as
//! `--set`. Whatever the input:
//! - nothing panics (a panic fails the case);
//! - a refused input gets one message naming a key;
//! - an accepted input runs to its end or stops at a documented run limit
//!   (`max_events` is pinned small, so no case can loop or grow without
//!   bound), and a finished run satisfies the invariants of
//!   tests/invariants.rs.

use herdsim::floor::PolicyKind;
use herdsim::model::{Prepared, RunLimit, TraceBuf, simulate};
use herdsim::scenario::{Loaded, parse_value, set_path};
use proptest::prelude::*;
use std::path::Path;

mod common;

const BASE: &str = "reps = 1\n[workload]\ncount = 4\nmean_gap_ms = 1000\n[[agents]]\ncount = 3\n";

/// The events a generated run may process: small enough that the whole
/// test stays well under a minute.
const MAX_EVENTS: u64 = 100_000;

const DURATIONS: &[&str] = &[
    "0",
    "0.5",
    "1",
    "250",
    "5000",
    "1e10",
    "10000000001",
    "-1",
    "1e300",
    "inf",
    "nan",
    "\"x\"",
    "true",
];
const TIMES: &[&str] = &["0", "5000", "1e12", "1.1e12", "-5", "inf"];
const PROBS: &[&str] = &["0", "0.3", "1", "1.5", "-0.1", "nan", "\"p\""];
const COUNTS: &[&str] = &["0", "1", "3", "7", "4294967296", "-1", "1.5", "\"3\""];
const BOOLS: &[&str] = &["true", "false", "3"];

fn from(list: &'static [&'static str]) -> BoxedStrategy<String> {
    prop::sample::select(list)
        .prop_map(|s: &str| s.to_string())
        .boxed()
}

/// Mostly an accepted value (the first `ok` of `list`), sometimes any.
fn mostly(list: &'static [&'static str], ok: usize) -> BoxedStrategy<String> {
    prop_oneof![3 => from(&list[..ok]), 1 => from(list)].boxed()
}

/// A distribution table, valid or not, with generated parameters.
fn dist() -> BoxedStrategy<String> {
    let d = || mostly(DURATIONS, 6);
    prop_oneof![
        d().prop_map(|ms| format!("{{ kind = \"fixed\", ms = {ms} }}")),
        (d(), d())
            .prop_map(|(a, b)| format!("{{ kind = \"uniform\", min_ms = {a}, max_ms = {b} }}")),
        d().prop_map(|m| format!("{{ kind = \"exponential\", mean_ms = {m} }}")),
        (d(), d())
            .prop_map(|(m, s)| format!("{{ kind = \"normal\", mean_ms = {m}, sd_ms = {s} }}")),
        (d(), d())
            .prop_map(|(a, b)| format!("{{ kind = \"lognormal\", p50_ms = {a}, p99_ms = {b} }}")),
        Just("{ kind = \"normal\", mean_ms = -1e10, sd_ms = 1e10 }".to_string()),
        Just("{ kind = \"lognormal\", p50_ms = 1e10, p99_ms = 1e10 }".to_string()),
        Just("{ kind = \"gamma\", ms = 3 }".to_string()),
        Just("{ ms = 3 }".to_string()),
        Just("{ kind = \"empirical\", path = \"no-such.csv\" }".to_string()),
    ]
    .boxed()
}

/// One `key = value` from the schema.
fn assignment() -> BoxedStrategy<(String, String)> {
    let key = |k: &'static str, v: BoxedStrategy<String>| v.prop_map(move |v| (k.to_string(), v));
    prop_oneof![
        key(
            "seed",
            from(&[
                "0",
                "7",
                "9223372036854775807",
                "\"18446744073709551615\"",
                "-1"
            ])
        ),
        key("reps", from(&["0", "1", "2", "-3"])),
        key(
            "policies",
            from(&[
                "[\"spec\"]",
                "[\"none\", \"tombstone\"]",
                "[\"agentchat-0.36\"]",
                "[\"server-time\"]",
                "[\"bogus\"]",
                "[]",
            ])
        ),
        key(
            "epoch_ms",
            from(&[
                "0",
                "1700000000000",
                "9000000000000000",
                "9000000000000001",
                "9223372036854775807",
                "-1",
            ])
        ),
        key("server.ttl_ms", mostly(DURATIONS, 6)),
        key("server.enabled", from(BOOLS)),
        key("server.processing", dist()),
        key("server.disconnect_detect", dist()),
        key("server.restart", dist()),
        key("network.base_ms", mostly(DURATIONS, 6)),
        key("network.jitter", dist()),
        key("network.fifo", from(BOOLS)),
        key("network.loss_p", mostly(PROBS, 3)),
        key("agents.0.count", mostly(COUNTS, 4)),
        key("agents.0.respond_p", mostly(PROBS, 3)),
        key("agents.0.csma", dist()),
        key("agents.0.csma_tick_ms", mostly(DURATIONS, 6)),
        key("agents.0.inference", dist()),
        key("agents.0.clock_skew", dist()),
        key("agents.0.ignore_yield_p", mostly(PROBS, 3)),
        key("agents.0.crash_p", mostly(PROBS, 3)),
        key("agents.0.hang_p", mostly(PROBS, 3)),
        key("agents.0.recheck_on_expiry", from(BOOLS)),
        key("agents.0.max_rechecks", mostly(COUNTS, 4)),
        key(
            "agents.0.channels",
            from(&[
                "[\"#general\"]",
                "[\"#general\", \"#x\"]",
                "[\"general\"]",
                "[]"
            ])
        ),
        key(
            "workload.arrivals",
            from(&["\"poisson\"", "\"fixed\"", "\"weird\""])
        ),
        key("workload.mean_gap_ms", mostly(DURATIONS, 6)),
        key(
            "workload.count",
            from(&["0", "1", "4", "1000000000", "1000000001", "-2"])
        ),
        key("workload.duration_ms", mostly(TIMES, 3)),
        key(
            "workload.channel",
            from(&["\"#general\"", "\"#x\"", "\"general\""])
        ),
        key("workload.mention_p", mostly(PROBS, 3)),
        key("workload.dm_p", mostly(PROBS, 3)),
        key("workload.reply_to_agent_p", mostly(PROBS, 3)),
        key("workload.max_depth", from(&["0", "3", "100", "-1"])),
    ]
    .boxed()
}

/// Check one loaded scenario: a finished run satisfies the invariants, a
/// stopped one names a documented limit.
fn run_checked(loaded: &Loaded, seed: u64, pick: usize) -> Result<(), TestCaseError> {
    let s = match loaded.base() {
        Ok(s) => s,
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "accepted but unresolvable: {e}"
            )));
        }
    };
    if s.agent_count() > 50 {
        return Ok(()); // validated; too big to simulate here
    }
    let policies = s.policy_kinds();
    prop_assert!(!policies.is_empty());
    let policy: PolicyKind = policies[pick % policies.len()];
    let world = Prepared::new(&s, Path::new("."))
        .map_err(|e| TestCaseError::fail(format!("accepted but not preparable: {e}")))?;
    let mut buf = TraceBuf::new();
    match simulate(&world, policy, seed, Some(&mut buf)) {
        Ok(r) => {
            prop_assert!(r.get("events").unwrap_or(f64::NAN) <= MAX_EVENTS as f64);
            if let Err(e) = common::check_invariants(&r, &buf, policy, s.network.loss_p > 0.0) {
                return Err(TestCaseError::fail(e));
            }
        }
        Err(RunLimit::Events(n)) => prop_assert_eq!(n, MAX_EVENTS),
        Err(other) => prop_assert!(false, "unexpected limit: {}", other),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn generated_inputs_never_panic_loop_or_run_unchecked(
        sets in prop::collection::vec(assignment(), 0..6),
        as_file in any::<bool>(),
        seed in any::<u64>(),
        pick in 0usize..4,
    ) {
        let loaded = if as_file {
            // The assignments written into the scenario file.
            let mut tree = toml::Value::Table(toml::from_str(BASE).expect("base parses"));
            for (k, v) in &sets {
                prop_assert!(set_path(&mut tree, k, parse_value(v)).is_ok());
            }
            set_path(&mut tree, "max_events", toml::Value::Integer(MAX_EVENTS as i64))
                .expect("sets");
            let text = toml::to_string(&tree).expect("serialises");
            Loaded::from_text("gen.toml", &text, Path::new("."))
        } else {
            let mut l = Loaded::from_text("gen.toml", BASE, Path::new(".")).expect("base valid");
            let mut res = Ok(());
            for (k, v) in &sets {
                res = l.apply_set(&format!("{k}={v}"));
                if res.is_err() {
                    break;
                }
            }
            res.and_then(|()| l.apply_set(&format!("max_events={MAX_EVENTS}")))
                .map(|()| l)
        };
        let loaded = match loaded {
            Ok(l) => l,
            Err(e) => {
                // Refused: one message that names a key (or, for a TOML
                // syntax error, a place).
                let msg = e.to_string();
                prop_assert!(e.key.is_some() || e.pos.is_some(), "no key: {}", msg);
                prop_assert!(!msg.contains('\n'), "one line: {}", msg);
                for rust in ["u32", "u64", "f64", "i64"] {
                    prop_assert!(!msg.contains(rust), "Rust type name: {}", msg);
                }
                return Ok(());
            }
        };
        match loaded.points() {
            Ok(points) => prop_assert_eq!(points.len(), 1),
            Err(e) => prop_assert!(false, "base accepted, point refused: {}", e),
        }
        run_checked(&loaded, seed, pick)?;
    }
}
