//! Invariants over random scenarios (proptest over scenario parameters):
//! whatever the policy, network and faults,
//! - no agent answers the same message twice;
//! - every started inference ends exactly once (done, aborted, or ended by
//!   a crash), except hung ones, which never end;
//! - the metric identities hold (shares in 0..1, duplicate + single +
//!   unanswered = 1, wasted time <= total inference time, replies >= the
//!   replies that the shares imply).

use herdsim::floor::PolicyKind;
use herdsim::model::{Prepared, TraceBuf, simulate, simulate_ttl};
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

/// A result's values as bits (a NaN percentile equals itself).
fn bits(r: &herdsim::metrics::RunResult) -> Vec<u64> {
    r.values.iter().map(|v| v.to_bits()).collect()
}

/// The world of `text` with the claim TTL set to `ttl_ms`.
fn with_ttl(text: &str, ttl_ms: u64) -> Prepared {
    let loaded = Loaded::from_text("prop.toml", text, Path::new(".")).expect("valid");
    let mut s = loaded.base().expect("resolves");
    s.server.ttl_ms = ttl_ms as f64;
    Prepared::new(&s, Path::new(".")).expect("prepares")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// What `herdsim tune` relies on to take one candidate's replication
    /// from another's: a replication that `simulate_ttl` says is the same
    /// from TTL `least` on is the same, metric for metric (events
    /// included), at `least` itself and at any longer TTL.
    #[test]
    fn a_run_the_ttl_did_not_touch_is_the_same_under_any_ttl_from_its_least(
        p in params(),
        seed in any::<u64>(),
        longer in 1u64..200_000,
    ) {
        let text = scenario(&p);
        let policy = PolicyKind::ALL[p.policy];
        let (r, same_from) = simulate_ttl(&with_ttl(&text, u64::from(p.ttl_ms)), policy, seed)
            .expect("within the run limits");
        if let Some(least) = same_from {
            for ttl in [least.max(1), least + longer] {
                let (again, _) = simulate_ttl(&with_ttl(&text, ttl), policy, seed)
                    .expect("within the run limits");
                prop_assert_eq!(bits(&again), bits(&r), "TTL {} against {} (least {})", ttl, p.ttl_ms, least);
            }
        }
    }
}

/// The audit is not vacuous: in the default scenario's setting a long TTL
/// leaves replications the TTL did not touch (the same under a shorter
/// TTL down to the longest claim), and a 5 s TTL, shorter than many
/// inferences, touches them all.
#[test]
fn long_ttls_leave_runs_the_ttl_did_not_touch_and_short_ones_do_not() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/default.toml"),
    )
    .expect("default scenario");
    let (mut untouched, mut touched) = (0, 0);
    for seed in 0..5u64 {
        let long = with_ttl(&text, 120_000);
        let (r, same_from) = simulate_ttl(&long, PolicyKind::Spec, seed).expect("runs");
        let least = same_from.expect("no claim lives 120 s in the default scenario");
        assert!((10_000..120_000).contains(&least), "least TTL {least}");
        let (shorter, _) =
            simulate_ttl(&with_ttl(&text, least), PolicyKind::Spec, seed).expect("runs");
        assert_eq!(bits(&shorter), bits(&r));
        untouched += 1;
        let (_, short) =
            simulate_ttl(&with_ttl(&text, 5_000), PolicyKind::Spec, seed).expect("runs");
        if short.is_none() {
            touched += 1;
        }
    }
    assert_eq!((untouched, touched), (5, 5));
}

/// The carriers and platforms (docs/carriers.md) keep the invariants too:
/// every kind on every platform that has it, any policy; and where
/// nobody arbitrates (`reaction`, `typing`, `none`, or a replica whose
/// claims the platform hides) no YIELD is ever sent, and under `none`
/// nobody claims.
const KINDS: [&str; 5] = ["server", "replica", "reaction", "typing", "none"];
const PLATFORMS: [&str; 5] = ["agentchat", "matrix", "slack", "discord", "telegram"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn invariants_hold_on_every_carrier(
        p in params(),
        kind in 0usize..5,
        platform in 0usize..5,
        lifted in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let (kind, platform) = (KINDS[kind], PLATFORMS[platform]);
        // agentchat carries claims through its server only.
        let kind = if platform == "agentchat" && !matches!(kind, "server" | "none") { "server" } else { kind };
        let limit = if lifted { "message_rate_per_s = 0" } else { "" };
        let text = format!(
            "{}\n[carrier]\nkind = \"{kind}\"\nplatform = \"{platform}\"\n{limit}\n",
            scenario(&p)
        );
        let loaded = Loaded::from_text("prop.toml", &text, Path::new(".")).expect("valid");
        let world = Prepared::new(&loaded.base().expect("resolves"), Path::new(".")).expect("prepares");
        let policy = PolicyKind::ALL[p.policy];
        let mut buf = TraceBuf::new();
        let r = simulate(&world, policy, seed, Some(&mut buf)).expect("within the run limits");
        // What the agents run (docs/carriers.md): claims without a floor
        // under `reaction` and `typing`, none under `none`.
        let claims_as = match kind {
            "none" => PolicyKind::None,
            "reaction" | "typing" => PolicyKind::Spec,
            _ => policy,
        };
        if let Err(e) = common::check_invariants(&r, &buf, claims_as, p.loss_p > 0.0) {
            prop_assert!(false, "{} on {}: {}", kind, platform, e);
        }
        let hides = platform == "telegram" && kind == "replica";
        if matches!(kind, "reaction" | "typing" | "none") || hides {
            prop_assert_eq!(common::get(&r, "yields"), 0.0, "{} on {}", kind, platform);
        }
    }
}
