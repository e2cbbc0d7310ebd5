//! Unit tests of the server, one group per capability / policy bullet.

use super::*;
use crate::relay_memory::{RELAY_MEMORY_MS, RELAY_MEMORY_PER_SENDER};
use crate::wire::{Stamp, YieldDetail};

const G: &str = "#general";

struct H {
    s: Server,
}

/// The defaults with the claim guard off: the policies exactly as they are
/// written (most tests claim messages they never sent; the guard has tests
/// of its own).
fn unguarded() -> Config {
    Config {
        claim_guard: ClaimGuard::Off,
        ..Config::default()
    }
}

impl H {
    fn with(cfg: Config) -> H {
        H {
            s: Server::new(cfg),
        }
    }
    fn new(p: PolicyKind) -> H {
        H::with(Config {
            policy: p,
            ..unguarded()
        })
    }
    /// `agent-a`, `agent-b`, `agent-c` in #general, `agent-d` in #other.
    fn abc(p: PolicyKind) -> H {
        let mut h = H::new(p);
        for a in ["agent-a", "agent-b", "agent-c"] {
            h.join(0, a, G);
        }
        h.join(0, "agent-d", "#other");
        h
    }
    fn run(&mut self, t: u64, input: Input) -> Vec<Outgoing> {
        let mut out = Vec::new();
        self.s.run_owned(t, input, &mut out);
        out
    }
    fn join(&mut self, t: u64, a: &str, ch: &str) -> Vec<Outgoing> {
        self.run(
            t,
            Input::Join {
                agent: a.into(),
                channel: ch.into(),
            },
        )
    }
    fn claim_as(
        &mut self,
        t: u64,
        a: &str,
        role: Role,
        ch: &str,
        m: &str,
        s: i64,
    ) -> Vec<Outgoing> {
        self.run(
            t,
            Input::Client {
                from: a.into(),
                role,
                msg: ClientMsg::RespondingTo {
                    msg_id: m.into(),
                    started_at: (s).into(),
                    channel: ch.into(),
                },
            },
        )
    }
    fn claim(&mut self, t: u64, a: &str, m: &str, s: i64) -> Vec<Outgoing> {
        self.claim_as(t, a, Role::Agent, G, m, s)
    }
    fn msg(&mut self, t: u64, a: &str, to: &str, reply: Option<&str>) -> Vec<Outgoing> {
        self.run(
            t,
            Input::Client {
                from: a.into(),
                role: Role::Agent,
                msg: ClientMsg::Msg {
                    id: None,
                    to: to.into(),
                    content: "hello".into(),
                    in_reply_to: reply.map(String::from),
                },
            },
        )
    }
    /// [`Server::holder`] with the holder as `&str`.
    fn holder(&self, ch: &str, m: &str) -> Option<(&str, Stamp)> {
        self.s.holder(ch, m).map(|(h, st)| (h.as_str(), st))
    }
    fn tick(&mut self, t: u64) {
        assert!(self.run(t, Input::Tick).is_empty());
    }
}

fn to(out: &[Outgoing]) -> Vec<(&str, &str)> {
    out.iter()
        .map(|o| (o.to.as_str(), o.msg.type_name()))
        .collect()
}

fn relayed_claim(m: &str, from: &str, s: i64) -> ServerMsg {
    ServerMsg::RespondingTo {
        msg_id: m.into(),
        from: from.into(),
        started_at: (s).into(),
        channel: G.into(),
    }
}

fn yield_spec(m: &str, winner: &str) -> ServerMsg {
    ServerMsg::Yield {
        msg_id: m.into(),
        winner: winner.into(),
        channel: G.into(),
        detail: None,
    }
}

fn yield_ac(m: &str, holder: &str, s: i64, reason: &str) -> ServerMsg {
    ServerMsg::Yield {
        msg_id: m.into(),
        winner: holder.into(),
        channel: G.into(),
        detail: Some(YieldDetail {
            holder_started_at: (s).into(),
            reason: reason.into(),
        }),
    }
}

fn error_code(out: &[Outgoing]) -> Option<(&str, &str)> {
    match out {
        [
            Outgoing {
                to,
                msg: ServerMsg::Error { code, .. },
            },
        ] => Some((to.as_str(), code.as_str())),
        _ => None,
    }
}

// ------------------------------------------------------------ config

#[test]
fn config_default() {
    let c = Config::default();
    assert_eq!(
        (c.policy, c.ttl_ms, c.enabled),
        (PolicyKind::Spec, 45_000, true)
    );
    // A server reports the configuration it was given.
    let given = Config {
        policy: PolicyKind::Agentchat036,
        ttl_ms: 1234,
        sweep_every_ms: 700,
        ..unguarded()
    };
    assert_eq!(Server::<Text>::new(given.clone()).config(), &given);
}

#[test]
fn config_from_vars() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let none: &[(&str, &str)] = &[];
    assert_eq!(
        Config::from_vars(PolicyKind::Spec, env(none)),
        Ok(Config::default())
    );
    let c = Config::from_vars(
        PolicyKind::Tombstone,
        env(&[
            ("AGENTCHAT_RESPOND_TTL_MS", " 1000 "),
            ("AGENTCHAT_RESPOND_ENABLED", "FALSE"),
        ]),
    );
    assert_eq!(
        c,
        Ok(Config {
            policy: PolicyKind::Tombstone,
            ttl_ms: 1000,
            enabled: false,
            ..Config::default()
        })
    );
    // agentchat-0.36 reads AGENTCHAT_CLAIM_TTL_MS, not the spec's variable.
    let vars = env(&[
        ("AGENTCHAT_RESPOND_TTL_MS", "1000"),
        ("AGENTCHAT_CLAIM_TTL_MS", "2000"),
    ]);
    assert_eq!(
        Config::from_vars(PolicyKind::Agentchat036, vars).map(|c| c.ttl_ms),
        Ok(2000)
    );
    assert_eq!(
        Config::from_vars(PolicyKind::Spec, vars).map(|c| c.ttl_ms),
        Ok(1000)
    );
    // Empty counts as unset.
    assert_eq!(
        Config::from_vars(PolicyKind::Spec, env(&[("AGENTCHAT_RESPOND_TTL_MS", "")])),
        Ok(Config::default())
    );
    for bad in ["abc", "0", "-5", "1.5", "45000ms"] {
        let e = Config::from_vars(PolicyKind::Spec, move |k: &str| {
            (k == "AGENTCHAT_RESPOND_TTL_MS").then(|| bad.to_string())
        });
        let msg = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.starts_with(&format!("AGENTCHAT_RESPOND_TTL_MS=`{bad}` is invalid")),
            "{msg}"
        );
    }
    for (v, want) in [("true", true), ("0", false), ("On", true), ("no", false)] {
        let c = Config::from_vars(PolicyKind::Spec, move |k: &str| {
            (k == "AGENTCHAT_RESPOND_ENABLED").then(|| v.to_string())
        });
        assert_eq!(c.map(|c| c.enabled), Ok(want), "{v}");
    }
    let e = Config::from_vars(PolicyKind::Spec, |k: &str| {
        (k == "AGENTCHAT_RESPOND_ENABLED").then(|| "maybe".to_string())
    });
    assert_eq!(
        e.err().map(|e| e.to_string()).unwrap_or_default(),
        "AGENTCHAT_RESPOND_ENABLED=`maybe` is invalid: expected true or false"
    );
}

// ------------------------------------------------------------ spec

#[test]
fn spec_first_claim_is_granted_and_relayed_to_other_members_only() {
    let mut h = H::abc(PolicyKind::Spec);
    let out = h.claim(1000, "agent-a", "m1", 500);
    assert_eq!(
        to(&out),
        [("agent-b", "RESPONDING_TO"), ("agent-c", "RESPONDING_TO")]
    );
    assert_eq!(out[0].msg, relayed_claim("m1", "agent-a", 500));
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(500))));
    assert_eq!(h.s.claim_count(), 1);
    let info = h.s.claim_info(G, "m1");
    assert_eq!(
        info.map(|i| (i.granted_at.0, i.deadline.0)),
        Some((1000, 46_000))
    );
    assert_eq!(h.s.stats().claims_received, 1);
    assert_eq!(h.s.stats().relayed, 2);
}

#[test]
fn spec_later_claim_gets_yield_after_the_relay() {
    let mut h = H::abc(PolicyKind::Spec);
    h.claim(1000, "agent-a", "m1", 500);
    let out = h.claim(1100, "agent-b", "m1", 600);
    assert_eq!(
        to(&out),
        [
            ("agent-a", "RESPONDING_TO"),
            ("agent-c", "RESPONDING_TO"),
            ("agent-b", "YIELD")
        ]
    );
    assert_eq!(out[2].msg, yield_spec("m1", "agent-a"));
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(500))));
    assert_eq!(h.s.stats().yields, 1);
    assert_eq!(h.s.stats().overruled, 0);
    assert_eq!(h.s.stats().relayed, 4);
}

#[test]
fn spec_earlier_claim_displaces_holder_with_fresh_deadline() {
    let mut h = H::abc(PolicyKind::Spec);
    h.claim(1000, "agent-b", "m1", 600);
    let out = h.claim(1200, "agent-c", "m1", 500);
    assert_eq!(
        to(&out),
        [
            ("agent-a", "RESPONDING_TO"),
            ("agent-b", "RESPONDING_TO"),
            ("agent-b", "YIELD")
        ]
    );
    assert_eq!(out[2].msg, yield_spec("m1", "agent-c"));
    assert_eq!(h.holder(G, "m1"), Some(("agent-c", Stamp::Int(500))));
    assert_eq!(h.s.claim_info(G, "m1").map(|i| i.deadline.0), Some(46_200));
    assert_eq!(h.s.stats().overruled, 1);
    assert_eq!(h.s.claim_count(), 1);
}

#[test]
fn spec_ties_go_to_the_smaller_agent_id() {
    let mut h = H::abc(PolicyKind::Spec);
    h.claim(1000, "agent-b", "m1", 500);
    let out = h.claim(1000, "agent-a", "m1", 500);
    assert_eq!(
        out.last().map(|o| (&*o.to, &o.msg)),
        Some(("agent-b", &yield_spec("m1", "agent-a")))
    );
    let out = h.claim(1000, "agent-c", "m1", 500);
    assert_eq!(
        out.last().map(|o| (&*o.to, &o.msg)),
        Some(("agent-c", &yield_spec("m1", "agent-a")))
    );
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(500))));
}

#[test]
fn spec_repeated_claim_by_holder_changes_nothing() {
    let mut h = H::abc(PolicyKind::Spec);
    h.claim(1000, "agent-a", "m1", 500);
    assert!(h.claim(2000, "agent-a", "m1", 400).is_empty());
    assert!(h.claim(2000, "agent-a", "m1", 900).is_empty());
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(500))));
    assert_eq!(h.s.claim_info(G, "m1").map(|i| i.deadline.0), Some(46_000));
    assert_eq!(h.s.stats().claims_received, 3);
}

#[test]
fn spec_claims_are_per_channel_and_message() {
    let mut h = H::abc(PolicyKind::Spec);
    h.join(0, "agent-a", "#other");
    h.claim(1000, "agent-a", "m1", 500);
    assert!(
        h.claim(1000, "agent-a", "m2", 500)
            .iter()
            .all(|o| o.msg.type_name() == "RESPONDING_TO")
    );
    let out = h.claim_as(1000, "agent-a", Role::Agent, "#other", "m1", 500);
    assert_eq!(to(&out), [("agent-d", "RESPONDING_TO")]);
    assert_eq!(h.s.claim_count(), 3);
}

#[test]
fn spec_expiry_exactly_at_deadline() {
    let mut h = H::with(Config {
        ttl_ms: 3000,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.join(0, "agent-b", G);
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), None);
    h.claim(1000, "agent-a", "m1", 500);
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), Some(4000));
    h.tick(3999);
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(500))));
    assert_eq!(h.s.stats().expired, 0);
    h.tick(4000);
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!(h.s.stats().expired, 1);
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), None);
    // Expired: a later claim is granted, no YIELD.
    let out = h.claim(4000, "agent-b", "m1", 900);
    assert_eq!(to(&out), [("agent-a", "RESPONDING_TO")]);
}

#[test]
fn expiry_runs_before_the_input_at_the_same_instant() {
    let mut h = H::with(Config {
        ttl_ms: 3000,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.join(0, "agent-b", G);
    h.claim(1000, "agent-a", "m1", 500);
    let out = h.claim(4000, "agent-b", "m1", 900);
    assert_eq!(to(&out), [("agent-a", "RESPONDING_TO")]);
    assert_eq!(h.holder(G, "m1"), Some(("agent-b", Stamp::Int(900))));
    assert_eq!(h.s.stats().expired, 1);
}

#[test]
fn spec_msg_from_holder_clears_its_claim_and_is_relayed() {
    let mut h = H::abc(PolicyKind::Spec);
    h.claim(1000, "agent-a", "m1", 500);
    h.claim(1000, "agent-a", "m2", 500);
    let out = h.msg(2000, "agent-a", G, Some("m1"));
    assert_eq!(to(&out), [("agent-b", "MSG"), ("agent-c", "MSG")]);
    assert_eq!(
        out[0].msg,
        ServerMsg::Msg {
            id: "s1".into(),
            from: "agent-a".into(),
            to: G.into(),
            content: "hello".into(),
            in_reply_to: Some("m1".into())
        }
    );
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!(h.holder(G, "m2"), Some(("agent-a", Stamp::Int(500))));
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), Some(46_000));
    // A MSG from a non-holder clears nothing.
    h.msg(2000, "agent-b", G, Some("m2"));
    assert_eq!(h.holder(G, "m2"), Some(("agent-a", Stamp::Int(500))));
    // Ids are assigned in order.
    let out = h.msg(2000, "agent-b", G, None);
    assert!(matches!(&out[0].msg, ServerMsg::Msg { id, .. } if id == "s3"));
}

#[test]
fn spec_msg_without_in_reply_to_clears_all_claims_of_sender_in_that_channel() {
    let mut h = H::abc(PolicyKind::Spec);
    h.join(0, "agent-a", "#other");
    h.claim(1000, "agent-a", "m1", 500);
    h.claim(1000, "agent-a", "m2", 500);
    h.claim(1000, "agent-b", "m3", 500);
    h.claim_as(1000, "agent-a", Role::Agent, "#other", "m4", 500);
    h.msg(2000, "agent-a", G, None);
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!(h.holder(G, "m2"), None);
    assert_eq!(h.holder(G, "m3"), Some(("agent-b", Stamp::Int(500))));
    assert_eq!(h.holder("#other", "m4"), Some(("agent-a", Stamp::Int(500))));
    assert_eq!(h.s.claim_count(), 2);
}

#[test]
fn client_supplied_msg_id_is_kept() {
    let mut h = H::abc(PolicyKind::Spec);
    let out = h.run(
        5,
        Input::Client {
            from: "agent-a".into(),
            role: Role::Agent,
            msg: ClientMsg::Msg {
                id: Some("mine".into()),
                to: G.into(),
                content: "x".into(),
                in_reply_to: None,
            },
        },
    );
    assert!(matches!(&out[0].msg, ServerMsg::Msg { id, .. } if id == "mine"));
}

#[test]
fn disconnect_clears_all_claims_and_memberships() {
    let mut h = H::abc(PolicyKind::Spec);
    h.join(0, "agent-a", "#other");
    h.claim(1000, "agent-a", "m1", 500);
    h.claim_as(1000, "agent-a", Role::Agent, "#other", "m2", 500);
    h.claim(1000, "agent-b", "m3", 500);
    // Each channel hears that the claim in it is gone.
    let out = h.run(
        1500,
        Input::Disconnect {
            agent: "agent-a".into(),
        },
    );
    let released: Vec<(&str, &str, &str)> = out
        .iter()
        .map(|o| match &o.msg {
            ServerMsg::FloorReleased {
                msg_id,
                channel,
                holder,
            } if holder == "agent-a" => (o.to.as_str(), channel.as_str(), msg_id.as_str()),
            _ => ("", "", "not a release"),
        })
        .collect();
    assert_eq!(
        released,
        [
            ("agent-b", G, "m1"),
            ("agent-c", G, "m1"),
            ("agent-d", "#other", "m2")
        ]
    );
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!(h.holder("#other", "m2"), None);
    assert_eq!(h.holder(G, "m3"), Some(("agent-b", Stamp::Int(500))));
    assert_eq!(h.s.claim_count(), 1);
    assert!(!h.s.is_member("agent-a", G) && !h.s.is_member("agent-a", "#other"));
    assert_eq!(h.s.stats().expired, 0);
    // Relays no longer reach it.
    let out = h.msg(1600, "agent-b", G, None);
    assert_eq!(to(&out), [("agent-c", "MSG")]);
}

#[test]
fn leave_releases_claims_in_that_channel_under_spec() {
    let mut h = H::abc(PolicyKind::Spec);
    h.claim(1000, "agent-a", "m1", 500);
    h.run(
        1100,
        Input::Leave {
            agent: "agent-a".into(),
            channel: G.into(),
        },
    );
    assert_eq!(h.holder(G, "m1"), None);
    assert!(!h.s.is_member("agent-a", G));
    assert_eq!(h.s.members(G).collect::<Vec<_>>(), ["agent-b", "agent-c"]);
}

#[test]
fn dm_claims_create_nothing() {
    for p in PolicyKind::ALL {
        let mut h = H::abc(p);
        let out = h.claim_as(1000, "agent-a", Role::Agent, "@agent-b", "m1", 500);
        if p == PolicyKind::Agentchat036 {
            // `isValidChannel` (`lib/protocol.ts`) refuses a DM target.
            assert_eq!(error_code(&out), Some(("agent-a", "INVALID_MSG")));
        } else {
            assert!(out.is_empty(), "{p}");
        }
        assert_eq!(h.s.claim_count(), 0);
        assert_eq!(h.s.poll_timeout().map(Millis::as_ms), None);
        assert_eq!(h.s.stats().claims_received, 1);
    }
}

#[test]
fn dm_msg_goes_to_the_target_only_and_clears_nothing() {
    let mut h = H::abc(PolicyKind::Spec);
    h.claim(1000, "agent-a", "m1", 500);
    let out = h.msg(1100, "agent-a", "@agent-d", Some("m1"));
    assert_eq!(to(&out), [("agent-d", "MSG")]);
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(500))));
}

#[test]
fn the_operators_claim_takes_the_floor() {
    // Humans always get the floor: held whatever its started_at, later
    // agents' claims denied, a holder displaced; a repeat changes nothing.
    for p in [
        PolicyKind::Spec,
        PolicyKind::Tombstone,
        PolicyKind::ServerTime,
    ] {
        let mut h = H::abc(p);
        h.join(0, "operator", G);
        let out = h.claim_as(1000, "operator", Role::Operator, G, "m1", 9_000);
        assert_eq!(out.len(), 3, "{p}");
        assert!(out.iter().all(|o| o.msg.type_name() == "RESPONDING_TO"));
        assert_eq!(h.holder(G, "m1").map(|(a, _)| a), Some("operator"));
        let out = h.claim(1100, "agent-a", "m1", 500);
        let y = out.last().map(|o| (o.to.as_str(), &o.msg));
        assert!(
            matches!(y, Some(("agent-a", ServerMsg::Yield { winner, .. })) if winner == "operator"),
            "{p}: {out:?}"
        );
        assert_eq!(h.holder(G, "m1").map(|(a, _)| a), Some("operator"));
        assert!(
            h.claim_as(1200, "operator", Role::Operator, G, "m1", 9_100)
                .is_empty()
        );
        // An agent's live claim is displaced by the operator's.
        h.claim(1300, "agent-b", "m2", 500);
        let out = h.claim_as(1400, "operator", Role::Operator, G, "m2", 9_000);
        let y = out.last().map(|o| (o.to.as_str(), &o.msg));
        assert!(
            matches!(y, Some(("agent-b", ServerMsg::Yield { winner, .. })) if winner == "operator"),
            "{p}: {out:?}"
        );
        assert_eq!(h.s.stats().yields, 2);
        // The operator's answer releases it.
        h.msg(1500, "operator", G, Some("m1"));
        assert_eq!(h.holder(G, "m1"), None);
    }
    // agentchat-0.36 never relays raw claims and never tracks the
    // operator's: it is dropped (as the real server does).
    let mut h = H::abc(PolicyKind::Agentchat036);
    h.join(0, "operator", G);
    assert!(
        h.claim_as(1000, "operator", Role::Operator, G, "m1", 1)
            .is_empty()
    );
    assert_eq!(h.s.claim_count(), 0);
}

#[test]
fn disabled_tracking_still_relays_claims() {
    for p in PolicyKind::ALL {
        let mut h = H::with(Config {
            policy: p,
            enabled: false,
            ..unguarded()
        });
        for a in ["agent-a", "agent-b"] {
            h.join(0, a, G);
        }
        let out = h.claim(1000, "agent-a", "m1", 500);
        assert_eq!(
            out,
            [Outgoing {
                to: "agent-b".into(),
                msg: relayed_claim("m1", "agent-a", 500)
            }],
            "{p}"
        );
        let out = h.claim(1000, "agent-b", "m1", 400);
        assert_eq!(to(&out), [("agent-a", "RESPONDING_TO")]);
        assert_eq!(h.s.claim_count(), 0);
        assert_eq!(h.holder(G, "m1"), None);
        assert_eq!(h.s.stats().yields, 0);
        assert_eq!(h.s.poll_timeout().map(Millis::as_ms), None);
    }
}

#[test]
fn none_policy_is_a_plain_relay() {
    let mut h = H::abc(PolicyKind::None);
    h.claim(1000, "agent-a", "m1", 500);
    let out = h.claim(1000, "agent-b", "m1", 400);
    assert_eq!(
        to(&out),
        [("agent-a", "RESPONDING_TO"), ("agent-c", "RESPONDING_TO")]
    );
    assert_eq!(h.s.claim_count(), 0);
}

#[test]
fn non_member_claim_gets_error_and_processing_goes_on() {
    for p in [
        PolicyKind::Spec,
        PolicyKind::Tombstone,
        PolicyKind::ServerTime,
        PolicyKind::None,
    ] {
        let mut h = H::abc(p);
        let out = h.claim(1000, "agent-d", "m1", 500);
        assert_eq!(error_code(&out), Some(("agent-d", "not_member")), "{p}");
        assert_eq!(h.s.claim_count(), 0);
        let out = h.claim(1000, "agent-a", "m1", 500);
        assert_eq!(out.len(), 2, "{p}");
    }
}

#[test]
fn started_at_rules_per_policy() {
    let mut h = H::abc(PolicyKind::Spec);
    let out = h.claim(1000, "agent-a", "m1", -1);
    assert_eq!(error_code(&out), Some(("agent-a", "bad_started_at")));
    assert!(
        matches!(&out[0].msg, ServerMsg::Error { message, .. } if message == "`started_at` must be a non-negative integer")
    );
    assert_eq!(h.claim(1000, "agent-a", "m1", 0).len(), 2);
    let mut h = H::abc(PolicyKind::Agentchat036);
    let out = h.claim(1000, "agent-a", "m1", 0);
    assert_eq!(error_code(&out), Some(("agent-a", "INVALID_MSG")));
    assert_eq!(h.s.stats().claims_received, 1);
    assert_eq!(h.claim(1000, "agent-a", "m1", -7).len(), 2);
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(-7))));
}

#[test]
fn bad_channel_or_join_gets_error() {
    let mut h = H::abc(PolicyKind::Spec);
    let out = h.claim_as(1000, "agent-a", Role::Agent, "general", "m1", 5);
    assert_eq!(error_code(&out), Some(("agent-a", "bad_message")));
    let out = h.join(1000, "agent-a", "nope");
    assert_eq!(error_code(&out), Some(("agent-a", "bad_channel")));
    let out = h.msg(1000, "agent-a", "x", None);
    assert_eq!(error_code(&out), Some(("agent-a", "bad_message")));
    let out = h.msg(1000, "agent-d", G, None);
    assert_eq!(error_code(&out), Some(("agent-d", "not_member")));
    assert_eq!(h.s.stats().relayed, 4);
}

#[test]
fn raw_input_is_decoded_strictly() {
    let mut h = H::abc(PolicyKind::Spec);
    let mut out = Vec::new();
    h.s.run_frame(10, "agent-a", Role::Agent, b"{not json", &mut out);
    assert_eq!(error_code(&out), Some(("agent-a", "bad_message")));
    out.clear();
    h.s.run_frame(
        10,
        "agent-a",
        Role::Agent,
        br##"{"type":"RESPONDING_TO","msg_id":"m1","started_at":"5","channel":"#general"}"##,
        &mut out,
    );
    assert_eq!(
        out[0].msg,
        ServerMsg::Error {
            code: "bad_message".into(),
            message: "`started_at` must be an integer".into()
        }
    );
    assert_eq!(h.s.stats().claims_received, 1);
    out.clear();
    h.s.run_frame(
        10,
        "agent-a",
        Role::Agent,
        br##"{"type":"RESPONDING_TO","msg_id":"m1","started_at":5,"channel":"#general"}"##,
        &mut out,
    );
    assert_eq!(
        to(&out),
        [("agent-b", "RESPONDING_TO"), ("agent-c", "RESPONDING_TO")]
    );
}

/// One fault, two policies: the spec answers with the protocol's codes,
/// agentchat 0.36 with its own (`Rules::errors`) and, for a claim, its
/// texts, on every path that reads the error style.
#[test]
fn error_codes_follow_the_policys_error_style() {
    // (fault, raw bytes or `None` for a decoded claim with an empty
    // msg_id, agentchat's message when it is not the decoder's).
    type Fault<'a> = (&'a str, Option<&'a [u8]>, Option<&'a str>);
    let faults: [Fault; 6] = [
        // Not JSON: rejected before any field is decoded.
        ("not json", Some(b"{not json"), None),
        // A MSG whose `to` is neither a channel nor a DM peer.
        (
            "bad to",
            Some(br##"{"type":"MSG","to":"general","content":"x"}"##),
            None,
        ),
        // A claim with an empty `msg_id`, raw and already decoded (as
        // `serve` hands the floor a decoded message).
        (
            "empty msg_id",
            Some(br##"{"type":"RESPONDING_TO","msg_id":"","started_at":5,"channel":"#general"}"##),
            Some("Missing or invalid msg_id"),
        ),
        (
            "empty msg_id, decoded",
            None,
            Some("Missing or invalid msg_id"),
        ),
        // A claim without `started_at`.
        (
            "no started_at",
            Some(br##"{"type":"RESPONDING_TO","msg_id":"m1","channel":"#general"}"##),
            Some("Missing or invalid started_at timestamp"),
        ),
        // A claim without `channel`.
        (
            "no channel",
            Some(br##"{"type":"RESPONDING_TO","msg_id":"m1","started_at":5}"##),
            Some("Missing or invalid channel"),
        ),
    ];
    for (what, bytes, ac_message) in faults {
        let mut got = Vec::new();
        for p in [PolicyKind::Spec, PolicyKind::Agentchat036] {
            let mut h = H::abc(p);
            let out = match bytes {
                Some(bytes) => {
                    let mut out = Vec::new();
                    h.s.run_frame(10, "agent-a", Role::Agent, bytes, &mut out);
                    out
                }
                None => h.claim(10, "agent-a", "", 5),
            };
            assert_eq!(h.s.claim_count(), 0, "{what} {p}");
            let claim = ["msg_id", "started_at", "channel"]
                .iter()
                .any(|f| what.contains(f));
            assert_eq!(h.s.stats().claims_received, u64::from(claim), "{what} {p}");
            match &out[..] {
                [
                    Outgoing {
                        to,
                        msg: ServerMsg::Error { code, message },
                    },
                ] if to == "agent-a" => got.push((code.clone(), message.clone())),
                _ => panic!("{what} {p}: {out:?}"),
            }
        }
        assert_eq!(got[0].0, "bad_message", "{what}");
        assert_eq!(got[1].0, "INVALID_MSG", "{what}");
        match ac_message {
            Some(m) => assert_eq!(got[1].1, m, "{what}"),
            None => assert_eq!(got[1].1, got[0].1, "{what}"),
        }
    }
}

#[test]
fn time_never_goes_backwards() {
    let mut h = H::with(Config {
        ttl_ms: 1000,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.claim(5000, "agent-a", "m1", 1);
    h.tick(100);
    assert_eq!(h.s.now().as_ms(), 5000);
    assert_eq!(h.s.claim_info(G, "m1").map(|i| i.deadline.0), Some(6000));
}

#[test]
fn relayed_counts_every_send_but_yields() {
    let mut h = H::abc(PolicyKind::Spec);
    h.claim(1000, "agent-a", "m1", 500); // 2
    h.claim(1000, "agent-b", "m1", 600); // 2 + yield
    h.msg(1000, "agent-a", G, Some("m1")); // 2
    h.msg(1000, "agent-a", "@agent-b", None); // 1
    h.claim(1000, "agent-d", "m1", 1); // error: 1
    let s = h.s.stats();
    assert_eq!((s.relayed, s.yields), (8, 1));
}

// ------------------------------------------------------------ agentchat-0.36

#[test]
fn agentchat_grant_broadcasts_floor_claimed_and_winner_gets_nothing() {
    let mut h = H::abc(PolicyKind::Agentchat036);
    let out = h.claim(1000, "agent-a", "m1", 500);
    assert_eq!(
        to(&out),
        [("agent-b", "FLOOR_CLAIMED"), ("agent-c", "FLOOR_CLAIMED")]
    );
    assert_eq!(
        out[0].msg,
        ServerMsg::FloorClaimed {
            msg_id: "m1".into(),
            channel: G.into(),
            holder: "agent-a".into(),
            started_at: 500.into()
        }
    );
}

#[test]
fn agentchat_takeover_tells_everyone_but_claimant_then_yields_displaced() {
    let mut h = H::abc(PolicyKind::Agentchat036);
    h.claim(1000, "agent-b", "m1", 600);
    let out = h.claim(1100, "agent-c", "m1", 500);
    assert_eq!(
        to(&out),
        [
            ("agent-a", "FLOOR_CLAIMED"),
            ("agent-b", "FLOOR_CLAIMED"),
            ("agent-b", "YIELD")
        ]
    );
    assert_eq!(
        out[2].msg,
        yield_ac("m1", "agent-c", 500, "Earlier started_at timestamp")
    );
    assert_eq!(
        out[2].msg.to_json_string(),
        r##"{"type":"YIELD","msg_id":"m1","channel":"#general","holder":"agent-c","holder_started_at":500,"reason":"Earlier started_at timestamp"}"##
    );
    assert_eq!(h.s.stats().overruled, 1);
}

#[test]
fn agentchat_denied_claim_gets_yield_and_nothing_is_broadcast() {
    let mut h = H::abc(PolicyKind::Agentchat036);
    h.claim(1000, "agent-a", "m1", 500);
    let out = h.claim(1100, "agent-b", "m1", 600);
    assert_eq!(
        out,
        [Outgoing {
            to: "agent-b".into(),
            msg: yield_ac("m1", "agent-a", 500, "Another agent claimed first")
        }]
    );
    // Tie on started_at, larger id: denied too.
    let out = h.claim(1100, "agent-c", "m1", 500);
    assert_eq!(to(&out), [("agent-c", "YIELD")]);
}

#[test]
fn agentchat_repeated_claim_by_holder() {
    let mut h = H::abc(PolicyKind::Agentchat036);
    h.claim(1000, "agent-a", "m1", 500);
    // Same or later started_at: denied, YIELD naming itself.
    for s in [500, 700] {
        let out = h.claim(1100, "agent-a", "m1", s);
        assert_eq!(
            out,
            [Outgoing {
                to: "agent-a".into(),
                msg: yield_ac("m1", "agent-a", 500, "Another agent claimed first")
            }]
        );
    }
    // Earlier: granted again (rebroadcast, fresh deadline), still a YIELD naming itself.
    let out = h.claim(2000, "agent-a", "m1", 400);
    assert_eq!(
        to(&out),
        [
            ("agent-b", "FLOOR_CLAIMED"),
            ("agent-c", "FLOOR_CLAIMED"),
            ("agent-a", "YIELD")
        ]
    );
    assert_eq!(
        out[2].msg,
        yield_ac("m1", "agent-a", 400, "Earlier started_at timestamp")
    );
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(400))));
    assert_eq!(h.s.claim_info(G, "m1").map(|i| i.deadline.0), Some(47_000));
    assert_eq!(h.s.stats().overruled, 0);
    assert_eq!(h.s.stats().yields, 3);
}

#[test]
fn agentchat_non_members_may_claim_unknown_channels_are_ignored() {
    let mut h = H::abc(PolicyKind::Agentchat036);
    let out = h.claim(1000, "agent-d", "m1", 500);
    assert_eq!(
        to(&out),
        [
            ("agent-a", "FLOOR_CLAIMED"),
            ("agent-b", "FLOOR_CLAIMED"),
            ("agent-c", "FLOOR_CLAIMED")
        ]
    );
    assert_eq!(h.holder(G, "m1"), Some(("agent-d", Stamp::Int(500))));
    let out = h.claim_as(1000, "agent-a", Role::Agent, "#nowhere", "m1", 500);
    assert!(out.is_empty());
    assert_eq!(h.s.claim_count(), 1);
}

#[test]
fn agentchat_expired_claim_wins_until_the_sweep() {
    let mut h = H::with(Config {
        policy: PolicyKind::Agentchat036,
        ttl_ms: 3000,
        enabled: true,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.join(0, "agent-b", G);
    h.claim(1000, "agent-a", "m1", 500); // deadline 4000
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), Some(5000));
    h.tick(4500);
    // Past its deadline, not swept yet: still holds, and still wins.
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(500))));
    let out = h.claim(4500, "agent-b", "m1", 900);
    assert_eq!(to(&out), [("agent-b", "YIELD")]);
    assert_eq!(h.s.stats().expired, 0);
    h.tick(4999);
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(500))));
    h.tick(5000);
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!(h.s.stats().expired, 1);
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), None);
}

#[test]
fn agentchat_sweep_due_with_a_claim_runs_first() {
    let mut h = H::with(Config {
        policy: PolicyKind::Agentchat036,
        ttl_ms: 3000,
        enabled: true,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.join(0, "agent-b", G);
    h.claim(1000, "agent-a", "m1", 500);
    let out = h.claim(5000, "agent-b", "m1", 900);
    assert_eq!(to(&out), [("agent-a", "FLOOR_CLAIMED")]);
    assert_eq!(h.holder(G, "m1"), Some(("agent-b", Stamp::Int(900))));
    // A claim whose deadline is exactly a sweep time goes at that sweep.
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), Some(10_000));
}

#[test]
fn agentchat_msg_releases_all_claims_in_channel_whatever_in_reply_to() {
    let mut h = H::abc(PolicyKind::Agentchat036);
    h.join(0, "agent-a", "#other");
    h.claim(1000, "agent-a", "m1", 500);
    h.claim(1000, "agent-a", "m2", 500);
    h.claim_as(1000, "agent-a", Role::Agent, "#other", "m3", 500);
    h.msg(2000, "agent-a", G, Some("unrelated"));
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!(h.holder(G, "m2"), None);
    assert_eq!(h.holder("#other", "m3"), Some(("agent-a", Stamp::Int(500))));
    // Leaving releases nothing under agentchat-0.36.
    h.run(
        2100,
        Input::Leave {
            agent: "agent-a".into(),
            channel: "#other".into(),
        },
    );
    assert_eq!(h.holder("#other", "m3"), Some(("agent-a", Stamp::Int(500))));
}

// ------------------------------------------------------------ tombstone

#[test]
fn tombstone_marker_denies_later_claims_until_the_deadline() {
    let mut h = H::with(Config {
        policy: PolicyKind::Tombstone,
        ttl_ms: 10_000,
        enabled: true,
        ..unguarded()
    });
    for a in ["agent-a", "agent-b", "agent-c"] {
        h.join(0, a, G);
    }
    h.claim(1000, "agent-b", "m1", 500); // deadline 11000
    h.msg(3000, "agent-b", G, Some("m1"));
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!((h.s.claim_count(), h.s.marker_count()), (0, 1));
    // Even an earlier started_at is denied; the claim is still relayed.
    let out = h.claim(3100, "agent-a", "m1", 1);
    assert_eq!(
        to(&out),
        [
            ("agent-b", "RESPONDING_TO"),
            ("agent-c", "RESPONDING_TO"),
            ("agent-a", "YIELD")
        ]
    );
    assert_eq!(out[2].msg, yield_spec("m1", "agent-b"));
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), Some(11_000));
    h.tick(11_000);
    assert_eq!(h.s.marker_count(), 0);
    assert_eq!(h.s.stats().expired, 0);
    let out = h.claim(11_000, "agent-a", "m1", 1);
    assert_eq!(out.len(), 2);
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(1))));
}

#[test]
fn tombstone_only_the_live_holders_reply_makes_a_marker() {
    let mut h = H::abc(PolicyKind::Tombstone);
    h.claim(1000, "agent-a", "m1", 500);
    h.msg(2000, "agent-b", G, Some("m1")); // not the holder
    assert_eq!((h.s.claim_count(), h.s.marker_count()), (1, 0));
    h.msg(2000, "agent-a", G, None); // no in_reply_to: plain release
    assert_eq!((h.s.claim_count(), h.s.marker_count()), (0, 0));
    h.claim(3000, "agent-a", "m2", 500);
    h.run(
        3100,
        Input::Disconnect {
            agent: "agent-a".into(),
        },
    );
    assert_eq!((h.s.claim_count(), h.s.marker_count()), (0, 0));
}

#[test]
fn spec_grants_a_claim_arriving_just_after_the_winners_msg() {
    let mut h = H::abc(PolicyKind::Spec);
    h.claim(1000, "agent-b", "m1", 500);
    h.msg(3000, "agent-b", G, Some("m1"));
    let out = h.claim(3001, "agent-a", "m1", 1);
    assert!(out.iter().all(|o| o.msg.type_name() == "RESPONDING_TO"));
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(1))));
}

// ------------------------------------------------------------ server-time

#[test]
fn server_time_orders_by_receive_time() {
    let mut h = H::abc(PolicyKind::ServerTime);
    h.claim(1000, "agent-b", "m1", 9_999); // skewed clock, late started_at
    let out = h.claim(1001, "agent-a", "m1", 1); // earlier started_at, later arrival
    assert_eq!(
        out.last().map(|o| (&*o.to, &o.msg)),
        Some(("agent-a", &yield_spec("m1", "agent-b")))
    );
    assert_eq!(h.holder(G, "m1"), Some(("agent-b", Stamp::Int(9_999))));
    // Same receive millisecond: the smaller id wins.
    h.claim(2000, "agent-c", "m2", 5);
    let out = h.claim(2000, "agent-a", "m2", 50);
    assert_eq!(
        out.last().map(|o| (&*o.to, &o.msg)),
        Some(("agent-c", &yield_spec("m2", "agent-a")))
    );
}

#[test]
fn tombstone_marker_reaching_its_deadline_with_an_input_is_removed_silently() {
    // Found by the property test: a marker due at the same instant as a
    // (DM) claim is removed first, counted neither as expired nor as a claim.
    let mut h = H::with(Config {
        policy: PolicyKind::Tombstone,
        ttl_ms: 827,
        enabled: true,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.claim(0, "agent-a", "m1", 0);
    h.msg(355, "agent-a", G, Some("m1"));
    assert_eq!((h.s.claim_count(), h.s.marker_count()), (0, 1));
    let out = h.claim_as(827, "agent-a", Role::Agent, "@agent-a", "m1", 0);
    assert!(out.is_empty());
    assert_eq!((h.s.claim_count(), h.s.marker_count()), (0, 0));
    assert_eq!(h.s.stats().expired, 0);
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), None);
}

/// `AGENTCHAT_CLAIM_TTL_MS` as the server's `parseInt` reads it.
#[test]
fn agentchat_ttl_is_parsed_like_parse_int() {
    use crate::server::{NEVER, agentchat_ttl};
    assert_eq!(agentchat_ttl(""), 45_000);
    assert_eq!(agentchat_ttl("   "), 45_000);
    assert_eq!(agentchat_ttl("0"), 0);
    assert_eq!(agentchat_ttl("-5"), 0);
    assert_eq!(agentchat_ttl(" 30000ms"), 30_000);
    assert_eq!(agentchat_ttl("+12"), 12);
    assert_eq!(agentchat_ttl("1e3"), 1);
    assert_eq!(agentchat_ttl("soon"), NEVER);
    assert_eq!(agentchat_ttl("-"), NEVER);
    // Beyond u64 is a finite TTL (JavaScript's 1e23), not NaN's "never".
    assert_eq!(agentchat_ttl("99999999999999999999999"), NEVER - 1);
    let vars = |v: &str| {
        let v = v.to_string();
        Config::from_vars(PolicyKind::Agentchat036, move |k| {
            (k == "AGENTCHAT_CLAIM_TTL_MS").then(|| v.clone())
        })
    };
    assert_eq!(vars("soon").map(|c| c.ttl_ms), Ok(NEVER));
    assert_eq!(vars("0").map(|c| c.ttl_ms), Ok(0));
    // A claim that never expires is not in the timer index.
    let mut h = H::with(Config {
        policy: PolicyKind::Agentchat036,
        ttl_ms: NEVER,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.claim(1000, "agent-a", "m1", 5);
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), None);
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(5))));
}

/// Sweeps at a phase and with drift: poll_timeout names the first sweep at
/// or after the deadline, rounded up to the ms.
#[test]
fn agentchat_sweeps_follow_phase_and_drift() {
    let mut h = H::with(Config {
        policy: PolicyKind::Agentchat036,
        ttl_ms: 3000,
        sweep_phase_ms: 1200,
        sweep_drift_us: 700,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.claim(1000, "agent-a", "m1", 5);
    // Deadline 4000; sweeps at 1200, 6200.7, ...: the first at or after it
    // is at 6200.7 ms, so due at 6201.
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), Some(6201));
    let mut out = Vec::new();
    h.s.run_owned(6200, Input::Tick, &mut out);
    assert_eq!(h.s.claim_count(), 1);
    h.s.run_owned(6201, Input::Tick, &mut out);
    assert_eq!(h.s.claim_count(), 0);
    assert_eq!(h.s.stats().expired, 1);
}

/// Frames decoded at the edge send what the typed inputs send, and
/// [`Sends`] appends, with one payload per relay (its recipients share
/// it), under every policy.
#[test]
fn frames_and_sends_match_typed_inputs() {
    let inputs = |m: &str| -> Vec<(u64, Input)> {
        let claim = |a: &str, s: i64| Input::Client {
            from: a.into(),
            role: Role::Agent,
            msg: ClientMsg::RespondingTo {
                msg_id: m.into(),
                started_at: s.into(),
                channel: G.into(),
            },
        };
        vec![
            (10, claim("agent-b", 1_000)),
            (20, claim("agent-a", 900)),
            (30, claim("agent-c", 2_000)),
            (
                40,
                Input::Client {
                    from: "agent-a".into(),
                    role: Role::Agent,
                    msg: ClientMsg::Msg {
                        id: None,
                        to: G.into(),
                        content: "answer".into(),
                        in_reply_to: Some(m.into()),
                    },
                },
            ),
            (50, claim("agent-b", 3_000)),
            (60_000, Input::Tick),
        ]
    };
    for p in PolicyKind::ALL {
        let (mut owned, mut values, mut grouped) = (H::abc(p), H::abc(p), H::abc(p));
        for (t, input) in inputs("m1") {
            let want = owned.run(t, input.clone());
            let mut got = Vec::new();
            match &input {
                Input::Client { from, role, msg } => {
                    let value: serde_json::Value =
                        serde_json::from_str(&msg.to_string()).expect("a client message is JSON");
                    values.s.run_value(t, from, *role, &value, &mut got);
                }
                _ => values.s.run_owned(t, input.clone(), &mut got),
            }
            assert_eq!(got, want, "{p} at {t}: decoded frame");
            // Appended to what is there.
            let mut sends = Sends::new();
            grouped.s.handle(Millis(t), Input::Tick, &mut sends);
            let before = sends.len();
            grouped.s.handle(Millis(t), input.clone(), &mut sends);
            assert_eq!(sends.len(), before + want.len(), "{p} at {t}: appended");
            assert_eq!(sends.is_empty(), sends.sends().is_empty(), "{p} at {t}");
            assert_eq!(sends.len(), sends.sends().len());
            let fresh = &sends.sends()[before..];
            for pair in fresh.windows(2) {
                let msg = |i: u32| &sends.payloads()[i as usize];
                if msg(pair[0].1) == msg(pair[1].1) {
                    assert_eq!(pair[0].1, pair[1].1, "{p}: one payload");
                }
            }
            let expanded: Vec<Outgoing> = sends
                .iter()
                .skip(before)
                .map(|(to, msg)| Outgoing {
                    to: to.clone(),
                    msg: msg.clone(),
                })
                .collect();
            assert_eq!(expanded, want, "{p} at {t}: sends");
            sends.clear();
            assert!(sends.is_empty() && sends.payloads().is_empty());
        }
        assert_eq!(owned.s.stats(), values.s.stats(), "{p}");
        assert_eq!(owned.s.stats(), grouped.s.stats(), "{p}");
    }
}

// ------------------------------------------------------------ internals
// The member list, the flat claim keys and the holder index (issue 14).

#[test]
fn relays_go_to_members_in_id_order_whatever_the_join_order() {
    let mut h = H::new(PolicyKind::Spec);
    for a in ["agent-c", "agent-9", "agent-a", "agent-10", "agent-b"] {
        h.join(0, a, G);
    }
    h.join(0, "agent-a", G); // joining twice changes nothing
    let ids = ["agent-10", "agent-9", "agent-a", "agent-b", "agent-c"];
    assert_eq!(h.s.members(G).collect::<Vec<_>>(), ids);
    for sender in ids {
        let out = h.msg(10, sender, G, None);
        let want: Vec<_> = ids
            .iter()
            .filter(|&&a| a != sender)
            .map(|&a| (a, "MSG"))
            .collect();
        assert_eq!(to(&out), want, "from {sender}");
    }
    // A claim from the first and the last member, then after a leave.
    let out = h.claim(20, "agent-10", "m1", 5);
    assert_eq!(to(&out).len(), 4);
    assert_eq!(out[0].to, "agent-9");
    h.run(
        30,
        Input::Leave {
            agent: "agent-9".into(),
            channel: G.into(),
        },
    );
    let out = h.msg(40, "agent-c", G, None);
    assert_eq!(
        to(&out),
        [("agent-10", "MSG"), ("agent-a", "MSG"), ("agent-b", "MSG")]
    );
}

#[test]
fn a_non_member_sender_reaches_every_member() {
    // agentchat-0.36 lets non-members claim: the FLOOR_CLAIMED skips no one.
    let mut h = H::abc(PolicyKind::Agentchat036);
    let out = h.claim(10, "agent-d", "m1", 5);
    assert_eq!(
        to(&out),
        [
            ("agent-a", "FLOOR_CLAIMED"),
            ("agent-b", "FLOOR_CLAIMED"),
            ("agent-c", "FLOOR_CLAIMED")
        ]
    );
}

#[test]
fn member_lookups_stay_right_as_the_list_changes() {
    let mut h = H::abc(PolicyKind::Spec);
    let leave = |h: &mut H, a: &str| {
        h.run(
            0,
            Input::Leave {
                agent: a.into(),
                channel: G.into(),
            },
        )
    };
    assert!(h.s.is_member("agent-c", G));
    leave(&mut h, "agent-a");
    // agent-c moved from position 2 to 1; position 2 no longer exists.
    assert!(h.s.is_member("agent-c", G) && h.s.is_member("agent-b", G));
    assert!(!h.s.is_member("agent-a", G) && !h.s.is_member("agent-d", G));
    h.join(0, "agent-a", G);
    h.join(0, "agent-bb", G);
    for a in ["agent-a", "agent-b", "agent-bb", "agent-c"] {
        assert!(h.s.is_member(a, G), "{a}");
    }
    assert!(!h.s.is_member("agent-", G) && !h.s.is_member("agent-ba", G));
    let out = h.msg(5, "agent-bb", G, None);
    assert_eq!(
        to(&out),
        [("agent-a", "MSG"), ("agent-b", "MSG"), ("agent-c", "MSG")]
    );
}

#[test]
fn releases_touch_only_that_agents_claims_in_that_channel() {
    // Ids that are prefixes of one another, and "m10" < "m9" as strings.
    let mut h = H::new(PolicyKind::Spec);
    for (a, ch) in [
        ("agent-a", G),
        ("agent-ab", G),
        ("agent-b", G),
        ("agent-a", "#g"),
        ("agent-a", "#generalx"),
        ("agent-ab", "#g"),
    ] {
        h.join(0, a, ch);
    }
    let claims = [
        ("agent-a", G, "m9"),
        ("agent-a", G, "m10"),
        ("agent-ab", G, "m1"),
        ("agent-b", G, "m2"),
        ("agent-a", "#g", "m9"),
        ("agent-a", "#generalx", "m9"),
        ("agent-ab", "#g", "m10"),
    ];
    for (a, ch, m) in claims {
        h.claim_as(100, a, Role::Agent, ch, m, 50);
    }
    assert_eq!(h.s.claim_count(), 7);
    h.msg(200, "agent-a", G, None);
    let held = |h: &H| -> Vec<(&str, &str)> {
        claims
            .iter()
            .filter(|(_, ch, m)| h.holder(ch, m).is_some())
            .map(|&(a, ch, _)| (a, ch))
            .collect()
    };
    assert_eq!(
        held(&h),
        [
            ("agent-ab", G),
            ("agent-b", G),
            ("agent-a", "#g"),
            ("agent-a", "#generalx"),
            ("agent-ab", "#g")
        ]
    );
    assert_eq!(h.s.claim_count(), 5);
    h.run(
        300,
        Input::Disconnect {
            agent: "agent-a".into(),
        },
    );
    assert_eq!(
        held(&h),
        [("agent-ab", G), ("agent-b", G), ("agent-ab", "#g")]
    );
    assert_eq!(h.s.claim_count(), 3);
    // The deadline index went with them: the next timer is the survivors'.
    assert_eq!(
        h.s.poll_timeout().map(Millis::as_ms),
        Some(100 + DEFAULT_TTL_MS)
    );
    h.tick(100 + DEFAULT_TTL_MS);
    assert_eq!((h.s.claim_count(), h.s.stats().expired), (0, 3));
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), None);
}

// ------------------------------------------------------------ claim guard

impl H {
    /// A channel MSG from `a` with the id `id`.
    fn post(&mut self, t: u64, a: &str, id: &str) -> Vec<Outgoing> {
        self.run(
            t,
            Input::Client {
                from: a.into(),
                role: Role::Agent,
                msg: ClientMsg::Msg {
                    id: Some(id.into()),
                    to: G.into(),
                    content: "q".into(),
                    in_reply_to: None,
                },
            },
        )
    }
}

fn guarded(p: PolicyKind, guard: ClaimGuard) -> H {
    let mut h = H::with(Config {
        policy: p,
        claim_guard: guard,
        ..unguarded()
    });
    for a in ["agent-a", "agent-b", "agent-c"] {
        h.join(0, a, G);
    }
    h
}

#[test]
fn claim_guard_is_relayed_by_default_and_off_changes_nothing() {
    assert_eq!(Config::default().claim_guard, ClaimGuard::Relayed);
    for p in PolicyKind::ALL {
        let want = match p {
            PolicyKind::Agentchat036 => ClaimGuard::Off,
            _ => ClaimGuard::Relayed,
        };
        assert_eq!(Config::for_policy(p).claim_guard, want, "{p:?}");
        assert_eq!(
            Config::from_vars(p, |_| None).map(|c| c.claim_guard),
            Ok(want)
        );
    }
    let mut h = H::abc(PolicyKind::Spec);
    // A claim for a message never relayed is granted, as the spec says.
    assert_eq!(to(&h.claim(1, "agent-a", "future", 0)).len(), 2);
    assert_eq!(h.s.relays_remembered(), 0);
    assert_eq!(h.s.stats().claims_refused, 0);
}

#[test]
fn relayed_guard_refuses_a_claim_before_its_message() {
    for p in [
        PolicyKind::Spec,
        PolicyKind::Tombstone,
        PolicyKind::ServerTime,
    ] {
        let mut h = guarded(p, ClaimGuard::Relayed);
        let out = h.claim(1, "agent-a", "m1", 5);
        assert_eq!(error_code(&out), Some(("agent-a", "not_relayed")), "{p:?}");
        assert_eq!(h.holder(G, "m1"), None);
        // Relayed in another channel does not count.
        h.join(2, "agent-a", "#other");
        h.run(
            2,
            Input::Client {
                from: "agent-a".into(),
                role: Role::Agent,
                msg: ClientMsg::Msg {
                    id: Some("m1".into()),
                    to: "#other".into(),
                    content: "x".into(),
                    in_reply_to: None,
                },
            },
        );
        assert_eq!(
            error_code(&h.claim(3, "agent-b", "m1", 5)).map(|e| e.1),
            Some("not_relayed")
        );
        h.post(4, "agent-c", "m1");
        let out = h.claim(5, "agent-a", "m1", 5);
        assert!(error_code(&out).is_none(), "{out:?}");
        assert_eq!(h.holder(G, "m1").map(|(a, _)| a), Some("agent-a"));
        assert_eq!(h.s.stats().claims_refused, 2);
        assert_eq!(h.s.stats().claims_received, 3);
    }
}

#[test]
fn relayed_guard_uses_agentchat_codes_and_exempts_the_operator() {
    let mut h = guarded(PolicyKind::Agentchat036, ClaimGuard::Relayed);
    let out = h.claim(1, "agent-a", "m1", 5);
    assert_eq!(error_code(&out), Some(("agent-a", "INVALID_MSG")));
    // The operator's claim is never tracked, and never refused.
    let out = h.claim_as(2, "operator", Role::Operator, G, "m1", 5);
    assert!(error_code(&out).is_none(), "{out:?}");
    assert_eq!(
        h.s.claim_guard_refusal(Millis(2), Role::Operator, G, "m1", Stamp::Int(5)),
        None
    );
}

#[test]
fn relayed_guard_applies_to_claims_relayed_untracked() {
    // Under `none` a claim is relayed like a message: the guard keeps an
    // unrelayed one from being relayed.
    let mut h = guarded(PolicyKind::None, ClaimGuard::Relayed);
    let out = h.claim(1, "agent-a", "m1", 5);
    assert_eq!(error_code(&out), Some(("agent-a", "not_relayed")));
    h.post(2, "agent-b", "m1");
    assert_eq!(
        to(&h.claim(3, "agent-a", "m1", 5)),
        [("agent-b", "RESPONDING_TO"), ("agent-c", "RESPONDING_TO")]
    );
}

#[test]
fn clock_guard_refuses_a_claim_dated_before_the_relay_less_the_skew() {
    let epoch = 1_700_000_000_000;
    let guard = ClaimGuard::Clock {
        skew_ms: 1000,
        epoch_ms: epoch,
    };
    let mut h = guarded(PolicyKind::Spec, guard);
    h.post(5000, "agent-c", "m1");
    // The relay at server time 5000 is `epoch + 5000` on the clients' clock.
    let arrival = epoch + 5000;
    for (s, ok) in [
        (1, false),
        (arrival - 1001, false),
        (arrival - 1000, true),
        (arrival + 10, true),
    ] {
        let r =
            h.s.claim_guard_refusal(Millis(6000), Role::Agent, G, "m1", Stamp::Int(s));
        assert_eq!(r.is_none(), ok, "{s}: {r:?}");
        if let Some((code, message)) = r.map(|r| h.s.render(&r)) {
            assert_eq!(code, "bad_started_at");
            assert!(message.contains("1000 ms"), "{message}");
        }
    }
    // A float earlier than the floor is refused too.
    let f = Stamp::Float((arrival - 2000) as f64 + 0.5);
    assert!(
        h.s.claim_guard_refusal(Millis(6000), Role::Agent, G, "m1", f)
            .is_some()
    );
    let out = h.claim(6000, "agent-a", "m1", 1);
    assert_eq!(error_code(&out), Some(("agent-a", "bad_started_at")));
    let out = h.claim(6000, "agent-b", "m1", arrival);
    assert!(error_code(&out).is_none(), "{out:?}");
}

#[test]
fn the_guard_forgets_relays_after_ten_minutes_and_beyond_its_count() {
    let mut h = guarded(PolicyKind::Spec, ClaimGuard::Relayed);
    h.post(0, "agent-c", "old");
    assert!(
        h.s.claim_guard_refusal(
            Millis(RELAY_MEMORY_MS),
            Role::Agent,
            G,
            "old",
            Stamp::Int(0)
        )
        .is_none()
    );
    assert!(
        h.s.claim_guard_refusal(
            Millis(RELAY_MEMORY_MS + 1),
            Role::Agent,
            G,
            "old",
            Stamp::Int(0)
        )
        .is_some()
    );
    // A later relay forgets what is older than the memory.
    h.post(RELAY_MEMORY_MS + 1, "agent-c", "new");
    assert_eq!(h.s.relays_remembered(), 1);
    // Relayed again: remembered from the last relay.
    h.post(RELAY_MEMORY_MS + 2, "agent-c", "new");
    h.post(2 * RELAY_MEMORY_MS, "agent-c", "other");
    assert!(
        h.s.claim_guard_refusal(
            Millis(2 * RELAY_MEMORY_MS),
            Role::Agent,
            G,
            "new",
            Stamp::Int(0)
        )
        .is_none()
    );
    // At most RELAY_MEMORY_PER_SENDER relays of one sender, its oldest
    // forgotten first (the whole memory's bound is the relay memory's own
    // test, floor::relay_memory).
    let t = 2 * RELAY_MEMORY_MS;
    for i in 0..RELAY_MEMORY_PER_SENDER + 10 {
        h.post(t, "agent-c", &format!("x{i}"));
    }
    assert_eq!(h.s.relays_remembered(), RELAY_MEMORY_PER_SENDER);
    assert!(
        h.s.claim_guard_refusal(Millis(t), Role::Agent, G, "x0", Stamp::Int(0))
            .is_some()
    );
    let last = format!("x{}", RELAY_MEMORY_PER_SENDER + 9);
    assert!(
        h.s.claim_guard_refusal(Millis(t), Role::Agent, G, &last, Stamp::Int(0))
            .is_none()
    );
}

/// The id a channel MSG in `out` is relayed under, and who gets it.
fn relayed_ids(out: &[Outgoing]) -> Vec<(&str, &str)> {
    out.iter()
        .filter_map(|o| match &o.msg {
            ServerMsg::Msg { id, .. } => Some((o.to.as_str(), id.as_str())),
            _ => None,
        })
        .collect()
}

/// Issue 39, item 5, and issue 47, item 3: a client posts a message under
/// the id the next real one will have and claims it. Under the guard an id
/// stands for one sender's message: the real one is relayed under the
/// server's next id (and echoed to its sender, so it learns the id), not
/// refused, so the squatter can neither hold its floor nor block it; the
/// server's own ids cannot be taken, and a claim on the squatter's message
/// is not a claim on any other.
#[test]
fn the_guard_keeps_a_clients_own_post_from_taking_anothers_id() {
    for guard in [
        ClaimGuard::Relayed,
        ClaimGuard::Clock {
            skew_ms: 1000,
            epoch_ms: 0,
        },
    ] {
        let mut h = guarded(PolicyKind::Spec, guard);
        h.join(0, "operator", G);
        // The squatter posts "m1" and claims it, honestly dated.
        assert_eq!(to(&h.post(1, "agent-c", "m1")).len(), 3);
        assert!(error_code(&h.claim(2, "agent-c", "m1", 2)).is_none());
        // The operator's "m1": relayed under s1 to every member, and
        // echoed to the operator; no ERROR.
        let out = h.run(
            3,
            Input::Client {
                from: "operator".into(),
                role: Role::Operator,
                msg: ClientMsg::Msg {
                    id: Some("m1".into()),
                    to: G.into(),
                    content: "q".into(),
                    in_reply_to: None,
                },
            },
        );
        assert_eq!(
            relayed_ids(&out),
            [
                ("operator", "s1"),
                ("agent-a", "s1"),
                ("agent-b", "s1"),
                ("agent-c", "s1")
            ],
            "{guard:?}"
        );
        assert_eq!(h.s.stats().ids_renamed, 1);
        assert!(h.s.msg_guard_refusal("operator", G, "m1").is_none());
        // The honest agent claims the operator's message and holds it: the
        // squatter's early claim is on its own decoy, not on s1.
        let out = h.claim(4, "agent-b", "s1", 4);
        assert!(!to(&out).contains(&("agent-b", "YIELD")), "{out:?}");
        assert_eq!(h.holder(G, "s1").map(|(a, _)| a), Some("agent-b"));
        assert_eq!(h.holder(G, "m1").map(|(a, _)| a), Some("agent-c"));
        // The squatter posting "m1" again is its own message (no new id).
        assert_eq!(relayed_ids(&h.post(5, "agent-c", "m1")).len(), 3);
        // The server's ids cannot be taken: "s2" is refused, and a MSG
        // without an id gets s2.
        assert_eq!(
            error_code(&h.post(6, "agent-c", "s2")),
            Some(("agent-c", "id_taken"))
        );
        assert_eq!(
            error_code(&h.post(6, "agent-c", "s12")),
            Some(("agent-c", "id_taken"))
        );
        assert!(error_code(&h.post(6, "agent-c", "s")).is_none());
        assert!(error_code(&h.post(6, "agent-c", "s1x")).is_none());
        let out = h.msg(7, "agent-a", G, None);
        assert!(
            matches!(&out[0].msg, ServerMsg::Msg { id, .. } if id == "s2"),
            "{out:?}"
        );
        assert_eq!(h.s.stats().refused_msgs, 2);
    }
    // A squatter on an agent's reply id (an answer's id is often
    // predictable) cannot block the answer either: renamed, relayed, and
    // it releases the answerer's claim as any answer does.
    let mut h = guarded(PolicyKind::Spec, ClaimGuard::Relayed);
    h.post(1, "agent-a", "q");
    h.claim(2, "agent-b", "q", 2);
    h.post(3, "agent-c", "q-answer");
    let out = h.run(
        4,
        Input::Client {
            from: "agent-b".into(),
            role: Role::Agent,
            msg: ClientMsg::Msg {
                id: Some("q-answer".into()),
                to: G.into(),
                content: "a".into(),
                in_reply_to: Some("q".into()),
            },
        },
    );
    assert_eq!(
        relayed_ids(&out),
        [("agent-b", "s1"), ("agent-a", "s1"), ("agent-c", "s1")]
    );
    assert_eq!(h.holder(G, "q"), None);
    // Once the squatter has disconnected (its claims released), its ids
    // are free: the operator's m1 is a new message under its own id.
    let mut h = guarded(PolicyKind::Spec, ClaimGuard::Relayed);
    h.post(1, "agent-c", "m1");
    h.claim(2, "agent-c", "m1", 2);
    h.claim(2, "agent-b", "m1", 3);
    h.run(
        3,
        Input::Disconnect {
            agent: "agent-c".into(),
        },
    );
    assert_eq!(
        relayed_ids(&h.post(4, "agent-a", "m1")),
        [("agent-b", "m1")]
    );
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!(h.s.stats().ids_renamed, 0);
    // Without the guard nothing changes: the same id is relayed twice.
    let mut off = H::abc(PolicyKind::Spec);
    assert_eq!(to(&off.post(1, "agent-c", "m1")).len(), 2);
    assert_eq!(to(&off.post(2, "agent-a", "m1")).len(), 2);
    assert_eq!(to(&off.post(2, "agent-a", "s1")).len(), 2);
}

/// A message relayed under an id the guard no longer remembers (its
/// sender's budget churned it out) is a new message: a claim left on that
/// id by the old one does not hold its floor.
#[test]
fn a_new_message_under_a_forgotten_id_drops_the_old_claim() {
    let mut h = guarded(PolicyKind::Spec, ClaimGuard::Relayed);
    h.post(1, "agent-c", "x");
    h.claim(2, "agent-c", "x", 2);
    // Its churn in another channel (a MSG in #general would release x).
    h.join(3, "agent-c", "#churn");
    for i in 0..RELAY_MEMORY_PER_SENDER {
        let msg = ClientMsg::Msg {
            id: Some(format!("churn{i}")),
            to: "#churn".into(),
            content: "c".into(),
            in_reply_to: None,
        };
        let from = "agent-c".into();
        h.run(
            3,
            Input::Client {
                from,
                role: Role::Agent,
                msg,
            },
        );
    }
    assert_eq!(h.holder(G, "x").map(|(a, _)| a), Some("agent-c"));
    // Forgotten, so not another's: relayed under its own id.
    assert_eq!(relayed_ids(&h.post(4, "agent-a", "x")).len(), 2);
    assert_eq!(h.holder(G, "x"), None);
    let out = h.claim(5, "agent-b", "x", 5);
    assert!(!to(&out).contains(&("agent-b", "YIELD")), "{out:?}");
    assert_eq!(h.holder(G, "x").map(|(a, _)| a), Some("agent-b"));
    // Its own message relayed again keeps its claims.
    h.post(6, "agent-a", "x");
    assert_eq!(h.holder(G, "x").map(|(a, _)| a), Some("agent-b"));
}

/// agentchat 0.36.19's flood limit, with [`Config::frame_limit`]: the 61st
/// input of an agent within 10 s is dropped and the agent disconnected
/// (its claims released, out of every channel); the operator is exempt;
/// off by default.
#[test]
fn agentchat_frame_limit_disconnects_the_61st_frame_in_ten_seconds() {
    let cfg = |frame_limit| Config {
        policy: PolicyKind::Agentchat036,
        frame_limit,
        ..unguarded()
    };
    let mut h = H::with(cfg(true));
    h.join(0, "agent-b", G); // agent-b: 1
    h.join(0, "agent-a", G); // agent-a: 1
    let out = h.claim(1, "agent-a", "m1", 1); // 2
    assert!(to(&out).contains(&("agent-b", "FLOOR_CLAIMED")), "{out:?}");
    for i in 0..58 {
        h.join(2 + i, "agent-a", G); // 3..60
    }
    assert_eq!(h.holder(G, "m1").map(|(a, _)| a), Some("agent-a"));
    assert_eq!(h.s.stats().frame_closed, 0);
    // The 61st within 10 s of the first: dropped, agent-a disconnected.
    assert!(h.claim(9_999, "agent-a", "m2", 1).is_empty());
    assert_eq!(h.s.stats().frame_closed, 1);
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!(h.holder(G, "m2"), None);
    assert!(!h.s.is_member("agent-a", G));
    // agent-b takes the released floor; the operator is never counted.
    let out = h.claim(10_000, "agent-b", "m1", 5);
    assert!(!to(&out).contains(&("agent-b", "YIELD")), "{out:?}");
    for i in 0..100 {
        h.claim_as(10_000 + i, "operator", Role::Operator, G, "m1", 1);
    }
    assert_eq!(h.s.stats().frame_closed, 1);
    // Off by default, and under every other policy.
    for (p, on) in [(PolicyKind::Agentchat036, false), (PolicyKind::Spec, true)] {
        let mut h = H::with(Config {
            policy: p,
            frame_limit: on,
            ..unguarded()
        });
        for i in 0..200 {
            h.join(i, "agent-a", G);
        }
        assert_eq!(h.s.stats().frame_closed, 0, "{p:?}");
        assert!(h.s.is_member("agent-a", G));
    }
}

#[test]
fn counts_for_the_serve_bounds() {
    let mut h = H::abc(PolicyKind::Agentchat036);
    assert_eq!(h.s.channels_of("agent-a"), 1);
    assert!(h.s.channel_exists("#general") && !h.s.channel_exists("#nope"));
    let defaults = h.s.channel_count();
    h.join(1, "agent-a", "#new");
    assert_eq!(h.s.channels_of("agent-a"), 2);
    assert_eq!(h.s.channel_count(), defaults + 1);
    h.claim(2, "agent-a", "m1", 5);
    h.claim(2, "agent-a", "m2", 5);
    h.claim(2, "agent-b", "m3", 5);
    assert_eq!(h.s.claims_held("agent-a"), 2);
    assert_eq!(h.s.claims_held("agent-b"), 1);
    assert_eq!(h.s.claims_held("agent-c"), 0);
    let mut spec = H::abc(PolicyKind::Spec);
    // Under spec a channel exists while it has members.
    assert_eq!(spec.s.channel_count(), 2);
    spec.run(
        3,
        Input::Disconnect {
            agent: "agent-d".into(),
        },
    );
    assert_eq!(spec.s.channel_count(), 1);
}

/// `agentchat-0.36` holds the double JavaScript parsed: a `started_at` of
/// 2^53 + 1 is echoed as 2^53 in FLOOR_CLAIMED and in a YIELD's
/// `holder_started_at`, as the real server sends it.
#[test]
fn agentchat_echoes_started_at_as_the_double_it_holds() {
    let big = 9_007_199_254_740_993_i64; // 2^53 + 1
    let held = 9_007_199_254_740_992_i64; // what a double holds
    let mut h = H::abc(PolicyKind::Agentchat036);
    let out = h.claim(10, "agent-b", "m1", big);
    let claimed: Vec<_> = out.iter().map(|o| &o.msg).collect();
    assert!(claimed.iter().all(|m| matches!(m,
        ServerMsg::FloorClaimed { started_at, .. } if *started_at == Stamp::Int(held))));
    assert_eq!(claimed.len(), 2, "{out:?}");
    assert!(
        out[0]
            .msg
            .to_json_string()
            .contains("\"started_at\":9007199254740992")
    );
    // A later claim is denied with the held value.
    let out = h.claim(20, "agent-c", "m1", big + 10);
    let y = out
        .iter()
        .find(|o| o.to.as_str() == "agent-c")
        .expect("a YIELD");
    assert_eq!(y.msg, yield_ac("m1", "agent-b", held, REASON_DENIED));
    // Under `spec` the integer is kept exactly.
    let mut h = H::abc(PolicyKind::Spec);
    let out = h.claim(10, "agent-b", "m1", big);
    assert_eq!(out[0].msg, relayed_claim("m1", "agent-b", big));
}

/// The operator is exempt from the `agentchat-0.36` rate limit unless
/// `rate_limit_operator` is set; then a second post within the limit is
/// refused (`RATE_LIMITED`) and relayed to nobody, as on the real server.
#[test]
fn operator_rate_limit_is_a_choice() {
    let post = |h: &mut H, t: u64| {
        h.run(
            t,
            Input::Client {
                from: "operator".into(),
                role: Role::Operator,
                msg: ClientMsg::Msg {
                    id: Some(format!("m{t}")),
                    to: G.into(),
                    content: "question".into(),
                    in_reply_to: None,
                },
            },
        )
    };
    for limited in [false, true] {
        let mut h = H::with(Config {
            policy: PolicyKind::Agentchat036,
            rate_limit_operator: limited,
            ..unguarded()
        });
        for a in ["operator", "agent-a", "agent-b"] {
            h.join(0, a, G);
        }
        assert_eq!(
            to(&post(&mut h, 100)),
            [("agent-a", "MSG"), ("agent-b", "MSG")]
        );
        let second = post(&mut h, 600);
        if limited {
            assert_eq!(error_code(&second), Some(("operator", "RATE_LIMITED")));
            assert_eq!(h.s.stats().rate_limited, 1);
        } else {
            assert_eq!(to(&second), [("agent-a", "MSG"), ("agent-b", "MSG")]);
        }
        // A second later it passes either way.
        assert_eq!(to(&post(&mut h, 1600)).len(), 2);
    }
    // Other policies have no rate limit at all.
    let mut h = H::with(Config {
        rate_limit_operator: true,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.join(0, "operator", G);
    assert_eq!(to(&post(&mut h, 100)), [("agent-a", "MSG")]);
    assert_eq!(to(&post(&mut h, 101)), [("agent-a", "MSG")]);
}

/// The sweep period is the configuration's: at 500 ms (a server run 10x
/// faster than real time) a claim expired at 3000 is swept at 3000, not 5000.
#[test]
fn agentchat_sweep_period_is_configurable() {
    for (every, swept_at) in [(5000, 5000), (500, 3000), (0, 3000)] {
        let mut h = H::with(Config {
            policy: PolicyKind::Agentchat036,
            ttl_ms: 2000,
            sweep_every_ms: every,
            ..unguarded()
        });
        h.join(0, "agent-a", G);
        h.claim(1000, "agent-a", "m1", 5);
        assert_eq!(
            h.s.poll_timeout().map(Millis::as_ms),
            Some(swept_at),
            "every {every}"
        );
        let mut out = Vec::new();
        h.s.run_owned(swept_at - 1, Input::Tick, &mut out);
        assert_eq!(h.s.claim_count(), 1, "every {every}");
        h.s.run_owned(swept_at, Input::Tick, &mut out);
        assert_eq!(h.s.claim_count(), 0, "every {every}");
    }
}

// ------------------------------------------------------------ mutation testing
// Gaps found by cargo-mutants (docs/testing.md, "Mutation testing").

/// `from_env` is `from_vars` reading the process environment, whatever
/// it holds.
#[test]
fn from_env_is_from_vars_on_the_process_environment() {
    for p in PolicyKind::ALL {
        assert_eq!(
            Config::from_env(p),
            Config::from_vars(p, |k| std::env::var(k).ok()),
            "{p}"
        );
    }
}

/// The names the scenario key and the flags use.
#[test]
fn claim_guard_names() {
    let clock = ClaimGuard::Clock {
        skew_ms: 1,
        epoch_ms: 2,
    };
    assert_eq!(
        [ClaimGuard::Off, ClaimGuard::Relayed, clock].map(ClaimGuard::name),
        ["off", "relayed", "clock"]
    );
}

/// A clone is an independent copy: the same members get the same sends,
/// and what happens to one leaves the other alone.
#[test]
fn a_cloned_server_is_an_independent_copy() {
    let mut h = H::abc(PolicyKind::Spec);
    let mut copy = H { s: h.s.clone() };
    let want = h.claim(10, "agent-a", "m1", 5);
    assert_eq!(want.len(), 2);
    assert_eq!(copy.claim(10, "agent-a", "m1", 5), want);
    assert_eq!(
        copy.msg(20, "agent-b", G, None),
        h.msg(20, "agent-b", G, None)
    );
    copy.join(30, "agent-e", G);
    assert!(copy.s.is_member("agent-e", G));
    assert!(!h.s.is_member("agent-e", G));
}

/// `Server::reject` (a message the caller could not decode) answers the
/// sender with the policy's error code and the reason, counts a claim
/// when it was one, and runs the timers due first.
#[test]
fn reject_answers_with_the_reason_and_counts_a_claim() {
    for (p, code) in [
        (PolicyKind::Spec, "bad_message"),
        (PolicyKind::Agentchat036, "INVALID_MSG"),
    ] {
        let mut h = H::abc(p);
        h.claim(0, "agent-a", "m1", 5);
        assert_eq!(h.s.claim_count(), 1);
        let reason = DecodeError::MissingField("msg_id");
        let bad = |error: &DecodeError, claim| Input::Undecodable {
            from: "agent-b".into(),
            error: error.clone(),
            claim,
        };
        let mut out = Vec::new();
        h.s.run_owned(7, bad(&reason, true), &mut out);
        // agentchat names the field of a claim (`validateClientMessage`).
        let message = match p {
            PolicyKind::Agentchat036 => "Missing or invalid msg_id",
            _ => "missing field `msg_id`",
        };
        assert_eq!(
            out,
            [Outgoing {
                to: "agent-b".into(),
                msg: ServerMsg::Error {
                    code: code.into(),
                    message: message.into()
                }
            }],
            "{p}"
        );
        assert_eq!(h.s.now().as_ms(), 7);
        assert_eq!(h.s.stats().claims_received, 2, "{p}");
        h.s.run_owned(8, bad(&DecodeError::NotObject, false), &mut out);
        assert_eq!(h.s.stats().claims_received, 2, "{p}");
        assert_eq!(out.len(), 2);
        // The timers due run first: the claim expires at its deadline.
        h.s.run_owned(DEFAULT_TTL_MS + 10_000, bad(&reason, false), &mut out);
        assert_eq!(h.s.claim_count(), 0, "{p}");
    }
}

/// The guard remembers the channel MSGs it relays, not DMs, and nothing
/// at all when it is off.
#[test]
fn the_guard_remembers_channel_msgs_only() {
    let mut h = guarded(PolicyKind::Spec, ClaimGuard::Relayed);
    assert_eq!(to(&h.msg(10, "agent-a", "@agent-b", None)).len(), 1);
    assert_eq!(h.s.relays_remembered(), 0);
    h.post(20, "agent-c", "m1");
    assert_eq!(h.s.relays_remembered(), 1);
    let mut off = H::abc(PolicyKind::Spec);
    off.post(20, "agent-c", "m1");
    assert_eq!(off.s.relays_remembered(), 0);
}

/// A relay is remembered for [`RELAY_MEMORY_MS`] exactly, also when a
/// later relay tidies the memory at that instant.
#[test]
fn the_guard_forgets_a_relay_only_after_its_memory() {
    let mut h = guarded(PolicyKind::Spec, ClaimGuard::Relayed);
    h.post(0, "agent-c", "old");
    h.post(RELAY_MEMORY_MS, "agent-c", "new");
    assert_eq!(h.s.relays_remembered(), 2);
    assert_eq!(
        h.s.claim_guard_refusal(
            Millis(RELAY_MEMORY_MS),
            Role::Agent,
            G,
            "old",
            Stamp::Int(0)
        ),
        None
    );
    h.post(RELAY_MEMORY_MS + 1, "agent-c", "newer");
    assert_eq!(h.s.relays_remembered(), 2);
}

/// A claim that never expires is held at any time, the last instant
/// there is included, as the arbitration treats it.
#[test]
fn a_claim_that_never_expires_is_held_even_at_the_last_instant() {
    let mut h = H::with(Config {
        ttl_ms: NEVER,
        ..unguarded()
    });
    for a in ["agent-a", "agent-b"] {
        h.join(0, a, G);
    }
    h.claim(1000, "agent-a", "m1", 5);
    h.tick(u64::MAX);
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(5))));
    let out = h.claim(u64::MAX, "agent-b", "m1", 9);
    assert_eq!(
        out.last().map(|o| &o.msg),
        Some(&yield_spec("m1", "agent-a"))
    );
}

/// `agentchat-0.36`'s rate limit refuses a MSG less than `rate_limit_ms`
/// after the sender's last one that passed; one exactly that long after
/// passes, and a refused one does not restart the wait.
#[test]
fn agentchat_rate_limit_ends_exactly_after_the_limit() {
    let mut h = H::abc(PolicyKind::Agentchat036);
    assert_eq!(to(&h.msg(1000, "agent-a", G, None)).len(), 2);
    let refused = h.msg(1999, "agent-a", G, None);
    assert_eq!(error_code(&refused), Some(("agent-a", "RATE_LIMITED")));
    assert_eq!(to(&h.msg(2000, "agent-a", G, None)).len(), 2);
    assert_eq!(h.s.stats().rate_limited, 1);
    assert_eq!(h.s.stats().refused_msgs, 1);
    // A limit of 0 limits nothing.
    let mut h = H::with(Config {
        policy: PolicyKind::Agentchat036,
        rate_limit_ms: 0,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.join(0, "agent-b", G);
    for _ in 0..3 {
        assert_eq!(to(&h.msg(1000, "agent-a", G, None)), [("agent-b", "MSG")]);
    }
    assert_eq!(h.s.stats().refused_msgs, 0);
}

/// `agentchat-0.36`: each sweep runs once. A claim granted at a sweep's
/// very instant, after it ran, waits for the next sweep: later inputs
/// before it do not sweep again, and the next wake is that sweep.
#[test]
fn agentchat_a_sweep_runs_once_even_for_a_claim_granted_at_its_instant() {
    let mut h = H::with(Config {
        policy: PolicyKind::Agentchat036,
        ttl_ms: 0,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.join(0, "agent-b", G);
    h.tick(5000); // the sweep of 5000 runs, with nothing to expire
    h.claim(5000, "agent-a", "m1", 1); // deadline 5000: already past
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(1))));
    assert_eq!(h.s.poll_timeout().map(Millis::as_ms), Some(10_000));
    h.tick(5000);
    h.tick(9999);
    assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(1))));
    assert_eq!(h.s.stats().expired, 0);
    h.tick(10_000);
    assert_eq!(h.holder(G, "m1"), None);
    assert_eq!(h.s.stats().expired, 1);
}

/// `agentchat-0.36` drops an agent's claim silently until the agent has
/// identified; other policies ignore identification.
#[test]
fn agentchat_drops_the_claims_of_unidentified_agents() {
    for p in [PolicyKind::Agentchat036, PolicyKind::Spec] {
        let mut h = H::abc(p);
        h.run(
            0,
            Input::Connect {
                agent: "agent-a".into(),
            },
        );
        let out = h.claim(10, "agent-a", "m1", 5);
        if p == PolicyKind::Agentchat036 {
            assert!(out.is_empty(), "{p}: {out:?}");
            assert_eq!(h.s.claim_count(), 0, "{p}");
            h.run(
                20,
                Input::Identify {
                    agent: "agent-a".into(),
                    lurk: false,
                },
            );
            assert!(!h.claim(30, "agent-a", "m1", 5).is_empty(), "{p}");
        } else {
            assert!(!out.is_empty(), "{p}");
        }
        assert_eq!(h.holder(G, "m1"), Some(("agent-a", Stamp::Int(5))), "{p}");
    }
}

/// The clock guard's floor is inclusive for doubles as for integers. A
/// double equal to the floor (an integer) exists only from 2^63 ms on,
/// where JSON numbers are no longer held as `i64`.
#[test]
fn clock_guard_accepts_a_double_exactly_at_the_floor() {
    let at = 5000;
    let guard = ClaimGuard::Clock {
        skew_ms: 0,
        epoch_ms: i64::MAX - (at as i64 - 1), // the floor is then 2^63
    };
    let mut h = guarded(PolicyKind::Spec, guard);
    h.post(at, "agent-c", "m1");
    let floor = 2f64.powi(63);
    let check = |h: &H, x: f64| {
        h.s.claim_guard_refusal(Millis(at), Role::Agent, G, "m1", Stamp::Float(x))
    };
    assert_eq!(check(&h, floor), None);
    assert!(check(&h, 2f64.powi(62)).is_some());
}

/// `agentchat-0.36` relays a MSG only to a channel that exists and of
/// which the sender is a member, and no DM; each refusal is an ERROR to
/// the sender, counted, and relays nothing.
#[test]
fn agentchat_refuses_msgs_to_dms_unknown_channels_and_channels_not_joined() {
    let mut h = H::abc(PolicyKind::Agentchat036);
    let refusals = [
        (0, "@agent-b", "INVALID_MSG"),
        (1000, "#nowhere", "CHANNEL_NOT_FOUND"),
        (2000, "#other", "NOT_INVITED"),
    ];
    for (t, target, code) in refusals {
        let out = h.msg(t, "agent-a", target, None);
        assert_eq!(error_code(&out), Some(("agent-a", code)), "{target}");
    }
    assert_eq!(h.s.stats().refused_msgs, 3);
    assert_eq!(
        to(&h.msg(3000, "agent-a", G, None)),
        [("agent-b", "MSG"), ("agent-c", "MSG")]
    );
}

#[test]
fn ttl_audit_counts_the_age_of_released_claims_and_ends_at_an_expiry() {
    let mut h = H::with(Config {
        ttl_ms: 3000,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.join(0, "agent-b", G);
    assert_eq!(h.s.ttl_audit().same_from(), Some(0));
    // Granted at 1000, released by its holder's reply at 3999: any TTL
    // above 2999 ms keeps it until then.
    h.claim(1000, "agent-a", "m1", 500);
    // A claim in the table may still expire under a shorter TTL.
    assert_eq!(h.s.ttl_audit().same_from(), None);
    h.msg(3999, "agent-a", G, Some("m1"));
    assert_eq!(h.s.ttl_audit().same_from(), Some(3000));
    // Displaced 500 ms after its grant: no higher bound than before.
    h.claim(5000, "agent-a", "m2", 5000);
    h.claim(5500, "agent-b", "m2", 4000);
    h.msg(6000, "agent-b", G, Some("m2"));
    assert_eq!(h.s.ttl_audit().same_from(), Some(3000));
    // A claim that reaches its deadline makes the run depend on the TTL.
    h.claim(10_000, "agent-a", "m3", 10_000);
    h.tick(13_000);
    assert_eq!(h.s.stats().expired, 1);
    assert_eq!(h.s.ttl_audit().same_from(), None);
}

#[test]
fn ttl_audit_counts_a_tombstone_marker_that_lives_out_its_ttl() {
    let mut h = H::with(Config {
        policy: PolicyKind::Tombstone,
        ttl_ms: 3000,
        ..unguarded()
    });
    h.join(0, "agent-a", G);
    h.join(0, "agent-b", G);
    h.claim(1000, "agent-a", "m1", 500);
    h.msg(2000, "agent-a", G, Some("m1"));
    // The marker keeps the claim's deadline.
    assert_eq!(h.s.ttl_audit().same_from(), None);
    h.tick(4000);
    assert_eq!(h.s.stats().expired, 0);
    assert_eq!(h.s.ttl_audit().same_from(), None);
}

#[test]
fn a_claim_guard_is_named_as_its_name_says() {
    for guard in [
        ClaimGuard::Off,
        ClaimGuard::Relayed,
        ClaimGuard::Clock {
            skew_ms: 250,
            epoch_ms: 0,
        },
    ] {
        assert_eq!(ClaimGuard::from_name(guard.name(), 250), Ok(guard));
    }
    let e = ClaimGuard::from_name("on", 250).expect_err("no such guard");
    assert_eq!(
        e.to_string(),
        "claim guard `on`: expected off, relayed or clock"
    );
}
