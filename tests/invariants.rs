//! Invariants over random scenarios (proptest over scenario parameters):
//! whatever the policy, network and faults,
//! - no agent answers the same message twice;
//! - every started inference ends exactly once (done, aborted, or ended by
//!   a crash), except hung ones, which never end;
//! - the metric identities hold (shares in 0..1, duplicate + single +
//!   unanswered = 1, wasted time <= total inference time, replies >= the
//!   replies that the shares imply).

use herdsim::floor::PolicyKind;
use herdsim::model::{Prepared, TraceBuf, simulate};
use herdsim::scenario::Loaded;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[derive(Debug, Clone)]
struct Params {
    agents: u32,
    respond_p: f64,
    min_ms: u32,
    width_ms: u32,
    tick_ms: u32,
    base_ms: u32,
    jitter_ms: u32,
    fifo: bool,
    loss_p: f64,
    ignore_p: f64,
    crash_p: f64,
    hang_p: f64,
    recheck: bool,
    ttl_ms: u32,
    mention_p: f64,
    dm_p: f64,
    reply_p: f64,
    policy: usize,
}

fn params() -> impl Strategy<Value = Params> {
    (
        (
            1u32..7,
            0.0..=1.0f64,
            0u32..3000,
            0u32..6000,
            prop::sample::select(vec![0u32, 250, 1000]),
        ),
        (
            0u32..300,
            0u32..200,
            any::<bool>(),
            prop::sample::select(vec![0.0f64, 0.02, 0.2]),
        ),
        (
            prop::sample::select(vec![0.0f64, 0.3, 1.0]),
            prop::sample::select(vec![0.0f64, 0.1, 0.5]),
            prop::sample::select(vec![0.0f64, 0.1, 0.5]),
        ),
        (
            any::<bool>(),
            500u32..60000,
            0.0..0.3f64,
            0.0..0.2f64,
            0.0..0.5f64,
            0usize..5,
        ),
    )
        .prop_map(|(a, b, c, d)| Params {
            agents: a.0,
            respond_p: a.1,
            min_ms: a.2,
            width_ms: a.3,
            tick_ms: a.4,
            base_ms: b.0,
            jitter_ms: b.1,
            fifo: b.2,
            loss_p: b.3,
            ignore_p: c.0,
            crash_p: c.1,
            hang_p: c.2.min(1.0 - c.1),
            recheck: d.0,
            ttl_ms: d.1,
            mention_p: d.2,
            dm_p: d.3,
            reply_p: d.4,
            policy: d.5,
        })
}

fn scenario(p: &Params) -> String {
    format!(
        r#"
reps = 1
[server]
ttl_ms = {ttl}
disconnect_detect = {{ kind = "fixed", ms = 2000 }}
restart = {{ kind = "fixed", ms = 1000 }}
[network]
base_ms = {base}
jitter = {{ kind = "exponential", mean_ms = {jit} }}
fifo = {fifo}
loss_p = {loss}
[[agents]]
count = {n}
respond_p = {rp}
csma = {{ kind = "uniform", min_ms = {min}, max_ms = {max} }}
csma_tick_ms = {tick}
inference = {{ kind = "lognormal", p50_ms = 3000, p99_ms = 20000 }}
ignore_yield_p = {ig}
crash_p = {cp}
hang_p = {hp}
recheck_on_expiry = {rc}
[workload]
count = 40
mean_gap_ms = 20000
mention_p = {mp}
dm_p = {dp}
reply_to_agent_p = {rtp}
max_depth = 2
"#,
        ttl = p.ttl_ms,
        base = p.base_ms,
        jit = p.jitter_ms,
        fifo = p.fifo,
        loss = p.loss_p,
        n = p.agents,
        rp = p.respond_p,
        min = p.min_ms,
        max = p.min_ms + p.width_ms,
        tick = p.tick_ms,
        ig = p.ignore_p,
        cp = p.crash_p,
        hp = p.hang_p,
        rc = p.recheck,
        mp = p.mention_p,
        dp = p.dm_p,
        rtp = p.reply_p,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn invariants_hold(p in params(), seed in any::<u64>()) {
        let text = scenario(&p);
        let loaded = Loaded::from_text("prop.toml", &text, Path::new(".")).expect("valid");
        let world = Prepared::new(&loaded.base().expect("resolves"), Path::new(".")).expect("prepares");
        let policy = PolicyKind::ALL[p.policy];
        let mut buf = TraceBuf::new();
        let r = simulate(&world, policy, seed, Some(&mut buf)).expect("within the run limits");

        let mut answered: BTreeSet<(String, String)> = BTreeSet::new();
        // (agent, msg) -> hung?
        let mut open: BTreeMap<(String, String), bool> = BTreeMap::new();
        let mut started = 0u64;
        for line in buf.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(line).expect("json");
            let agent = v["agent"].as_str().unwrap_or("").to_string();
            let msg = v["msg_id"].as_str().unwrap_or("").to_string();
            match v["ev"].as_str().unwrap_or("") {
                "server_recv" if v["msg"]["type"] == "MSG" => {
                    if let Some(parent) = v["msg"]["in_reply_to"].as_str() {
                        let fresh = answered.insert((agent, parent.to_string()));
                        prop_assert!(fresh, "an agent answered {} twice", parent);
                    }
                }
                "infer" => {
                    started += 1;
                    let hung = v["hung"].as_bool().unwrap_or(false);
                    let was = open.insert((agent, msg), hung);
                    prop_assert!(was.is_none(), "inference started twice at once");
                }
                "done" | "abort" => {
                    let was = open.remove(&(agent, msg));
                    prop_assert_eq!(was, Some(false), "an inference ended that was not running (or was hung)");
                }
                "crash" => open.retain(|(a, _), _| *a != agent),
                _ => {}
            }
        }
        prop_assert!(open.values().all(|hung| *hung), "a non-hung inference never ended");

        let g = |m: &str| r.get(m).expect("metric");
        for m in ["duplicate_rate", "unanswered_rate", "wasted_inference_rate",
                  "wasted_inference_count_rate", "single_starter_rate"] {
            prop_assert!((0.0..=1.0).contains(&g(m)), "{} = {}", m, g(m));
        }
        let single = 1.0 - g("duplicate_rate") - g("unanswered_rate");
        prop_assert!(single >= -1e-12, "duplicate + unanswered exceed 1");
        let msgs = g("messages");
        // Replies >= 1 per singly answered message + 2 per duplicated one.
        prop_assert!(g("responses_per_msg") * msgs + 1e-9 >= single * msgs + 2.0 * g("duplicate_rate") * msgs);
        prop_assert!(g("inferences") >= 0.0 && g("inferences") <= started as f64);
        prop_assert!(g("lost") == 0.0 || p.loss_p > 0.0);
        if policy == PolicyKind::None {
            prop_assert_eq!(g("claims"), 0.0);
            prop_assert_eq!(g("yields"), 0.0);
        }
    }
}
