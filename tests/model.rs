//! The world model, each feature in isolation, through the library API.

mod common;

use common::{get, traced};
use herdsim::floor::PolicyKind;
use herdsim::metrics::RunResult;

fn run(toml: &str, policy: &str, seed: u64) -> RunResult {
    common::run(toml, policy.parse::<PolicyKind>().expect("policy"), seed)
}

/// Zero jitter and skew, no tick, respond_p = 1, one-way delay d, uniform
/// CSMA of width W, inference far longer than the window, `spec`:
/// P(exactly one agent starts) = (1 - 2d/W)^N and
/// E[starters] = 1 + N r - r^N with r = 2d/W (docs/model.md, modelling choice 15).
#[test]
fn single_starter_share_matches_closed_form() {
    let n = 5.0_f64;
    let (d, w) = (300.0_f64, 6000.0_f64);
    let msgs = 20_000.0_f64;
    let toml = format!(
        r#"
reps = 1
[network]
base_ms = {d}
jitter = {{ kind = "fixed", ms = 0 }}
[[agents]]
count = {n}
respond_p = 1.0
csma = {{ kind = "uniform", min_ms = 2000, max_ms = {max} }}
inference = {{ kind = "fixed", ms = 30000 }}
clock_skew = {{ kind = "fixed", ms = 0 }}
[workload]
arrivals = "fixed"
mean_gap_ms = 60000
count = {msgs}
"#,
        max = 2000.0 + w
    );
    let r = run(&toml, "spec", 11);
    let rr = 2.0 * d / w;
    let p = (1.0 - rr).powf(n);
    let got = get(&r, "single_starter_rate");
    // Binomial share over 20000 independent messages: SE = sqrt(p(1-p)/n).
    // 4.5 SE: two-sided false-failure probability about 7e-6.
    let se = (p * (1.0 - p) / msgs).sqrt();
    eprintln!(
        "single starter: share {got:.4}, closed form {p:.4}, tolerance {:.4}",
        4.5 * se
    );
    assert!(
        (got - p).abs() < 4.5 * se,
        "single-starter share {got}, closed form {p}, tolerance {}",
        4.5 * se
    );
    // E[starters]: starters - 1 lies in 0..N-1 with mean N r, so its
    // variance is at most (N-1) N r; 5 SE bounds the false failure at 6e-7.
    let e = 1.0 + n * rr - rr.powf(n);
    let sd = ((n - 1.0) * n * rr).sqrt();
    let got = get(&r, "starters_per_msg");
    eprintln!(
        "single starter: starters {got:.4}, closed form {e:.4}, tolerance {:.4}",
        5.0 * sd / msgs.sqrt()
    );
    assert!(
        (got - e).abs() < 5.0 * sd / msgs.sqrt(),
        "starters per message {got}, closed form {e}"
    );
    assert_eq!(get(&r, "messages"), msgs);
}

const BASE: &str = r#"
reps = 1
[network]
base_ms = 40
jitter = { kind = "exponential", mean_ms = 10 }
[[agents]]
count = 5
respond_p = 1.0
csma = { kind = "uniform", min_ms = 2000, max_ms = 2200 }
inference = { kind = "fixed", ms = 10000 }
[workload]
arrivals = "fixed"
mean_gap_ms = 60000
count = 300
"#;

#[test]
fn ignoring_yield_produces_duplicates() {
    let polite = run(BASE, "spec", 3);
    assert_eq!(get(&polite, "duplicate_rate"), 0.0);
    assert!(
        get(&polite, "yields") > 0.0,
        "the narrow window must collide"
    );
    let rude = run(
        &BASE.replace("respond_p = 1.0", "respond_p = 1.0\nignore_yield_p = 1.0"),
        "spec",
        3,
    );
    assert!(
        get(&rude, "duplicate_rate") > 0.3,
        "duplicate rate {}",
        get(&rude, "duplicate_rate")
    );
}

#[test]
fn none_policy_sends_no_claims_and_duplicates_more() {
    let none = run(BASE, "none", 5);
    let spec = run(BASE, "spec", 5);
    assert_eq!(get(&none, "claims"), 0.0);
    assert_eq!(get(&none, "yields"), 0.0);
    // Everyone fires within 200 ms of each other, long before any reply:
    // with no claims every agent answers.
    assert_eq!(get(&none, "responses_per_msg"), 5.0);
    assert!(get(&spec, "duplicate_rate") < get(&none, "duplicate_rate"));
    assert!(get(&spec, "wasted_inference_rate") < get(&none, "wasted_inference_rate"));
}

/// agent-000 claims first and hangs; agent-001 skips, rechecks once the
/// claim is believed expired, and answers: the first answer comes only
/// after the TTL.
#[test]
fn hung_holder_blocks_until_ttl() {
    let toml = r#"
reps = 1
[server]
ttl_ms = 20000
[network]
base_ms = 40
jitter = { kind = "fixed", ms = 0 }
[[agents]]
count = 1
respond_p = 1.0
csma = { kind = "fixed", ms = 1000 }
clock_skew = { kind = "fixed", ms = 0 }
hang_p = 1.0
[[agents]]
count = 1
respond_p = 1.0
csma = { kind = "fixed", ms = 3000 }
inference = { kind = "fixed", ms = 5000 }
clock_skew = { kind = "fixed", ms = 0 }
recheck_on_expiry = true
[workload]
arrivals = "fixed"
mean_gap_ms = 100000
count = 20
"#;
    let r = run(toml, "spec", 1);
    // post -> +40 delivered -> +3000 skip (claim seen at +1120) -> wake at
    // 1120 + 20000 -> +3000 CSMA -> +5000 inference -> +40 to the server.
    let expect = 1120.0 + 20000.0 + 3000.0 + 5000.0 + 40.0;
    let p50 = get(&r, "ttfr_p50_ms");
    assert!(
        (p50 - expect).abs() <= expect * 0.001 + 1.0,
        "ttfr p50 {p50}, expected {expect}"
    );
    assert_eq!(get(&r, "unanswered_rate"), 0.0);
    assert_eq!(get(&r, "expired_claims"), 20.0);
    // Without the recheck nobody answers.
    let r = run(&toml.replace("recheck_on_expiry = true", ""), "spec", 1);
    assert_eq!(get(&r, "unanswered_rate"), 1.0);
}

/// agent-000 claims first and crashes at once; agent-001 skipped for its
/// claim and has no recheck. The server sees the disconnect 5 s later and
/// announces the claim released (FLOOR_RELEASED): agent-001 takes the
/// question up again at once. Under `agentchat-0.36` nobody is told, and
/// nobody answers.
#[test]
fn a_crashed_claimants_question_is_answered_after_the_release() {
    let toml = r#"
reps = 1
[server]
disconnect_detect = { kind = "fixed", ms = 5000 }
restart = { kind = "fixed", ms = 1000000 }
[network]
base_ms = 40
jitter = { kind = "fixed", ms = 0 }
[[agents]]
count = 1
respond_p = 1.0
csma = { kind = "fixed", ms = 1000 }
inference = { kind = "fixed", ms = 2 }
clock_skew = { kind = "fixed", ms = 0 }
crash_p = 1.0
[[agents]]
count = 1
respond_p = 1.0
csma = { kind = "fixed", ms = 3000 }
inference = { kind = "fixed", ms = 5000 }
clock_skew = { kind = "fixed", ms = 0 }
[workload]
arrivals = "fixed"
mean_gap_ms = 100000
count = 1
"#;
    let r = run(toml, "spec", 1);
    assert_eq!(get(&r, "unanswered_rate"), 0.0);
    assert_eq!(get(&r, "duplicate_rate"), 0.0);
    // post -> +40 delivered -> +1000 claim, crash within 2 ms -> +5000 the
    // disconnect seen, released -> +40 delivered -> +3000 CSMA -> +5000
    // inference -> +40 to the server; well inside the 45 s TTL.
    let p50 = get(&r, "ttfr_p50_ms");
    let expect = 40.0 + 1000.0 + 5000.0 + 40.0 + 3000.0 + 5000.0 + 40.0;
    // (The crash falls within the 2 ms inference; the claim's started_at
    // and the TTL run on the ms clock.)
    assert!(
        (expect..=expect + 5.0).contains(&p50),
        "ttfr p50 {p50}, expected {expect} to 5 ms more"
    );
    let r = run(toml, "agentchat-0.36", 1);
    assert_eq!(get(&r, "unanswered_rate"), 1.0);
}

#[test]
fn crashing_agents_answer_nothing_and_waste_everything() {
    let toml = BASE.replace("respond_p = 1.0", "respond_p = 1.0\ncrash_p = 1.0");
    let r = run(&toml, "spec", 2);
    assert_eq!(get(&r, "unanswered_rate"), 1.0);
    assert_eq!(get(&r, "wasted_inference_rate"), 1.0);
    assert_eq!(get(&r, "wasted_inference_count_rate"), 1.0);
}

/// Per agent, the order in which server messages arrive equals the order
/// in which the server sent them, unless `fifo = false`.
#[test]
fn fifo_links_never_reorder() {
    let toml = BASE.replace("mean_ms = 10", "mean_ms = 400");
    let reordered = |lines: &[serde_json::Value]| -> usize {
        let mut sent: Vec<(String, String)> = Vec::new();
        let mut got: Vec<(String, String)> = Vec::new();
        for l in lines {
            match l["ev"].as_str() {
                Some("server_send") => sent.push((l["to"].to_string(), l["msg"].to_string())),
                Some("recv") => got.push((l["agent"].to_string(), l["msg"].to_string())),
                _ => {}
            }
        }
        let mut bad = 0;
        for agent in 0..5 {
            let name = format!("\"agent-{agent:03}\"");
            let s: Vec<_> = sent
                .iter()
                .filter(|(a, _)| *a == name)
                .map(|(_, m)| m)
                .collect();
            let g: Vec<_> = got
                .iter()
                .filter(|(a, _)| *a == name)
                .map(|(_, m)| m)
                .collect();
            assert_eq!(s.len(), g.len(), "every send to {name} arrives");
            bad += s.iter().zip(&g).filter(|(a, b)| a != b).count();
        }
        bad
    };
    let (_, lines) = traced(&toml, PolicyKind::Spec, 9);
    assert_eq!(reordered(&lines), 0);
    let (_, lines) = traced(
        &toml.replace("[network]", "[network]\nfifo = false"),
        PolicyKind::Spec,
        9,
    );
    assert!(
        reordered(&lines) > 0,
        "non-FIFO links with big jitter must reorder"
    );
}

#[test]
fn same_seed_same_bytes_other_seed_other_numbers() {
    let (a, ta) = traced(BASE, PolicyKind::Spec, 42);
    let (b, tb) = traced(BASE, PolicyKind::Spec, 42);
    assert_eq!(a, b);
    assert_eq!(ta, tb);
    let c = run(BASE, "spec", 43);
    assert_ne!(a, c);
}

#[test]
fn lost_messages_are_counted() {
    let toml = BASE.replace("[network]", "[network]\nloss_p = 0.1");
    let r = run(&toml, "spec", 4);
    assert!(get(&r, "lost") > 0.0);
    let clean = run(BASE, "spec", 4);
    assert_eq!(get(&clean, "lost"), 0.0);
}

/// Who sent a reply MSG, per the trace.
fn repliers(lines: &[serde_json::Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["ev"] == "send" && l["msg"]["type"] == "MSG")
        .map(|l| l["agent"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn scripted_incident_replays_exactly_under_each_policy() {
    let toml = std::fs::read_to_string("scenarios/incident-replay.toml").expect("scenario");
    // spec trusts the skewed started_at: agent-002 wins, agent-001 yields.
    let (r, lines) = traced(&toml, PolicyKind::Spec, 1);
    assert_eq!(repliers(&lines), vec!["agent-002"]);
    assert_eq!(get(&r, "yields"), 1.0);
    assert_eq!(get(&r, "overruled"), 1.0);
    let yielded: Vec<_> = lines
        .iter()
        .filter(|l| l["ev"] == "recv" && l["msg"]["type"] == "YIELD")
        .map(|l| l["agent"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(yielded, vec!["agent-001"]);
    // server-time: the first claim to reach the server wins.
    let (_, lines) = traced(&toml, PolicyKind::ServerTime, 1);
    assert_eq!(repliers(&lines), vec!["agent-001"]);
    // none: both answer.
    let (r, lines) = traced(&toml, PolicyKind::None, 1);
    assert_eq!(repliers(&lines), vec!["agent-002", "agent-001"]);
    assert_eq!(get(&r, "duplicate_rate"), 1.0);
    // The trace carries the script's id and started_at.
    let (_, lines) = traced(&toml, PolicyKind::Spec, 1);
    assert!(lines.iter().any(|l| l["ev"] == "send"
        && l["msg"]["type"] == "RESPONDING_TO"
        && l["msg"]["msg_id"] == "q1"
        && l["msg"]["started_at"] == 1_700_000_003_900_i64));
}

#[test]
fn scripted_disconnect_clears_the_holders_claim() {
    let toml = r#"
reps = 1
[network]
base_ms = 40
jitter = { kind = "fixed", ms = 0 }
[[agents]]
count = 2
respond_p = 0.0
clock_skew = { kind = "fixed", ms = 0 }
[workload]
count = 0
[[script]]
at_ms = 0
post = { id = "q", content = "hello" }
[[script]]
at_ms = 1000
infer = { agent = "agent-000", msg = "q", duration_ms = 60000 }
[[script]]
at_ms = 2000
disconnect = "agent-000"
[[script]]
at_ms = 3000
infer = { agent = "agent-001", msg = "q", duration_ms = 1000 }
"#;
    let (r, lines) = traced(toml, PolicyKind::Spec, 1);
    // agent-000's claim was cleared at its disconnect, so agent-001's later
    // claim is granted without a YIELD and its answer is the only one.
    assert_eq!(repliers(&lines), vec!["agent-001"]);
    assert_eq!(get(&r, "yields"), 0.0);
    assert_eq!(get(&r, "unanswered_rate"), 0.0);
    assert_eq!(get(&r, "wasted_inference_count_rate"), 0.5);
}

/// agentchat-0.36's MSG rate limit in a busy channel (issue 16): an agent
/// that finishes two answers within the limit has the second refused
/// (ERROR RATE_LIMITED), which answers nothing and keeps its claim, so
/// messages go unanswered and inference is wasted. With the limit off the
/// policy answers like spec; spec ignores the limit.
#[test]
fn agentchat_rate_limit_refuses_fast_replies_and_keeps_claims() {
    let toml = r#"
reps = 1
[server]
ttl_ms = 15000
[[agents]]
count = 5
respond_p = 0.5
csma = { kind = "uniform", min_ms = 200, max_ms = 1500 }
inference = { kind = "lognormal", p50_ms = 2000, p99_ms = 8000 }
[workload]
mean_gap_ms = 1500
count = 300
"#;
    let off = toml.replace("ttl_ms = 15000", "ttl_ms = 15000\nrate_limit_ms = 0");
    let (limited, lines) = traced(toml, PolicyKind::Agentchat036, 3);
    let refused = lines
        .iter()
        .filter(|l| {
            l["ev"] == "server_send"
                && l["msg"]["type"] == "ERROR"
                && l["msg"]["code"] == "RATE_LIMITED"
        })
        .count();
    assert!(refused > 5, "{refused} refused replies");
    let (free, lines) = traced(&off, PolicyKind::Agentchat036, 3);
    assert!(!lines.iter().any(|l| l["msg"]["code"] == "RATE_LIMITED"));
    assert_eq!(get(&free, "unanswered_rate"), 0.0);
    assert!(get(&limited, "unanswered_rate") > 0.01);
    assert!(get(&limited, "wasted_inference_rate") > get(&free, "wasted_inference_rate"));
    assert!(get(&limited, "responses_per_msg") < get(&free, "responses_per_msg"));
    // spec has no rate limit: the key changes nothing.
    let a = run(toml, "spec", 3);
    let b = run(&off, "spec", 3);
    assert_eq!(a.values, b.values);
}

/// `server.rate_limit_operator`: the real agentchat server rate-limits
/// every connection, the operator's too. With posts every 600 ms and the
/// 1000 ms limit, every second post is refused (the refused one does not
/// count for the limit): half the questions never reach an agent. Off (the
/// default), and under `spec`, every post goes through.
#[test]
fn the_operator_can_be_rate_limited_like_any_connection() {
    let toml = r#"
reps = 1
[[agents]]
count = 3
respond_p = 1.0
[workload]
arrivals = "fixed"
mean_gap_ms = 600
count = 40
"#;
    let limited = toml.replace("reps = 1", "reps = 1\n[server]\nrate_limit_operator = true");
    let posts = |toml: &str, policy: PolicyKind| {
        let p = common::prepare(toml);
        herdsim::model::simulate_posts(&p, policy, 5, None).expect("runs")
    };
    let (free, n) = posts(toml, PolicyKind::Agentchat036);
    assert_eq!((n.posted, n.refused), (40, 0));
    assert_eq!(get(&free, "messages"), 40.0);
    let (lim, n) = posts(&limited, PolicyKind::Agentchat036);
    assert_eq!((n.posted, n.refused), (40, 20));
    assert_eq!(get(&lim, "messages"), 20.0);
    let (spec, n) = posts(&limited, PolicyKind::Spec);
    assert_eq!((n.posted, n.refused), (40, 0));
    assert_eq!(get(&spec, "messages"), 40.0);
}

/// DMs are disabled under agentchat-0.36 (issue 16): a workload's DMs get
/// an ERROR back to the operator and no agent answers them; under spec
/// every DM is answered by its agent.
#[test]
fn agentchat_dms_get_errors_not_answers() {
    let toml = BASE.replace("count = 300", "count = 20\ndm_p = 1.0");
    // (DMs stay out of every metric: count inferences in the trace.)
    let infers = |lines: &[serde_json::Value]| lines.iter().filter(|l| l["ev"] == "infer").count();
    let (_, lines) = traced(&toml, PolicyKind::Agentchat036, 1);
    assert_eq!(infers(&lines), 0);
    let errors = lines
        .iter()
        .filter(|l| {
            l["ev"] == "server_send"
                && l["to"] == "operator"
                && l["msg"]["message"] == "Direct messages are disabled"
        })
        .count();
    assert_eq!(errors, 20);
    let (_, lines) = traced(&toml, PolicyKind::Spec, 1);
    assert_eq!(infers(&lines), 20);
}

/// The agentchat-0.36 expiry sweep runs at a phase: fixed by
/// `server.sweep_phase_ms`, or by default drawn per replication from the
/// run's seed (deterministic, in [0, 5000), different across seeds). The
/// phase changes when claims expire, so it changes results.
#[test]
fn agentchat_sweep_phase_is_a_parameter_drawn_per_run_by_default() {
    let phase = |toml: &str, seed: u64| {
        let (_, lines) = traced(toml, PolicyKind::Agentchat036, seed);
        let l = lines.iter().find(|l| l["ev"] == "sweep_phase").cloned();
        l.map(|l| (l["phase_ms"].as_u64(), l["drift_us"].as_u64()))
    };
    let fixed = BASE.replace(
        "reps = 1",
        "reps = 1\n[server]\nsweep_phase_ms = 1234.5\nsweep_drift_ms = 0.7",
    );
    assert_eq!(phase(&fixed, 1), Some((Some(1234), Some(700))));
    let drawn: Vec<_> = (1..=20).map(|s| phase(BASE, s)).collect();
    assert_eq!(drawn, (1..=20).map(|s| phase(BASE, s)).collect::<Vec<_>>());
    let distinct: std::collections::BTreeSet<u64> =
        drawn.iter().filter_map(|p| p.and_then(|p| p.0)).collect();
    assert!(distinct.len() > 10, "{distinct:?}");
    assert!(distinct.iter().all(|&p| p < 5000));
    // spec has no sweep.
    let (_, lines) = traced(BASE, PolicyKind::Spec, 1);
    assert!(!lines.iter().any(|l| l["ev"] == "sweep_phase"));
    // Hung holders, short TTL, rechecks: expiry timing decides the answers.
    let toml = r#"
reps = 1
[server]
ttl_ms = 3000
sweep_phase_ms = PHASE
[[agents]]
count = 5
respond_p = 0.6
hang_p = 0.3
recheck_on_expiry = true
[workload]
count = 200
"#;
    let at = |p: &str| run(&toml.replace("PHASE", p), "agentchat-0.36", 2);
    assert_ne!(at("0").values, at("2500").values);
}

/// A channel of 100 agents and one post: the relay is one cursor of 100
/// arrivals (crates/model/src/model/world/relays.rs).
const LARGE_RELAY: &str = r#"
reps = 1
[network]
base_ms = 40
jitter = { kind = "exponential", mean_ms = 10 }
[[agents]]
count = 100
respond_p = 0.0
[workload]
arrivals = "fixed"
mean_gap_ms = 1000
count = 3
"#;

#[test]
fn a_large_relay_reaches_every_agent_once_at_the_time_it_was_sent_for() {
    let (_, lines) = traced(LARGE_RELAY, "spec".parse().expect("policy"), 4);
    assert_eq!(lines.iter().filter(|l| l["ev"] == "post").count(), 3);
    let sent: Vec<&serde_json::Value> = lines.iter().filter(|l| l["ev"] == "server_send").collect();
    let recv: Vec<&serde_json::Value> = lines.iter().filter(|l| l["ev"] == "recv").collect();
    assert_eq!(sent.len(), 300, "each post relayed to the 100 agents");
    assert_eq!(recv.len(), 300, "and each relay received once by each");
    for post in ["m0", "m1", "m2"] {
        let mut who: Vec<&str> = recv
            .iter()
            .filter(|l| l["msg"]["id"] == post)
            .map(|l| l["agent"].as_str().expect("agent"))
            .collect();
        who.sort_unstable();
        who.dedup();
        assert_eq!(who.len(), 100, "{post}: every agent once");
    }
    // The trace is in event order: arrivals in time order, each at least
    // the 40 ms base delay after its relay.
    let t = |l: &serde_json::Value| l["t_us"].as_u64().expect("t_us");
    assert!(recv.windows(2).all(|w| t(w[0]) <= t(w[1])));
    let sent_at = t(sent[0]);
    assert!(recv.iter().take(100).all(|l| t(l) >= sent_at + 40_000));
    // With 100 draws of the jitter, arrivals differ: the cursor really
    // spreads them over time.
    assert!(t(recv[99]) > t(recv[0]));
}

#[test]
fn each_arrival_of_a_large_relay_is_one_event_as_a_small_relays_deliveries_are() {
    // Nobody answers: each post is one event (the operator sits at the
    // server), and each delivery one more, whether the relay is
    // scheduled delivery by delivery (63 agents) or kept as a cursor (64
    // and more, merged with the event queue).
    for n in [1u64, 63, 64, 65, 100] {
        let toml = LARGE_RELAY.replace("count = 100", &format!("count = {n}"));
        let r = run(&toml, "spec", 4);
        assert_eq!(r.get("events"), Some((3 * (n + 1)) as f64), "{n} agents");
    }
}

#[test]
fn a_run_may_process_exactly_max_events_events_and_not_one_more() {
    // 100 agents, 3 posts: 303 events, 300 of them a cursor's arrivals.
    let policy = "spec".parse().expect("policy");
    let at = |max: u64| {
        let p = common::prepare(&format!("max_events = {max}\n{LARGE_RELAY}"));
        herdsim::model::simulate(&p, policy, 4, None).map(|r| r.get("events"))
    };
    assert_eq!(at(303), Ok(Some(303.0)));
    assert_eq!(at(302), Err(herdsim::model::RunLimit::Events(302)));
}

#[test]
fn an_event_past_both_limits_at_once_stops_the_run_at_the_horizon() {
    // The 7998th event of the endless cascade is the first past the
    // horizon. With `max_events = 7997` that event is past both limits at
    // once, and must stop the run like either alone (the event loop tests
    // them in one branch; an exclusive or there would let it run on). If
    // the events of a hop ever change, find the new boundary with
    // `herdsim run --set max_events=N` on this scenario.
    let policy = "none".parse().expect("policy");
    let at = |max: u64| {
        let scenario = common::ENDLESS_CASCADE;
        let p = common::prepare(&format!("max_events = {max}\n{scenario}"));
        herdsim::model::simulate(&p, policy, 1, None).err()
    };
    use herdsim::model::RunLimit;
    assert_eq!(at(7996), Some(RunLimit::Events(7996)), "one event short");
    assert_eq!(at(7997), Some(RunLimit::Horizon), "both limits at once");
    assert_eq!(at(100_000), Some(RunLimit::Horizon), "the horizon alone");
}

#[test]
fn the_arrivals_waiting_in_a_large_relay_count_against_the_pending_limit() {
    let mut p = common::prepare(LARGE_RELAY);
    p.set_max_pending(50);
    let policy = "spec".parse().expect("policy");
    assert_eq!(
        herdsim::model::simulate(&p, policy, 4, None).err(),
        Some(herdsim::model::RunLimit::Pending(50)),
        "100 arrivals are 100 pending events, not one"
    );
    p.set_max_pending(1000);
    assert!(herdsim::model::simulate(&p, policy, 4, None).is_ok());
}
