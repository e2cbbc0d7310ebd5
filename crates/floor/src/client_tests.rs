//! Unit tests of the client state machine.

use super::*;
use crate::wire::YieldDetail;

const G: &str = "#general";

/// A CSMA window of 0-2 s; [`half`] draws the middle of it (1 s).
const WINDOW: CsmaWindow = CsmaWindow {
    min_ms: 0,
    max_ms: 2_000,
};

/// A uniform draw that is always 0.5.
fn half() -> f64 {
    0.5
}

fn client(policy: PolicyKind) -> Client {
    Client::new(ClientConfig {
        id: "agent-b".into(),
        policy,
        ttl_ms: 45_000,
        recheck_on_expiry: false,
        max_rechecks: 1,
        csma: WINDOW,
    })
}

fn rechecking(max: u32) -> Client {
    Client::new(ClientConfig {
        id: "agent-b".into(),
        policy: PolicyKind::Spec,
        ttl_ms: 10_000,
        recheck_on_expiry: true,
        max_rechecks: max,
        csma: WINDOW,
    })
}

fn claim_from(from: &str, m: &str, s: i64) -> ServerMsg {
    ServerMsg::RespondingTo {
        msg_id: m.into(),
        from: from.into(),
        started_at: (s).into(),
        channel: G.into(),
    }
}

fn reply_from(from: &str, m: &str) -> ServerMsg {
    ServerMsg::Msg {
        id: "s9".into(),
        from: from.into(),
        to: G.into(),
        content: "x".into(),
        in_reply_to: Some(m.into()),
    }
}

fn yield_to_me(m: &str, winner: &str) -> ServerMsg {
    ServerMsg::Yield {
        msg_id: m.into(),
        winner: winner.into(),
        channel: G.into(),
        detail: None,
    }
}

fn step(c: &mut Client, f: impl FnOnce(&mut Client, &mut Vec<Action>)) -> Vec<Action> {
    let mut out = Vec::new();
    f(c, &mut out);
    out
}

fn start(c: &mut Client, t: i64, m: &str) -> Vec<Action> {
    let out = step(c, |c, o| c.on_message(t, m, G, false, &mut half, o));
    assert_eq!(
        out,
        [Action::Wait {
            msg_id: m.into(),
            delay_us: 1_000_000
        }]
    );
    step(c, |c, o| c.on_timer(t + 3000, m, &mut half, o))
}

fn started(m: &str, s: i64) -> Vec<Action> {
    vec![
        Action::Send(ClientMsg::RespondingTo {
            msg_id: m.into(),
            started_at: (s).into(),
            channel: G.into(),
        }),
        Action::StartInference {
            msg_id: m.into(),
            started_at: s,
        },
    ]
}

#[test]
fn no_claim_seen_claims_and_infers_then_replies() {
    let mut c = client(PolicyKind::Spec);
    assert_eq!(start(&mut c, 1000, "m1"), started("m1", 4000));
    assert!(c.is_inferring("m1"));
    let out = step(&mut c, |c, o| {
        c.on_inference_done(9000, "m1", Some("r1".into()), "answer".into(), o)
    });
    assert_eq!(
        out,
        [Action::Post(ClientMsg::Msg {
            id: Some("r1".into()),
            to: G.into(),
            content: "answer".into(),
            in_reply_to: Some("m1".into())
        })]
    );
    assert_eq!(c.tracked(), 0);
}

#[test]
fn seen_claim_during_csma_skips() {
    let mut c = client(PolicyKind::Spec);
    step(&mut c, |c, o| {
        c.on_message(1000, "m1", G, false, &mut half, o)
    });
    assert!(
        step(&mut c, |c, o| c.on_server_msg(
            2000,
            &claim_from("agent-a", "m1", 1),
            &mut || 0.5,
            o
        ))
        .is_empty()
    );
    let out = step(&mut c, |c, o| c.on_timer(4000, "m1", &mut half, o));
    assert_eq!(
        out,
        [Action::Skip {
            msg_id: "m1".into(),
            reason: SkipReason::SeenClaim
        }]
    );
    assert_eq!(c.tracked(), 0);
}

fn floor_claimed(m: &str, holder: &str) -> ServerMsg {
    ServerMsg::FloorClaimed {
        msg_id: m.into(),
        channel: G.into(),
        holder: holder.into(),
        started_at: 1.into(),
    }
}

/// Each half on its own client: an agentchat-0.36 server announces a
/// granted claim as FLOOR_CLAIMED, and the client counts another agent's
/// as a seen claim, never its own (nor its own relayed RESPONDING_TO).
#[test]
fn floor_claimed_counts_as_a_seen_claim_and_own_claims_do_not() {
    // Its own claims only: it still claims and infers.
    let mut c = client(PolicyKind::Agentchat036);
    step(&mut c, |c, o| {
        c.on_message(1000, "m1", G, false, &mut half, o)
    });
    let out = step(&mut c, |c, o| {
        c.on_server_msg(1500, &floor_claimed("m1", "agent-b"), &mut || 0.5, o)
    });
    assert!(out.is_empty(), "{out:?}");
    step(&mut c, |c, o| {
        c.on_server_msg(1500, &claim_from("agent-b", "m1", 1), &mut || 0.5, o)
    });
    let out = step(&mut c, |c, o| c.on_timer(4000, "m1", &mut half, o));
    assert_eq!(out, started("m1", 4000));
    // Another agent's FLOOR_CLAIMED alone: a seen claim, so it skips.
    let mut c = client(PolicyKind::Agentchat036);
    step(&mut c, |c, o| {
        c.on_message(1000, "m1", G, false, &mut half, o)
    });
    let out = step(&mut c, |c, o| {
        c.on_server_msg(2000, &floor_claimed("m1", "agent-a"), &mut || 0.5, o)
    });
    assert!(out.is_empty(), "{out:?}");
    let out = step(&mut c, |c, o| c.on_timer(4000, "m1", &mut half, o));
    assert_eq!(
        out,
        [Action::Skip {
            msg_id: "m1".into(),
            reason: SkipReason::SeenClaim
        }]
    );
    // It is believed live for the TTL from when it was seen, like a
    // relayed claim: seen at 2000, expired at 47000.
    let mut c = client(PolicyKind::Agentchat036);
    step(&mut c, |c, o| {
        c.on_message(1000, "m1", G, false, &mut half, o)
    });
    step(&mut c, |c, o| {
        c.on_server_msg(2000, &floor_claimed("m1", "agent-a"), &mut || 0.5, o)
    });
    let out = step(&mut c, |c, o| c.on_timer(47_000, "m1", &mut half, o));
    assert_eq!(out, started("m1", 47_000));
}

/// A claim for another message or another channel is no claim on this
/// one: a relayed RESPONDING_TO (spec) or a FLOOR_CLAIMED (agentchat-0.36).
#[test]
fn claims_for_other_channels_or_messages_are_not_counted() {
    fn relayed(m: &str, channel: &str) -> ServerMsg {
        ServerMsg::RespondingTo {
            msg_id: m.into(),
            from: "agent-a".into(),
            started_at: 1.into(),
            channel: channel.into(),
        }
    }
    fn announced(m: &str, channel: &str) -> ServerMsg {
        ServerMsg::FloorClaimed {
            msg_id: m.into(),
            channel: channel.into(),
            holder: "agent-a".into(),
            started_at: 1.into(),
        }
    }
    type Claim = fn(&str, &str) -> ServerMsg;
    for (p, claim) in [
        (PolicyKind::Spec, relayed as Claim),
        (PolicyKind::Agentchat036, announced),
    ] {
        let mut c = client(p);
        step(&mut c, |c, o| {
            c.on_message(1000, "m1", G, false, &mut half, o)
        });
        step(&mut c, |c, o| {
            c.on_server_msg(2000, &claim("m1", "#other"), &mut || 0.5, o)
        });
        step(&mut c, |c, o| {
            c.on_server_msg(2000, &claim("m2", G), &mut || 0.5, o)
        });
        let out = step(&mut c, |c, o| c.on_timer(4000, "m1", &mut half, o));
        assert_eq!(out, started("m1", 4000), "{p}");
    }
}

#[test]
fn a_claim_seen_longer_than_ttl_ago_is_believed_expired() {
    let mut c = client(PolicyKind::Spec);
    step(&mut c, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut c, |c, o| {
        c.on_server_msg(1000, &claim_from("agent-a", "m1", 1), &mut || 0.5, o)
    });
    // seen 1000 + 45000 = 46000: live at 45999, expired at 46000.
    let mut c2 = c.clone();
    let out = step(&mut c2, |c, o| c.on_timer(45_999, "m1", &mut half, o));
    assert!(matches!(
        &out[..],
        [Action::Skip {
            reason: SkipReason::SeenClaim,
            ..
        }]
    ));
    let out = step(&mut c, |c, o| c.on_timer(46_000, "m1", &mut half, o));
    assert_eq!(out, started("m1", 46_000));
}

#[test]
fn seen_response_skips_even_without_claims_and_under_none() {
    for p in PolicyKind::ALL {
        let mut c = client(p);
        step(&mut c, |c, o| {
            c.on_message(1000, "m1", G, false, &mut half, o)
        });
        step(&mut c, |c, o| {
            c.on_server_msg(2000, &reply_from("agent-a", "m1"), &mut || 0.5, o)
        });
        let out = step(&mut c, |c, o| c.on_timer(4000, "m1", &mut half, o));
        assert_eq!(
            out,
            [Action::Skip {
                msg_id: "m1".into(),
                reason: SkipReason::SeenResponse
            }],
            "{p}"
        );
    }
}

#[test]
fn none_policy_sends_no_claim() {
    let mut c = client(PolicyKind::None);
    let out = start(&mut c, 1000, "m1");
    assert_eq!(
        out,
        [Action::StartInference {
            msg_id: "m1".into(),
            started_at: 4000
        }]
    );
}

#[test]
fn exempt_messages_infer_at_once_and_never_abort() {
    let mut c = client(PolicyKind::Spec);
    let out = step(&mut c, |c, o| {
        c.on_message(1000, "m1", G, true, &mut half, o)
    });
    assert_eq!(
        out,
        [Action::StartInference {
            msg_id: "m1".into(),
            started_at: 1000
        }]
    );
    assert!(
        step(&mut c, |c, o| c.on_server_msg(
            1100,
            &yield_to_me("m1", "agent-a"),
            &mut || 0.5,
            o
        ))
        .is_empty()
    );
    assert!(
        step(&mut c, |c, o| c.on_server_msg(
            1100,
            &claim_from("agent-a", "m1", 1),
            &mut || 0.5,
            o
        ))
        .is_empty()
    );
    // A DM peer is always exempt.
    let out = step(&mut c, |c, o| {
        c.on_message(1000, "m2", "@operator", false, &mut half, o)
    });
    assert!(matches!(&out[..], [Action::StartInference { .. }]));
    let out = step(&mut c, |c, o| {
        c.on_inference_done(2000, "m2", None, "hi".into(), o)
    });
    assert!(matches!(&out[..], [Action::Post(ClientMsg::Msg { to, .. })] if to == "@operator"));
}

#[test]
fn yield_aborts_a_running_inference() {
    for p in [
        PolicyKind::Spec,
        PolicyKind::Agentchat036,
        PolicyKind::Tombstone,
        PolicyKind::ServerTime,
    ] {
        let mut c = client(p);
        start(&mut c, 1000, "m1");
        let out = step(&mut c, |c, o| {
            c.on_server_msg(4100, &yield_to_me("m1", "agent-a"), &mut || 0.5, o)
        });
        assert_eq!(
            out,
            [Action::Abort {
                msg_id: "m1".into(),
                winner: "agent-a".into()
            }],
            "{p}"
        );
        assert_eq!(c.tracked(), 0);
        // Later calls about it do nothing.
        assert!(
            step(&mut c, |c, o| c.on_inference_done(
                9000,
                "m1",
                None,
                "x".into(),
                o
            ))
            .is_empty()
        );
    }
}

/// A YIELD answers a claim: a `none` client, which claims nothing, keeps
/// inferring whatever YIELD a server sends it (a hostile or confused one).
#[test]
fn a_client_that_claimed_nothing_ignores_yield() {
    let mut c = client(PolicyKind::None);
    let out = start(&mut c, 1000, "m1");
    assert_eq!(
        out,
        [Action::StartInference {
            msg_id: "m1".into(),
            started_at: 4000,
        }]
    );
    let out = step(&mut c, |c, o| {
        c.on_server_msg(4100, &yield_to_me("m1", "agent-a"), &mut || 0.5, o)
    });
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(c.tracked(), 1);
}

#[test]
fn agentchat_yield_naming_myself_is_ignored() {
    let mut c = client(PolicyKind::Agentchat036);
    start(&mut c, 1000, "m1");
    let y = ServerMsg::Yield {
        msg_id: "m1".into(),
        winner: "agent-b".into(),
        channel: G.into(),
        detail: Some(YieldDetail {
            holder_started_at: 4000.into(),
            reason: "Another agent claimed first".into(),
        }),
    };
    assert!(step(&mut c, |c, o| c.on_server_msg(4100, &y, &mut || 0.5, o)).is_empty());
    assert!(c.is_inferring("m1"));
}

#[test]
fn earlier_relayed_claim_aborts_under_spec_and_tombstone_only() {
    for (p, aborts) in [
        (PolicyKind::Spec, true),
        (PolicyKind::Tombstone, true),
        (PolicyKind::ServerTime, false),
        (PolicyKind::Agentchat036, false),
        // No client claims under `none`, so no server relays one; a claim
        // relayed anyway (a peer on another policy) aborts nothing.
        (PolicyKind::None, false),
    ] {
        let mut c = client(p);
        start(&mut c, 1000, "m1"); // started_at 4000
        // Later one: never aborts.
        assert!(
            step(&mut c, |c, o| c.on_server_msg(
                4100,
                &claim_from("agent-a", "m1", 4001),
                &mut || 0.5,
                o
            ))
            .is_empty()
        );
        // Tie at 4000: agent-a < agent-b, so it is earlier.
        let out = step(&mut c, |c, o| {
            c.on_server_msg(4100, &claim_from("agent-a", "m1", 4000), &mut || 0.5, o)
        });
        assert_eq!(!out.is_empty(), aborts, "{p}");
        if aborts {
            assert_eq!(
                out,
                [Action::Abort {
                    msg_id: "m1".into(),
                    winner: "agent-a".into()
                }]
            );
        }
    }
    // Tie with a larger id: not earlier.
    let mut c = client(PolicyKind::Spec);
    start(&mut c, 1000, "m1");
    assert!(
        step(&mut c, |c, o| c.on_server_msg(
            4100,
            &claim_from("agent-c", "m1", 4000),
            &mut || 0.5,
            o
        ))
        .is_empty()
    );
}

#[test]
fn ignore_yield_disables_both_abort_paths_but_not_the_skip() {
    let mut c = client(PolicyKind::Spec);
    start(&mut c, 1000, "m1");
    c.set_ignore_yield("m1", true);
    assert!(
        step(&mut c, |c, o| c.on_server_msg(
            4100,
            &yield_to_me("m1", "agent-a"),
            &mut || 0.5,
            o
        ))
        .is_empty()
    );
    assert!(
        step(&mut c, |c, o| c.on_server_msg(
            4100,
            &claim_from("agent-a", "m1", 1),
            &mut || 0.5,
            o
        ))
        .is_empty()
    );
    let out = step(&mut c, |c, o| {
        c.on_inference_done(9000, "m1", None, "x".into(), o)
    });
    assert_eq!(out.len(), 1);
    // set_ignore_yield before inference has no effect.
    step(&mut c, |c, o| {
        c.on_message(1000, "m2", G, false, &mut half, o)
    });
    c.set_ignore_yield("m2", true);
    step(&mut c, |c, o| {
        c.on_server_msg(2000, &claim_from("agent-a", "m2", 1), &mut || 0.5, o)
    });
    let out = step(&mut c, |c, o| c.on_timer(4000, "m2", &mut half, o));
    assert!(matches!(&out[..], [Action::Skip { .. }]));
}

#[test]
fn recheck_after_the_claim_is_believed_expired() {
    let mut c = rechecking(1);
    step(&mut c, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut c, |c, o| {
        c.on_server_msg(1000, &claim_from("agent-a", "m1", 1), &mut || 0.5, o)
    });
    let out = step(&mut c, |c, o| c.on_timer(3000, "m1", &mut half, o));
    assert_eq!(
        out,
        [
            Action::Skip {
                msg_id: "m1".into(),
                reason: SkipReason::SeenClaim
            },
            Action::WakeAt {
                msg_id: "m1".into(),
                at_ms: 11_000
            }
        ]
    );
    assert_eq!(c.tracked(), 1);
    let out = step(&mut c, |c, o| c.on_timer(11_000, "m1", &mut half, o));
    assert_eq!(
        out,
        [Action::Wait {
            msg_id: "m1".into(),
            delay_us: 1_000_000
        }]
    );
    let out = step(&mut c, |c, o| c.on_timer(14_000, "m1", &mut half, o));
    assert_eq!(out, started("m1", 14_000));
}

#[test]
fn recheck_limit_and_newer_claims() {
    let mut c = rechecking(1);
    step(&mut c, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut c, |c, o| {
        c.on_server_msg(1000, &claim_from("agent-a", "m1", 1), &mut || 0.5, o)
    });
    step(&mut c, |c, o| c.on_timer(3000, "m1", &mut half, o));
    // A newer claim seen while waiting: wait for it too.
    step(&mut c, |c, o| {
        c.on_server_msg(5000, &claim_from("agent-c", "m1", 2), &mut || 0.5, o)
    });
    let out = step(&mut c, |c, o| c.on_timer(11_000, "m1", &mut half, o));
    assert_eq!(
        out,
        [Action::WakeAt {
            msg_id: "m1".into(),
            at_ms: 15_000
        }]
    );
    let out = step(&mut c, |c, o| c.on_timer(15_000, "m1", &mut half, o));
    assert_eq!(
        out,
        [Action::Wait {
            msg_id: "m1".into(),
            delay_us: 1_000_000
        }]
    );
    // Second decision: a claim again, but the recheck budget (1) is spent.
    step(&mut c, |c, o| {
        c.on_server_msg(16_000, &claim_from("agent-a", "m1", 3), &mut || 0.5, o)
    });
    let out = step(&mut c, |c, o| c.on_timer(18_000, "m1", &mut half, o));
    assert_eq!(
        out,
        [Action::Skip {
            msg_id: "m1".into(),
            reason: SkipReason::SeenClaim
        }]
    );
    assert_eq!(c.tracked(), 0);
}

#[test]
fn response_during_recheck_wait_finishes_the_message() {
    let mut c = rechecking(3);
    step(&mut c, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut c, |c, o| {
        c.on_server_msg(1000, &claim_from("agent-a", "m1", 1), &mut || 0.5, o)
    });
    step(&mut c, |c, o| c.on_timer(3000, "m1", &mut half, o));
    step(&mut c, |c, o| {
        c.on_server_msg(6000, &reply_from("agent-a", "m1"), &mut || 0.5, o)
    });
    assert_eq!(c.tracked(), 0);
    assert!(step(&mut c, |c, o| c.on_timer(11_000, "m1", &mut half, o)).is_empty());
}

#[test]
fn no_recheck_without_the_flag_or_for_a_response_skip() {
    let mut c = client(PolicyKind::Spec);
    step(&mut c, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut c, |c, o| {
        c.on_server_msg(1000, &claim_from("agent-a", "m1", 1), &mut || 0.5, o)
    });
    assert_eq!(
        step(&mut c, |c, o| c.on_timer(3000, "m1", &mut half, o)).len(),
        1
    );
    let mut c = rechecking(1);
    step(&mut c, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut c, |c, o| {
        c.on_server_msg(1000, &claim_from("agent-a", "m1", 1), &mut || 0.5, o)
    });
    step(&mut c, |c, o| {
        c.on_server_msg(1000, &reply_from("agent-a", "m1"), &mut || 0.5, o)
    });
    assert_eq!(
        step(&mut c, |c, o| c.on_timer(3000, "m1", &mut half, o)).len(),
        1
    );
    assert_eq!(c.tracked(), 0);
}

#[test]
fn messages_are_independent_and_state_self_cleans() {
    let mut c = client(PolicyKind::Spec);
    for i in 0..100 {
        let m = format!("m{i}");
        step(&mut c, |c, o| c.on_message(i, &m, G, false, &mut half, o));
    }
    assert_eq!(c.tracked(), 100);
    for i in 0..100 {
        let m = format!("m{i}");
        step(&mut c, |c, o| c.on_timer(5000 + i, &m, &mut half, o));
        if i % 2 == 0 {
            step(&mut c, |c, o| {
                c.on_server_msg(6000, &yield_to_me(&m, "agent-a"), &mut || 0.5, o)
            });
        } else {
            step(&mut c, |c, o| {
                c.on_inference_done(7000, &m, None, "x".into(), o)
            });
        }
    }
    assert_eq!(c.tracked(), 0);
    // Duplicates and stale calls are ignored.
    step(&mut c, |c, o| c.on_message(0, "x", G, false, &mut half, o));
    assert!(step(&mut c, |c, o| c.on_message(0, "x", G, false, &mut half, o)).is_empty());
    assert!(step(&mut c, |c, o| c.on_timer(0, "nope", &mut half, o)).is_empty());
    c.forget("x");
    assert_eq!(c.tracked(), 0);
}

/// `forget` drops one message, `reset` every one: later calls about them
/// do nothing, and the same id heard again starts afresh.
#[test]
fn forget_drops_one_message_and_reset_every_one() {
    let mut c = client(PolicyKind::Spec);
    step(&mut c, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut c, |c, o| c.on_message(0, "m2", G, false, &mut half, o));
    step(&mut c, |c, o| c.on_timer(3000, "m2", &mut half, o));
    assert!(c.is_tracking("m1") && c.is_tracking("m2") && !c.is_tracking("m3"));
    assert!(!c.is_inferring("m1") && c.is_inferring("m2"));
    c.forget("m1");
    assert!(!c.is_tracking("m1") && c.is_tracking("m2"));
    assert!(step(&mut c, |c, o| c.on_timer(3000, "m1", &mut half, o)).is_empty());
    c.reset();
    assert_eq!(c.tracked(), 0);
    assert!(!c.is_tracking("m2") && !c.is_inferring("m2"));
    assert!(
        step(&mut c, |c, o| c.on_inference_done(
            9000,
            "m2",
            None,
            "x".into(),
            o
        ))
        .is_empty()
    );
    assert_eq!(
        step(&mut c, |c, o| c
            .on_message(9000, "m2", G, false, &mut half, o)),
        [Action::Wait {
            msg_id: "m2".into(),
            delay_us: 1_000_000
        }]
    );
}

#[test]
fn my_own_reply_is_not_a_seen_response() {
    let mut c = client(PolicyKind::Spec);
    step(&mut c, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut c, |c, o| {
        c.on_server_msg(10, &reply_from("agent-b", "m1"), &mut || 0.5, o)
    });
    assert_eq!(
        step(&mut c, |c, o| c.on_timer(3000, "m1", &mut half, o)),
        started("m1", 3000)
    );
}

#[test]
fn start_now_claims_with_the_given_started_at_even_after_a_seen_claim() {
    let mut c = Client::new(ClientConfig {
        id: "agent-b".into(),
        policy: PolicyKind::Spec,
        ttl_ms: 45_000,
        recheck_on_expiry: false,
        max_rechecks: 1,
        csma: WINDOW,
    });
    let mut out = Vec::new();
    c.on_message(0, "m1", "#general", false, &mut half, &mut out);
    out.clear();
    c.start_now("m1", "#general", 1234, &mut out);
    assert_eq!(
        out,
        vec![
            Action::Send(ClientMsg::RespondingTo {
                msg_id: "m1".into(),
                started_at: 1234.into(),
                channel: "#general".into()
            }),
            Action::StartInference {
                msg_id: "m1".into(),
                started_at: 1234
            }
        ]
    );
    assert!(c.is_inferring("m1"));
    // The CSMA timer that was pending now does nothing.
    out.clear();
    c.on_timer(5000, "m1", &mut half, &mut out);
    assert!(out.is_empty());
    // Starting again while inferring changes nothing.
    c.start_now("m1", "#general", 99, &mut out);
    assert!(out.is_empty());
}

/// A scripted start sends a claim only where the policy has clients claim
/// and the reply goes to a channel: not under `none`, never to a DM peer.
#[test]
fn start_now_claims_only_on_a_channel_under_a_claiming_policy() {
    for p in PolicyKind::ALL {
        // A channel: a claim unless the policy sends none.
        let mut c = client(p);
        let out = step(&mut c, |c, o| c.start_now("m1", G, 1234, o));
        let infer = Action::StartInference {
            msg_id: "m1".into(),
            started_at: 1234,
        };
        if p == PolicyKind::None {
            assert_eq!(out, std::slice::from_ref(&infer), "{p}");
        } else {
            assert_eq!(out, started("m1", 1234), "{p}");
        }
        // A DM peer: never a claim, and the inference is exempt (a YIELD
        // does not abort it).
        let mut c = client(p);
        let out = step(&mut c, |c, o| c.start_now("m1", "@operator", 1234, o));
        assert_eq!(out, [infer], "{p}");
        let y = ServerMsg::Yield {
            msg_id: "m1".into(),
            winner: "agent-a".into(),
            channel: "@operator".into(),
            detail: None,
        };
        assert!(step(&mut c, |c, o| c.on_server_msg(1300, &y, &mut || 0.5, o)).is_empty());
        assert!(c.is_inferring("m1"), "{p}");
    }
}

#[test]
fn ttl_audit_of_a_client_the_ttl_did_and_did_not_touch() {
    // A CSMA timer with no claim seen asks nothing of the TTL.
    let mut c = client(PolicyKind::Spec);
    start(&mut c, 0, "m0");
    assert_eq!(c.ttl_audit().same_from(), Some(0));
    // Skipping for a claim seen 44 999 ms before holds for any TTL above that.
    step(&mut c, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut c, |c, o| {
        c.on_server_msg(1000, &claim_from("agent-a", "m1", 1), &mut || 0.5, o)
    });
    let mut live = c.clone();
    step(&mut live, |c, o| c.on_timer(45_999, "m1", &mut half, o));
    assert_eq!(live.ttl_audit().same_from(), Some(45_000));
    // Kept across a crash.
    live.reset();
    assert_eq!(live.ttl_audit().same_from(), Some(45_000));
    // Believing the claim over depends on the TTL's exact value.
    step(&mut c, |c, o| c.on_timer(46_000, "m1", &mut half, o));
    assert_eq!(c.ttl_audit().same_from(), None);
    // So does waiting for a claim's TTL to recheck.
    let mut r = rechecking(1);
    step(&mut r, |c, o| c.on_message(0, "m1", G, false, &mut half, o));
    step(&mut r, |c, o| {
        c.on_server_msg(1000, &claim_from("agent-a", "m1", 1), &mut || 0.5, o)
    });
    let out = step(&mut r, |c, o| c.on_timer(2000, "m1", &mut half, o));
    assert!(out.contains(&Action::WakeAt {
        msg_id: "m1".into(),
        at_ms: 11_000
    }));
    assert_eq!(r.ttl_audit().same_from(), None);
}

/// The client owns the CSMA wait: the delay is the window's at the
/// caller's draw, and the draw is asked once per wait and never otherwise
/// (an exempt message, a claim, a skip draw nothing), so a caller drawing
/// everything from one stream keeps its order.
#[test]
fn csma_wait_is_drawn_in_the_window_once_per_wait() {
    let mut c = rechecking(1);
    let mut draws = 0;
    let mut counting = || {
        draws += 1;
        0.25
    };
    let out = step(&mut c, |c, o| {
        c.on_message(0, "m1", G, false, &mut counting, o)
    });
    assert_eq!(
        out,
        [Action::Wait {
            msg_id: "m1".into(),
            delay_us: 500_000
        }]
    );
    // Exempt: inference at once, no draw.
    step(&mut c, |c, o| {
        c.on_message(0, "m2", G, true, &mut counting, o)
    });
    // A claim seen, the wait ends: skip, and a recheck wake (no draw).
    step(&mut c, |c, o| {
        c.on_server_msg(100, &claim_from("agent-a", "m1", 50), &mut || 0.5, o)
    });
    let out = step(&mut c, |c, o| c.on_timer(500, "m1", &mut counting, o));
    assert!(matches!(
        &out[..],
        [Action::Skip { .. }, Action::WakeAt { .. }]
    ));
    // The claim believed over: a new wait, drawn again.
    let out = step(&mut c, |c, o| c.on_timer(10_100, "m1", &mut counting, o));
    assert_eq!(
        out,
        [Action::Wait {
            msg_id: "m1".into(),
            delay_us: 500_000
        }]
    );
    // That wait ends: claim and start, no draw.
    let out = step(&mut c, |c, o| c.on_timer(10_600, "m1", &mut counting, o));
    assert_eq!(out, started("m1", 10_600));
    assert_eq!(draws, 2);
    // The window's ends, and draws out of range kept inside it.
    let w = CsmaWindow {
        min_ms: 100,
        max_ms: 300,
    };
    assert_eq!(w.delay_us(0.0), 100_000);
    assert_eq!(w.delay_us(0.999_999_9), 300_000);
    assert_eq!(w.delay_us(0.5), 200_000);
    assert_eq!(w.delay_us(-1.0), 100_000);
    assert_eq!(w.delay_us(7.0), 300_000);
    assert_eq!(w.delay_us(f64::NAN), 100_000);
    let mut fixed = || 1.0;
    assert_eq!(fixed.csma_delay_us(w), 300_000);
}

/// Issue 48, item 3: the defaults are the protocol's (CSMA 2-8 s, the
/// server's 45 s TTL, `spec`, no recheck), the same as the server's.
#[test]
fn the_defaults_are_the_protocols() {
    let w = CsmaWindow::default();
    assert_eq!((w.min_ms, w.max_ms), (2_000, 8_000));
    assert_eq!(w.delay_us(0.5), 5_000_000);
    let c: ClientConfig = ClientConfig::new("agent-a");
    assert_eq!(c.id, "agent-a");
    assert_eq!(c.policy, PolicyKind::Spec);
    assert_eq!(c.ttl_ms, crate::Config::default().ttl_ms);
    assert_eq!(c.ttl_ms, 45_000);
    assert!(!c.recheck_on_expiry);
    assert_eq!(c.max_rechecks, 0);
    assert_eq!(c.csma, w);
    assert_eq!(
        ClientConfig::default(),
        ClientConfig {
            id: String::new(),
            ..c
        }
    );
    // A question waits in the protocol's window.
    let mut a = Client::new(ClientConfig::new("agent-a"));
    let mut out = Vec::new();
    a.on_message(0, "q1", G, false, &mut || 1.0, &mut out);
    assert_eq!(
        out,
        [Action::Wait {
            msg_id: "q1".into(),
            delay_us: 8_000_000
        }]
    );
}

fn released(m: &str, holder: &str) -> ServerMsg {
    ServerMsg::FloorReleased {
        msg_id: m.into(),
        channel: G.into(),
        holder: holder.into(),
    }
}

/// Skip `m1` at 4 s for agent-a's claim seen at 2 s.
fn skipped_for_a_claim(c: &mut Client) {
    step(c, |c, o| c.on_message(1000, "m1", G, false, &mut half, o));
    step(c, |c, o| {
        c.on_server_msg(2000, &claim_from("agent-a", "m1", 1), &mut half, o)
    });
    let out = step(c, |c, o| c.on_timer(4000, "m1", &mut half, o));
    assert_eq!(
        out,
        [Action::Skip {
            msg_id: "m1".into(),
            reason: SkipReason::SeenClaim
        }]
    );
}

#[test]
fn a_release_after_a_skip_starts_a_new_wait_and_the_agent_claims() {
    let mut c = client(PolicyKind::Spec);
    skipped_for_a_claim(&mut c);
    // Finished for the caller, but listening for a release.
    assert_eq!((c.tracked(), c.is_tracking("m1")), (0, false));
    let out = step(&mut c, |c, o| {
        c.on_server_msg(9000, &released("m1", "agent-a"), &mut half, o)
    });
    assert_eq!(
        out,
        [Action::Wait {
            msg_id: "m1".into(),
            delay_us: 1_000_000
        }]
    );
    assert!(c.is_tracking("m1"));
    assert_eq!(
        step(&mut c, |c, o| c.on_timer(10_000, "m1", &mut half, o)),
        started("m1", 10_000)
    );
}

#[test]
fn a_release_while_waiting_clears_the_claim_seen() {
    let mut c = client(PolicyKind::Spec);
    step(&mut c, |c, o| {
        c.on_message(1000, "m1", G, false, &mut half, o)
    });
    step(&mut c, |c, o| {
        c.on_server_msg(1500, &claim_from("agent-a", "m1", 1), &mut half, o)
    });
    let out = step(&mut c, |c, o| {
        c.on_server_msg(1800, &released("m1", "agent-a"), &mut half, o)
    });
    assert!(out.is_empty());
    assert_eq!(
        step(&mut c, |c, o| c.on_timer(2000, "m1", &mut half, o)),
        started("m1", 2000)
    );
}

#[test]
fn no_release_matters_after_an_answer_after_the_ttl_or_under_agentchat() {
    // An answer seen: the watch ends.
    let mut c = client(PolicyKind::Spec);
    skipped_for_a_claim(&mut c);
    step(&mut c, |c, o| {
        c.on_server_msg(5000, &reply_from("agent-a", "m1"), &mut half, o)
    });
    let out = step(&mut c, |c, o| {
        c.on_server_msg(6000, &released("m1", "agent-a"), &mut half, o)
    });
    assert!(out.is_empty());
    // The claim believed expired: a new message's arrival drops the watch.
    let mut c = client(PolicyKind::Spec);
    skipped_for_a_claim(&mut c);
    step(&mut c, |c, o| {
        c.on_message(47_001, "m2", G, false, &mut half, o)
    });
    let out = step(&mut c, |c, o| {
        c.on_server_msg(47_002, &released("m1", "agent-a"), &mut half, o)
    });
    assert!(out.is_empty());
    assert_eq!(c.tracked(), 1);
    // agentchat-0.36 announces no release: nothing is watched.
    let mut c = client(PolicyKind::Agentchat036);
    skipped_for_a_claim(&mut c);
    let out = step(&mut c, |c, o| {
        c.on_server_msg(9000, &released("m1", "agent-a"), &mut half, o)
    });
    assert!(out.is_empty());
    // The same message again after a watch is a new decision.
    let mut c = client(PolicyKind::Spec);
    skipped_for_a_claim(&mut c);
    let out = step(&mut c, |c, o| {
        c.on_message(9000, "m1", G, false, &mut half, o)
    });
    assert_eq!(out.len(), 1);
    assert!(c.is_tracking("m1"));
    c.reset();
    assert_eq!(c.tracked(), 0);
}
