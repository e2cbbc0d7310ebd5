//! The agent actor driven by plain calls: no engine, no world, no server.

use super::*;
use crate::floor::{ServerMsg, SkipReason};
use rand::SeedableRng;

const ME: &str = "agent-000";
const OTHER: &str = "agent-001";
const CH: &str = "#general";

/// A behaviour that always answers, waits 2 ms of CSMA and infers 100 ms.
fn behaviour() -> Behaviour {
    Behaviour {
        ttl_ms: 50,
        recheck: false,
        max_rechecks: 0,
        respond_p: 1.0,
        reply_p: 1.0,
        max_depth: 3,
        csma: Dist::fixed_us(2_000),
        tick_us: 0,
        inference: Dist::fixed_us(100_000),
        ignore_yield_p: 0.0,
        crash_p: 0.0,
        hang_p: 0.0,
        squat: None,
    }
}

fn agent_with(b: Behaviour, policy: PolicyKind) -> Agent {
    let rng = Stream::seed_from_u64(7);
    Agent::new(ME.to_string(), policy, Arc::new(b), rng, Clock::Offset(0))
}

fn agent(b: Behaviour) -> Agent {
    agent_with(b, PolicyKind::Spec)
}

fn relay(id: &str, from: &str, to: &str, content: &str) -> ServerMsg {
    ServerMsg::Msg {
        id: id.into(),
        from: from.into(),
        to: to.into(),
        content: content.into(),
        in_reply_to: None,
    }
}

fn claim(msg_id: &str, from: &str, started_at: i64) -> ServerMsg {
    ServerMsg::RespondingTo {
        msg_id: msg_id.into(),
        from: from.into(),
        started_at: started_at.into(),
        channel: CH.into(),
    }
}

fn yield_to(msg_id: &str, winner: &str) -> ServerMsg {
    ServerMsg::Yield {
        msg_id: msg_id.into(),
        winner: winner.into(),
        channel: CH.into(),
        detail: None,
    }
}

fn feed(a: &mut Agent, now_us: u64, input: Input<'_>) -> Vec<Output> {
    let mut out = Vec::new();
    a.handle(now_us, input, &mut out);
    out
}

/// A server message that is not a MSG to consider answering.
fn hear(a: &mut Agent, now_us: u64, msg: &ServerMsg) -> Vec<Output> {
    feed(a, now_us, Input::Server { msg, depth: None })
}

fn root(a: &mut Agent, now_us: u64, id: &str) -> Vec<Output> {
    let msg = relay(id, "operator", CH, "question");
    feed(
        a,
        now_us,
        Input::Server {
            msg: &msg,
            depth: Some(0),
        },
    )
}

fn wants(id: &str) -> Output {
    Output::Wants { msg_id: id.into() }
}

fn csma(id: &str, at_us: u64) -> Output {
    Output::SetTimer {
        msg_id: id.into(),
        at_us,
        kind: TimerKind::Csma,
    }
}

fn idle(id: &str) -> Output {
    Output::Idle { msg_id: id.into() }
}

fn claim_sent(id: &str, started_at: i64) -> Output {
    Output::Send(ClientMsg::RespondingTo {
        msg_id: id.into(),
        started_at: started_at.into(),
        channel: CH.into(),
    })
}

fn infer(id: &str, started_at: i64, end: InferenceEnd) -> Output {
    Output::Infer {
        msg_id: id.into(),
        started_at,
        duration_us: 100_000,
        end,
        ignore_yield: false,
    }
}

#[test]
fn csma_then_claim_then_inference_then_reply() {
    let mut a = agent(behaviour());
    assert_eq!(root(&mut a, 1_000, "m0"), [wants("m0"), csma("m0", 3_000)]);
    assert!(a.is_busy("m0"));
    let out = feed(
        &mut a,
        3_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert_eq!(
        out,
        [
            claim_sent("m0", 3),
            infer("m0", 3, InferenceEnd::DoneAt(103_000))
        ]
    );
    assert!(a.is_running("m0"));
    let out = feed(
        &mut a,
        103_000,
        Input::InferenceDone {
            msg_id: &"m0".into(),
            reply_id: Some("m1".into()),
        },
    );
    let reply = ClientMsg::Msg {
        id: Some("m1".into()),
        to: CH.into(),
        content: "answer to m0 from agent-000".into(),
        in_reply_to: Some("m0".into()),
    };
    assert_eq!(
        out,
        [
            Output::Done {
                msg_id: "m0".into()
            },
            Output::Reply {
                msg: reply,
                parent: "m0".into(),
                infer_us: 100_000
            },
            idle("m0"),
        ]
    );
    assert!(!a.is_busy("m0") && !a.is_running("m0"));
}

#[test]
fn csma_timers_fire_on_the_tick() {
    let mut b = behaviour();
    b.csma = Dist::fixed_us(1_500);
    b.tick_us = 1_000;
    let mut a = agent(b);
    // 1_000 + 1_500 = 2_500, rounded up to the next 1 ms tick.
    assert_eq!(root(&mut a, 1_000, "m0"), [wants("m0"), csma("m0", 3_000)]);
}

#[test]
fn the_local_clock_stamps_claims() {
    let rng = Stream::seed_from_u64(7);
    // 5 s ahead of the driver's clock.
    let mut a = Agent::new(
        ME.into(),
        PolicyKind::Spec,
        Arc::new(behaviour()),
        rng,
        Clock::Offset(5_000_000),
    );
    root(&mut a, 0, "m0");
    let out = feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert_eq!(out[0], claim_sent("m0", 5_002));
    assert_eq!(a.local_ms(2_000), 5_002);
}

#[test]
fn respond_p_zero_never_answers_but_a_mention_or_dm_always_does() {
    let mut b = behaviour();
    b.respond_p = 0.0;
    let mut a = agent(b);
    assert_eq!(root(&mut a, 0, "m0"), []);
    assert!(!a.is_busy("m0"));
    // An @mention: answered at once, no CSMA, no claim.
    let msg = relay("m1", "operator", CH, "@agent-000 question");
    let out = feed(
        &mut a,
        0,
        Input::Server {
            msg: &msg,
            depth: Some(0),
        },
    );
    assert_eq!(
        out,
        [wants("m1"), infer("m1", 0, InferenceEnd::DoneAt(100_000))]
    );
    // A DM: the reply goes back to the sender.
    let msg = relay("m2", "operator", "@agent-000", "question");
    let out = feed(
        &mut a,
        0,
        Input::Server {
            msg: &msg,
            depth: Some(0),
        },
    );
    assert_eq!(out[0], wants("m2"));
    let out = feed(
        &mut a,
        100_000,
        Input::InferenceDone {
            msg_id: &"m2".into(),
            reply_id: None,
        },
    );
    match &out[1] {
        Output::Reply {
            msg: ClientMsg::Msg { to, .. },
            ..
        } => assert_eq!(to, "@operator"),
        other => panic!("expected a reply, got {other:?}"),
    }
}

#[test]
fn own_messages_deep_replies_and_unknown_messages_are_not_answered() {
    let mut a = agent(behaviour());
    let own = relay("m0", ME, CH, "mine");
    let depth = Some(0);
    assert_eq!(feed(&mut a, 0, Input::Server { msg: &own, depth }), []);
    let deep = relay("m1", OTHER, CH, "reply");
    let depth = Some(3); // max_depth 3
    assert_eq!(feed(&mut a, 0, Input::Server { msg: &deep, depth }), []);
    let depth = None; // the driver does not know it
    assert_eq!(feed(&mut a, 0, Input::Server { msg: &deep, depth }), []);
    let depth = Some(2); // a reply below max_depth: reply_p (1.0)
    let out = feed(&mut a, 0, Input::Server { msg: &deep, depth });
    assert_eq!(out[0], wants("m1"));
}

#[test]
fn a_seen_claim_makes_it_skip() {
    let mut a = agent(behaviour());
    root(&mut a, 0, "m0");
    let c = claim("m0", OTHER, 0);
    let out = hear(&mut a, 1_000, &c);
    assert_eq!(out, []);
    let out = feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert_eq!(
        out,
        [
            Output::Skip {
                msg_id: "m0".into(),
                reason: SkipReason::SeenClaim
            },
            idle("m0")
        ]
    );
    assert!(!a.is_busy("m0"));
}

#[test]
fn a_seen_response_makes_it_skip() {
    let mut a = agent(behaviour());
    root(&mut a, 0, "m0");
    let reply = ServerMsg::Msg {
        id: "m1".into(),
        from: OTHER.into(),
        to: CH.into(),
        content: "answer".into(),
        in_reply_to: Some("m0".into()),
    };
    // Not considered as a message to answer here (depth None).
    hear(&mut a, 1_000, &reply);
    let out = feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert_eq!(
        out,
        [
            Output::Skip {
                msg_id: "m0".into(),
                reason: SkipReason::SeenResponse
            },
            idle("m0")
        ]
    );
}

#[test]
fn recheck_after_the_claim_is_believed_expired() {
    let mut b = behaviour();
    b.recheck = true;
    b.max_rechecks = 1;
    let mut a = agent(b);
    root(&mut a, 0, "m0");
    let c = claim("m0", OTHER, 0);
    hear(&mut a, 1_000, &c);
    let out = feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    // Seen at local 1 ms, TTL 50 ms: believed live until 51 ms.
    let recheck = Output::SetTimer {
        msg_id: "m0".into(),
        at_us: 51_000,
        kind: TimerKind::Recheck,
    };
    let skip = Output::Skip {
        msg_id: "m0".into(),
        reason: SkipReason::SeenClaim,
    };
    assert_eq!(out, [skip, recheck]);
    assert!(a.is_busy("m0"));
    // Nobody answered: a fresh CSMA wait, then it claims.
    let out = feed(
        &mut a,
        51_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert_eq!(out, [csma("m0", 53_000)]);
    let out = feed(
        &mut a,
        53_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert_eq!(out[0], claim_sent("m0", 53));
}

#[test]
fn yield_aborts_the_inference() {
    let mut a = agent(behaviour());
    root(&mut a, 0, "m0");
    feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    let y = yield_to("m0", OTHER);
    let out = hear(&mut a, 30_000, &y);
    assert_eq!(
        out,
        [
            Output::Abort {
                msg_id: "m0".into(),
                winner: OTHER.into(),
                ran_us: 28_000
            },
            idle("m0")
        ]
    );
    // Its end, if the driver still delivers it, does nothing.
    let done = Input::InferenceDone {
        msg_id: &"m0".into(),
        reply_id: None,
    };
    assert_eq!(feed(&mut a, 102_000, done), []);
}

#[test]
fn an_earlier_relayed_claim_aborts_under_spec() {
    let mut a = agent(behaviour());
    root(&mut a, 0, "m0");
    feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    let c = claim("m0", OTHER, 1);
    let out = hear(&mut a, 3_000, &c);
    assert!(matches!(out[0], Output::Abort { ran_us: 1_000, .. }));
}

#[test]
fn ignore_yield_keeps_inferring_and_answers() {
    let mut b = behaviour();
    b.ignore_yield_p = 1.0;
    let mut a = agent(b);
    root(&mut a, 0, "m0");
    let out = feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert!(matches!(
        out[1],
        Output::Infer {
            ignore_yield: true,
            ..
        }
    ));
    let y = yield_to("m0", OTHER);
    assert_eq!(hear(&mut a, 30_000, &y), []);
    let done = Input::InferenceDone {
        msg_id: &"m0".into(),
        reply_id: Some("m9".into()),
    };
    let out = feed(&mut a, 102_000, done);
    assert!(matches!(out[1], Output::Reply { .. }));
}

#[test]
fn a_hung_inference_never_ends_and_obeys_nothing() {
    let mut b = behaviour();
    b.hang_p = 1.0;
    let mut a = agent(b);
    root(&mut a, 0, "m0");
    let out = feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert_eq!(out[1], infer("m0", 2, InferenceEnd::Hang));
    let y = yield_to("m0", OTHER);
    assert_eq!(hear(&mut a, 30_000, &y), []);
    assert!(a.is_running("m0") && a.is_busy("m0"));
}

#[test]
fn a_crash_loses_everything_in_flight() {
    let mut b = behaviour();
    b.crash_p = 1.0;
    let mut a = agent(b);
    root(&mut a, 0, "m0");
    root(&mut a, 0, "m1");
    let out = feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    let Output::Infer {
        end: InferenceEnd::CrashAt(at),
        ..
    } = out[1]
    else {
        panic!("expected a crash, got {out:?}");
    };
    // Uniform over the drawn duration.
    assert!((2_000..=102_000).contains(&at), "{at}");
    let out = feed(&mut a, at, Input::Crash);
    assert_eq!(
        out,
        [
            Output::Lost {
                msg_id: "m0".into(),
                ran_us: at - 2_000,
                hung: false
            },
            idle("m0"),
            idle("m1"),
            Output::Crashed,
        ]
    );
    assert!(!a.is_busy("m0") && !a.is_busy("m1"));
    // Its old timers do nothing: it starts again with nothing tracked.
    assert_eq!(
        feed(
            &mut a,
            at,
            Input::Timer {
                msg_id: &"m1".into()
            }
        ),
        []
    );
}

#[test]
fn a_scripted_inference_starts_now_and_draws_nothing() {
    let mut b = behaviour();
    b.hang_p = 1.0; // never applies to a scripted inference
    let mut a = agent(b);
    let before = a.clone();
    let input = Input::StartNow {
        msg_id: &"q".into(),
        reply_to: &CH.into(),
        started_at: 42,
        duration_us: 7_000,
        ignore_yield: true,
    };
    let out = feed(&mut a, 0, input);
    assert_eq!(
        out,
        [
            wants("q"),
            claim_sent("q", 42),
            Output::Infer {
                msg_id: "q".into(),
                started_at: 42,
                duration_us: 7_000,
                end: InferenceEnd::DoneAt(7_000),
                ignore_yield: true
            }
        ]
    );
    // The random stream was not touched.
    let mut r1 = a.rng.clone();
    let mut r2 = before.rng.clone();
    assert_eq!(r1.random::<u64>(), r2.random::<u64>());
}

#[test]
fn the_same_stream_gives_the_same_decisions() {
    let mut b = behaviour();
    b.respond_p = 0.5;
    b.csma = Dist::fixed_us(1_000);
    let run = || {
        let mut a = agent(b.clone());
        let mut all = Vec::new();
        for i in 0..50 {
            all.extend(root(&mut a, i * 10, &format!("m{i}")));
        }
        all
    };
    let (x, y) = (run(), run());
    assert_eq!(x, y);
    let n = x
        .iter()
        .filter(|o| matches!(o, Output::Wants { .. }))
        .count();
    assert!((10..=40).contains(&n), "{n} of 50 at respond_p 0.5");
}

#[test]
fn agentchat_clients_do_not_abort_on_a_relayed_claim() {
    let mut a = agent_with(behaviour(), PolicyKind::Agentchat036);
    root(&mut a, 0, "m0");
    feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    let c = claim("m0", OTHER, 1);
    assert_eq!(hear(&mut a, 3_000, &c), []);
}

#[test]
fn mention_is_a_whole_word() {
    assert!(mentions("@agent-001 hello", "agent-001"));
    assert!(mentions("hi @agent-001, please", "agent-001"));
    assert!(!mentions("@agent-0011 hello", "agent-001"));
    assert!(!mentions("agent-001", "agent-001"));
}

#[test]
fn the_workload_posts_count_messages_of_each_kind() {
    let agents: Vec<String> = (0..4).map(|i| format!("agent-00{i}")).collect();
    let rng = Stream::seed_from_u64(1);
    let params = WorkloadParams {
        gap: Dist::fixed_us(1_000),
        count: 300,
        duration_us: None,
        channel: CH.into(),
        dm_p: 0.2,
        mention_p: 0.3,
        agents,
    };
    let mut w = Workload::new(params, rng);
    let mut now = 0;
    let mut kinds = [0usize; 3];
    while let Some(at) = w.next_post(now) {
        assert_eq!(at, now + 1_000);
        now = at;
        let post = w.draw(w.posted() as u32);
        let k = match PostKind::of(&post.to, &post.content) {
            PostKind::Dm => 0,
            PostKind::Mention => 1,
            PostKind::Channel => 2,
        };
        kinds[k] += 1;
    }
    assert_eq!(w.posted(), 300);
    // Expected 60 / 90 / 150; 4 standard deviations either way.
    assert!((33..=87).contains(&kinds[0]), "{kinds:?}");
    assert!((58..=122).contains(&kinds[1]), "{kinds:?}");
    assert!((117..=183).contains(&kinds[2]), "{kinds:?}");
}

#[test]
fn a_timed_workload_stops_at_its_duration() {
    let rng = Stream::seed_from_u64(1);
    let params = WorkloadParams {
        gap: Dist::fixed_us(1_000),
        count: 0,
        duration_us: Some(10_500),
        channel: CH.into(),
        dm_p: 0.0,
        mention_p: 0.0,
        agents: vec![ME.into()],
    };
    let mut w = Workload::new(params, rng);
    let mut now = 0;
    while let Some(at) = w.next_post(now) {
        now = at;
    }
    assert_eq!(w.posted(), 10);
}

/// A live clock: the wall clock (Unix µs `origin` at driver time 0) plus
/// the skew, both scaled by the speed; the TTL belief in real ms; a recheck
/// wake converted back to driver time exactly.
#[test]
fn a_live_clock_reads_the_wall_clock_and_scales_skew_and_ttl() {
    let origin_ms: i64 = 1_795_000_000_000;
    // Scenario time runs 10x real time; the skew is +2 s of scenario time.
    let clock = Clock::Scaled {
        origin_us: origin_ms * 1000,
        skew_us: 2_000_000,
        speed: 10.0,
    };
    let mut b = behaviour();
    b.recheck = true;
    b.max_rechecks = 1;
    b.ttl_ms = 50_000; // 5 s of real time
    let rng = Stream::seed_from_u64(7);
    let mut a = Agent::new(ME.into(), PolicyKind::Spec, Arc::new(b), rng, clock);
    // 40 s of scenario time is 4 s of real time; the skew 200 ms.
    assert_eq!(a.local_ms(40_000_000), origin_ms + 4_000 + 200);
    root(&mut a, 0, "m0");
    let c = claim("m0", OTHER, 0);
    // Seen at driver 1 s: local origin + 100 + 200 ms.
    hear(&mut a, 1_000_000, &c);
    let out = feed(
        &mut a,
        2_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    // Believed live for 5 s of real time, 50 s of scenario time.
    let recheck = Output::SetTimer {
        msg_id: "m0".into(),
        at_us: 51_000_000,
        kind: TimerKind::Recheck,
    };
    assert_eq!(out[1], recheck);
    let out = feed(
        &mut a,
        51_000_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert_eq!(out, [csma("m0", 51_002_000)]);
    let out = feed(
        &mut a,
        51_002_000,
        Input::Timer {
            msg_id: &"m0".into(),
        },
    );
    assert_eq!(out[0], claim_sent("m0", origin_ms + 5_100 + 200));
}

#[test]
fn a_squatter_claims_and_pre_claims_early_and_answers_nothing() {
    let b = Behaviour {
        squat: Some(crate::agent::Squat {
            ahead: 2,
            react: true,
            lead_ms: 1_000_000,
        }),
        ..behaviour()
    };
    let mut a = agent(b);
    // Its clock reads 5000 ms at driver time 5 s: dated 1 (at least 1).
    let out = root(&mut a, 5_000_000, "m7");
    let claims: Vec<(String, i64)> = out
        .iter()
        .map(|o| match o {
            Output::Send(ClientMsg::RespondingTo {
                msg_id, started_at, ..
            }) => (msg_id.clone(), started_at.as_i64().unwrap_or(-1)),
            other => panic!("a squatter only claims: {other:?}"),
        })
        .collect();
    assert_eq!(
        claims,
        [("m7".into(), 1), ("m8".into(), 1), ("m9".into(), 1)]
    );
    // Nothing else moves it: YIELDs, claims, timers, DMs.
    assert!(hear(&mut a, 5_100_000, &yield_to("m7", "agent-x")).is_empty());
    assert!(hear(&mut a, 5_100_000, &claim("m8", "agent-x", 3)).is_empty());
    let dm = relay("d1", "operator", &format!("@{ME}"), "psst");
    assert!(hear(&mut a, 5_200_000, &dm).is_empty());
    // Without `react`, an id without a number: nothing to pre-claim.
    let b = Behaviour {
        squat: Some(crate::agent::Squat {
            ahead: 3,
            react: false,
            lead_ms: 0,
        }),
        ..behaviour()
    };
    let mut a = agent(b);
    assert!(root(&mut a, 1_000, "question").is_empty());
    let out = root(&mut a, 2_000_000, "q10");
    assert_eq!(out.len(), 3);
    assert!(
        matches!(&out[0], Output::Send(ClientMsg::RespondingTo { msg_id, started_at, .. })
        if msg_id == "q11" && started_at.as_i64() == Some(2000))
    );
}

/// The selector: an unmentioned operator post starts a selection at once
/// (no CSMA, no claim); its end posts a selection in reply to the
/// question that @mentions one of the roster; with a fallback it waits
/// for an answer, and an answer ends the watch (the agent is idle).
#[test]
fn the_selector_selects_then_watches_for_an_answer() {
    let mut s = agent(behaviour());
    s.set_gate(Gate {
        scheme: Scheme::Selector,
        selector: true,
        fallback_us: 5_000_000,
        max_fallbacks: 1,
        ..Gate::default()
    });
    s.make_selector(vec![OTHER.to_string()]);
    assert!(s.is_selector());
    let out = root(&mut s, 0, "m1");
    assert_eq!(out[0], wants("m1"));
    assert!(
        matches!(&out[1], Output::Infer { msg_id, end: InferenceEnd::DoneAt(100_000), .. } if msg_id == "m1")
    );
    assert_eq!(out.len(), 2, "no claim: {out:?}");
    let id = "m1".to_string();
    let out = feed(
        &mut s,
        100_000,
        Input::InferenceDone {
            msg_id: &id,
            reply_id: Some("m2".into()),
        },
    );
    let Output::Reply { msg, parent, .. } = &out[1] else {
        panic!("{out:?}");
    };
    assert_eq!(parent, "m1");
    let ClientMsg::Msg {
        content,
        in_reply_to,
        ..
    } = msg
    else {
        panic!("{msg:?}");
    };
    assert_eq!(content, "@agent-001 please answer m1");
    assert_eq!(in_reply_to.as_deref(), Some("m1"));
    assert!(matches!(
        &out[2],
        Output::SetTimer {
            at_us: 5_100_000,
            kind: TimerKind::Fallback,
            ..
        }
    ));
    // An answer from the chosen agent: no fallback, the selector is idle.
    let answer = ServerMsg::Msg {
        id: "m3".into(),
        from: OTHER.into(),
        to: CH.into(),
        content: "answer to m1 from agent-001".into(),
        in_reply_to: Some("m1".into()),
    };
    let out = feed(
        &mut s,
        200_000,
        Input::Server {
            msg: &answer,
            depth: Some(1),
        },
    );
    assert_eq!(out, vec![Output::Idle { msg_id: id.clone() }]);
    assert!(feed(&mut s, 5_100_000, Input::Timer { msg_id: &id }).is_empty());
}

/// Under `selector` an answering agent answers the question a selection
/// of it names, at once (no CSMA), and ignores an unmentioned post.
#[test]
fn a_selected_agent_answers_the_question() {
    let mut a = agent(behaviour());
    a.set_gate(Gate {
        scheme: Scheme::Selector,
        seats: 2,
        ..Gate::default()
    });
    assert!(
        root(&mut a, 0, "m1").is_empty(),
        "nobody answers on its own"
    );
    let sel = ServerMsg::Msg {
        id: "m2".into(),
        from: "selector".into(),
        to: CH.into(),
        content: format!("@{ME} please answer m1"),
        in_reply_to: Some("m1".into()),
    };
    let out = feed(
        &mut a,
        1_000,
        Input::Server {
            msg: &sel,
            depth: Some(1),
        },
    );
    assert_eq!(out[0], wants("m1"));
    assert!(matches!(&out[1], Output::Infer { msg_id, .. } if msg_id == "m1"));
}
