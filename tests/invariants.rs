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

mod common;
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

        if let Err(e) = common::check_invariants(&r, &buf, policy, p.loss_p > 0.0) {
            prop_assert!(false, "{}", e);
        }
    }
}
