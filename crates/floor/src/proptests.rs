//! Property tests of the floor module: the server invariants (against a
//! reference model under `spec`, and generic ones under every policy), the
//! client's bookkeeping, and panic-free decoding.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::Value;

use super::client::{Action, Client, ClientConfig, CsmaWindow};
use super::input::{Input, Role};
use super::policy::{Channels, Expiry, PolicyKind};
use super::server::{ClaimGuard, Config, Outgoing, Server};
use super::time::Millis;
use super::wire::{ClientMsg, ServerMsg, Stamp, YieldDetail};

/// agent-0 .. agent-4; index 5 is the operator.
const OPERATOR: usize = 5;
const CHANNELS: usize = 2;
const MSGS: usize = 3;
const CASES: u32 = 4000;

fn agent(i: usize) -> String {
    if i == OPERATOR {
        "operator".to_string()
    } else {
        format!("agent-{i}")
    }
}

fn channel(i: usize) -> String {
    format!("#c{i}")
}

fn msg_id(i: usize) -> String {
    format!("m{i}")
}

#[derive(Debug, Clone, Copy)]
enum Tgt {
    Ch(usize),
    Dm(usize),
}

impl Tgt {
    fn name(self) -> String {
        match self {
            Tgt::Ch(c) => channel(c),
            Tgt::Dm(a) => format!("@{}", agent(a)),
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Join(usize, usize),
    Leave(usize, usize),
    Disconnect(usize),
    Claim {
        who: usize,
        to: Tgt,
        msg: usize,
        started_at: i64,
    },
    Msg {
        who: usize,
        to: Tgt,
        reply: Option<usize>,
    },
    Tick,
}

fn tgt() -> impl Strategy<Value = Tgt> {
    prop_oneof![
        6 => (0..CHANNELS).prop_map(Tgt::Ch),
        1 => (0..=OPERATOR).prop_map(Tgt::Dm),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let who = 0..=OPERATOR;
    prop_oneof![
        3 => (who.clone(), 0..CHANNELS).prop_map(|(a, c)| Op::Join(a, c)),
        1 => (who.clone(), 0..CHANNELS).prop_map(|(a, c)| Op::Leave(a, c)),
        1 => who.clone().prop_map(Op::Disconnect),
        8 => (who.clone(), tgt(), 0..MSGS, -2i64..12).prop_map(|(who, to, msg, started_at)| Op::Claim { who, to, msg, started_at }),
        3 => (who, tgt(), proptest::option::of(0..MSGS)).prop_map(|(who, to, reply)| Op::Msg { who, to, reply }),
        1 => Just(Op::Tick),
    ]
}

/// (time step, op) sequences; steps are small next to the TTL so claims
/// overlap, with the occasional long gap.
fn script() -> impl Strategy<Value = Vec<(u64, Op)>> {
    let dt = prop_oneof![4 => 0u64..300, 1 => 0u64..12_000];
    proptest::collection::vec((dt, op()), 1..40)
}

fn to_input(op: &Op) -> Input {
    let role = |w: usize| {
        if w == OPERATOR {
            Role::Operator
        } else {
            Role::Agent
        }
    };
    match *op {
        Op::Join(a, c) => Input::Join {
            agent: agent(a),
            channel: channel(c),
        },
        Op::Leave(a, c) => Input::Leave {
            agent: agent(a),
            channel: channel(c),
        },
        Op::Disconnect(a) => Input::Disconnect { agent: agent(a) },
        Op::Claim {
            who,
            to,
            msg,
            started_at,
        } => Input::Client {
            from: agent(who),
            role: role(who),
            msg: ClientMsg::RespondingTo {
                msg_id: msg_id(msg),
                started_at: started_at.into(),
                channel: to.name(),
            },
        },
        Op::Msg { who, to, reply } => Input::Client {
            from: agent(who),
            role: role(who),
            msg: ClientMsg::Msg {
                id: None,
                to: to.name(),
                content: "x".into(),
                in_reply_to: reply.map(msg_id),
            },
        },
        Op::Tick => Input::Tick,
    }
}

// ------------------------------------------------------------ spec reference model

#[derive(Debug, Clone)]
struct MClaim {
    holder: usize,
    started_at: i64,
    deadline: u64,
    /// Every (started_at, agent) claim received since the slot was last
    /// empty, the holder's repeats excepted.
    contest: Vec<(i64, String)>,
}

#[derive(Default)]
struct Model {
    members: BTreeSet<(usize, usize)>, // (channel, agent)
    claims: BTreeMap<(usize, usize), MClaim>,
}

impl Model {
    /// The FLOOR_RELEASED sends for the claims `gone` of `holder`: to the
    /// members of each claim's channel, in key then member order.
    fn releases(&self, gone: &[(usize, usize)], holder: usize) -> Vec<(String, String, String)> {
        let mut v = Vec::new();
        for &(c, k) in gone {
            for to in self.others(c, holder) {
                v.push((to, channel(c), msg_id(k)));
            }
        }
        v
    }

    fn member(&self, a: usize, c: usize) -> bool {
        self.members.contains(&(c, a))
    }

    fn others(&self, c: usize, except: usize) -> Vec<String> {
        let mut v: Vec<String> = (0..=OPERATOR)
            .filter(|&a| a != except && self.member(a, c))
            .map(agent)
            .collect();
        v.sort();
        v
    }
}

/// Every send of `out`, which must all be FLOOR_RELEASED: (to, channel, msg_id).
fn released(out: &[Outgoing]) -> Vec<(String, String, String)> {
    out.iter()
        .map(|o| match &o.msg {
            ServerMsg::FloorReleased {
                msg_id, channel, ..
            } => (o.to.clone(), channel.clone(), msg_id.clone()),
            other => (
                o.to.clone(),
                "not a release".into(),
                other.type_name().into(),
            ),
        })
        .collect()
}

fn is_relay_to(out: &[Outgoing], expect: &[String], ty: &str) -> bool {
    out.len() == expect.len()
        && out
            .iter()
            .zip(expect)
            .all(|(o, e)| &o.to == e && o.msg.type_name() == ty)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Under `spec`: the server matches the reference model step by step.
    /// This checks that there is at most one holder per (channel, msg_id),
    /// that it is the minimum (started_at, agent id) of the claims of the
    /// current contest, that each contested claim yields exactly one YIELD
    /// to exactly the loser (after the relays, which reach exactly the
    /// other members), that expiry happens exactly at grant + TTL, and that
    /// DM claims create nothing.
    #[test]
    fn spec_server_matches_reference_model(ttl in 1u64..5_000, script in script()) {
        let mut s = Server::new(Config { policy: PolicyKind::Spec, ttl_ms: ttl, enabled: true, claim_guard: ClaimGuard::Off, ..Config::default() });
        let mut m = Model::default();
        let mut now = 0u64;
        let mut yields = 0u64;
        for (dt, op) in script {
            now += dt;
            m.claims.retain(|_, c| c.deadline > now);
            let mut out = Vec::new();
            s.run_owned(now, to_input(&op), &mut out);
            match op {
                Op::Join(a, c) => { m.members.insert((c, a)); prop_assert!(out.is_empty()); }
                Op::Leave(a, c) => {
                    m.members.remove(&(c, a));
                    let gone: Vec<(usize, usize)> = m.claims.iter().filter(|(k, cl)| k.0 == c && cl.holder == a).map(|(k, _)| *k).collect();
                    m.claims.retain(|k, cl| !(k.0 == c && cl.holder == a));
                    prop_assert_eq!(released(&out), m.releases(&gone, a));
                }
                Op::Disconnect(a) => {
                    m.members.retain(|&(_, x)| x != a);
                    let gone: Vec<(usize, usize)> = m.claims.iter().filter(|(_, cl)| cl.holder == a).map(|(k, _)| *k).collect();
                    m.claims.retain(|_, cl| cl.holder != a);
                    prop_assert_eq!(released(&out), m.releases(&gone, a));
                }
                Op::Tick => prop_assert!(out.is_empty()),
                Op::Claim { to: Tgt::Dm(_), .. } => prop_assert!(out.is_empty(), "DM claim sent {:?}", out),
                Op::Claim { who, to: Tgt::Ch(c), msg, started_at } => {
                    if started_at < 0 || !m.member(who, c) {
                        prop_assert_eq!(out.len(), 1);
                        prop_assert_eq!(&out[0].to, &agent(who));
                        prop_assert_eq!(out[0].msg.type_name(), "ERROR");
                        continue;
                    }
                    let others = m.others(c, who);
                    let n = others.len();
                    if who == OPERATOR {
                        // The operator takes the floor whatever its
                        // started_at (a repeat changes nothing).
                        let held = m.claims.get(&(c, msg)).map(|cl| cl.holder);
                        if held == Some(OPERATOR) {
                            prop_assert!(out.is_empty());
                            continue;
                        }
                        prop_assert!(is_relay_to(&out[..n], &others, "RESPONDING_TO"));
                        if let Some(old) = held {
                            prop_assert_eq!(out.len(), n + 1);
                            prop_assert_eq!(&out[n], &Outgoing { to: agent(old), msg: ServerMsg::Yield {
                                msg_id: msg_id(msg), winner: agent(OPERATOR), channel: channel(c), detail: None } });
                            yields += 1;
                        } else {
                            prop_assert_eq!(out.len(), n);
                        }
                        m.claims.insert((c, msg), MClaim { holder: who, started_at, deadline: now + ttl, contest: vec![(i64::MIN, agent(who))] });
                        continue;
                    }
                    let me = (started_at, agent(who));
                    match m.claims.get_mut(&(c, msg)) {
                        Some(cl) if cl.holder == OPERATOR => {
                            // An agent's claim on the operator's floor loses.
                            prop_assert_eq!(out.len(), n + 1);
                            prop_assert!(is_relay_to(&out[..n], &others, "RESPONDING_TO"));
                            prop_assert_eq!(&out[n], &Outgoing { to: agent(who), msg: ServerMsg::Yield {
                                msg_id: msg_id(msg), winner: agent(OPERATOR), channel: channel(c), detail: None } });
                            yields += 1;
                        }
                        None => {
                            prop_assert!(is_relay_to(&out, &others, "RESPONDING_TO"));
                            m.claims.insert((c, msg), MClaim { holder: who, started_at, deadline: now + ttl, contest: vec![me] });
                        }
                        Some(cl) if cl.holder == who => prop_assert!(out.is_empty()),
                        Some(cl) => {
                            prop_assert_eq!(out.len(), n + 1);
                            prop_assert!(is_relay_to(&out[..n], &others, "RESPONDING_TO"));
                            let held = (cl.started_at, agent(cl.holder));
                            let (loser, winner) = if me < held {
                                let loser = agent(cl.holder);
                                cl.holder = who;
                                cl.started_at = started_at;
                                cl.deadline = now + ttl;
                                (loser, agent(who))
                            } else {
                                (agent(who), held.1.clone())
                            };
                            cl.contest.push(me);
                            prop_assert_eq!(&out[n], &Outgoing { to: loser, msg: ServerMsg::Yield {
                                msg_id: msg_id(msg), winner, channel: channel(c), detail: None } });
                            yields += 1;
                        }
                    }
                }
                Op::Msg { to: Tgt::Dm(t), .. } => {
                    prop_assert_eq!(out.len(), 1);
                    prop_assert_eq!(&out[0].to, &agent(t));
                    prop_assert_eq!(out[0].msg.type_name(), "MSG");
                }
                Op::Msg { who, to: Tgt::Ch(c), reply } => {
                    if !m.member(who, c) {
                        prop_assert_eq!(out.len(), 1);
                        prop_assert_eq!(out[0].msg.type_name(), "ERROR");
                        continue;
                    }
                    prop_assert!(is_relay_to(&out, &m.others(c, who), "MSG"));
                    match reply {
                        Some(r) => { if m.claims.get(&(c, r)).is_some_and(|cl| cl.holder == who) { m.claims.remove(&(c, r)); } }
                        None => m.claims.retain(|k, cl| !(k.0 == c && cl.holder == who)),
                    }
                }
            }
            // The whole table agrees with the model.
            prop_assert_eq!(s.claim_count(), m.claims.len());
            prop_assert_eq!(s.poll_timeout().map(Millis::as_ms), m.claims.values().map(|c| c.deadline).min());
            for c in 0..CHANNELS {
                for k in 0..MSGS {
                    let want = m.claims.get(&(c, k));
                    let got = s.holder(&channel(c), &msg_id(k));
                    prop_assert_eq!(got.map(|(h, st)| (h.to_string(), st)), want.map(|w| (agent(w.holder), Stamp::Int(w.started_at))));
                    if let Some(w) = want {
                        let min = w.contest.iter().min_by_key(|x| (x.0, x.1.clone()));
                        prop_assert_eq!(min.map(|x| &x.1), Some(&agent(w.holder)), "holder is not the contest minimum");
                        prop_assert!(w.deadline > now);
                    }
                }
            }
            prop_assert_eq!(s.stats().yields, yields);
        }
    }

    /// `agentchat-0.36` (issue 16): a channel exists once joined, whoever
    /// is in it now; a claim on an existing channel is judged (its slot is
    /// held afterwards) member or not, a claim on one that never existed
    /// is dropped silently; a refused MSG (rate limit, DM, non-member)
    /// changes no claim.
    #[test]
    fn agentchat_channels_and_refused_msgs(
        ttl in 1u64..12_000,
        rate_limit_ms in prop_oneof![Just(0u64), 1u64..3000],
        script in script(),
    ) {
        let cfg = Config { policy: PolicyKind::Agentchat036, ttl_ms: ttl, rate_limit_ms, claim_guard: ClaimGuard::Off, ..Config::default() };
        let mut s = Server::new(cfg);
        let mut created = BTreeSet::new();
        let mut now = 0u64;
        let table = |s: &Server| -> Vec<Option<(String, Stamp, u64)>> {
            (0..CHANNELS)
                .flat_map(|c| (0..MSGS).map(move |k| (c, k)))
                .map(|(c, k)| s.claim_info(&channel(c), &msg_id(k)).map(|i| (i.holder.to_string(), i.started_at, i.granted_at.0)))
                .collect()
        };
        for (dt, op) in script {
            now += dt;
            let mut out = Vec::new();
            s.run_owned(now, Input::Tick, &mut out);
            let before = table(&s);
            let refused_before = s.stats().refused_msgs;
            s.run_owned(now, to_input(&op), &mut out);
            match op {
                Op::Join(_, c) => {
                    created.insert(c);
                }
                Op::Claim { who, to: Tgt::Ch(c), msg, started_at } if who != OPERATOR && started_at != 0 => {
                    if created.contains(&c) {
                        let info = s.claim_info(&channel(c), &msg_id(msg));
                        prop_assert!(info.is_some(), "claim on existing {} not tracked", channel(c));
                    } else {
                        prop_assert!(out.is_empty());
                        prop_assert_eq!(table(&s), before);
                    }
                }
                Op::Msg { .. } if s.stats().refused_msgs > refused_before => {
                    prop_assert_eq!(table(&s), before, "a refused MSG changed the claims");
                    prop_assert_eq!(out.len(), 1);
                }
                _ => {}
            }
        }
    }

    /// Under every policy (tracking on or off): nothing is relayed to a
    /// non-member or echoed to its sender, DM claims create nothing and send
    /// nothing, no claim outlives its TTL (nor, under `agentchat-0.36`, the
    /// first sweep after it), at most one YIELD per claim and only to the
    /// claimant or the displaced holder, and `poll_timeout` is exact.
    #[test]
    fn server_invariants_every_policy(
        policy in proptest::sample::select(PolicyKind::ALL.to_vec()),
        enabled in proptest::bool::weighted(0.85),
        ttl in 1u64..12_000,
        sweep_phase_ms in 0u64..5000,
        sweep_drift_us in 0u64..3000,
        script in script(),
    ) {
        let cfg = Config { policy, ttl_ms: ttl, enabled, sweep_phase_ms, sweep_drift_us, claim_guard: ClaimGuard::Off, ..Config::default() };
        let mut s = Server::new(cfg);
        let mut now = 0u64;
        for (dt, op) in script {
            now += dt;
            // poll_timeout is exact: nothing changes before it, something at it.
            if let Some(t) = s.poll_timeout().map(Millis::as_ms) {
                prop_assert!(t > s.now().as_ms());
                if t <= now {
                    let before = (s.claim_count(), s.marker_count());
                    let mut probe = s.clone();
                    let mut out = Vec::new();
                    probe.run_owned(t - 1, Input::Tick, &mut out);
                    prop_assert_eq!((probe.claim_count(), probe.marker_count()), before);
                    probe.run_owned(t, Input::Tick, &mut out);
                    prop_assert!((probe.claim_count(), probe.marker_count()) != before);
                    prop_assert!(out.is_empty());
                }
            }
            // Run the timers due now first (they send nothing), so the
            // table can be compared before and after the op itself.
            let mut out = Vec::new();
            s.run_owned(now, Input::Tick, &mut out);
            prop_assert!(out.is_empty());
            let before_claims = s.claim_count() + s.marker_count();
            s.run_owned(now, to_input(&op), &mut out);
            let sender = match &op {
                Op::Claim { who, .. } | Op::Msg { who, .. } => Some(agent(*who)),
                _ => None,
            };
            for o in &out {
                match &o.msg {
                    ServerMsg::RespondingTo { channel, from, .. } => {
                        prop_assert!(s.is_member(&o.to, channel), "relayed to non-member {}", o.to);
                        prop_assert!(&o.to != from);
                    }
                    ServerMsg::FloorClaimed { channel, holder, .. }
                    | ServerMsg::FloorReleased { channel, holder, .. } => {
                        prop_assert!(s.is_member(&o.to, channel));
                        prop_assert!(&o.to != holder);
                    }
                    ServerMsg::Msg { to, from, .. } => {
                        if let Some(peer) = to.strip_prefix('@') {
                            prop_assert_eq!(&o.to, peer);
                        } else {
                            prop_assert!(s.is_member(&o.to, to), "MSG relayed to non-member {}", o.to);
                            prop_assert!(&o.to != from);
                        }
                    }
                    ServerMsg::Error { .. } => prop_assert_eq!(Some(&o.to), sender.as_ref()),
                    ServerMsg::Yield { .. } => {}
                }
            }
            let yields: Vec<&Outgoing> = out.iter().filter(|o| o.msg.type_name() == "YIELD").collect();
            match &op {
                Op::Claim { to: Tgt::Dm(_), .. } => {
                    if policy.rules().channels == Channels::Registry {
                        // agentchat 0.36: a DM target is not a valid
                        // channel name there (`isValidChannel`): one ERROR.
                        prop_assert_eq!(out.len(), 1);
                        let code = match &out[0].msg {
                            ServerMsg::Error { code, .. } => code.as_str(),
                            _ => "",
                        };
                        prop_assert_eq!(code, "INVALID_MSG");
                    } else {
                        prop_assert!(out.is_empty());
                    }
                    prop_assert_eq!(s.claim_count() + s.marker_count(), before_claims);
                }
                Op::Claim { who, .. } => {
                    prop_assert!(yields.len() <= 1);
                    if !enabled || policy == PolicyKind::None || (*who == OPERATOR && !policy.rules().operator_takes_floor) {
                        prop_assert!(yields.is_empty());
                    }
                    if *who == OPERATOR {
                        // The operator takes the floor: only a displaced agent is yielded.
                        prop_assert!(yields.iter().all(|y| y.to != agent(OPERATOR)));
                    }
                    // The YIELD is the last message sent, after every relay.
                    if let Some(y) = yields.first() {
                        prop_assert_eq!(out.last(), Some(*y));
                    }
                }
                _ => prop_assert!(yields.is_empty()),
            }
            if !enabled || policy == PolicyKind::None {
                prop_assert_eq!(s.claim_count(), 0);
            }
            // No claim outlives its TTL.
            // (Under sweeps: the last sweep at or before now, in us; sweep k
            // runs at phase + k x (every + drift).)
            let horizon_us = match policy.rules().expiry {
                Expiry::Sweep => {
                    let every_ms = super::policy::AGENTCHAT_SWEEP_MS;
                    let (phase, period) = (sweep_phase_ms * 1000, every_ms * 1000 + sweep_drift_us);
                    if now * 1000 < phase { 0 } else { phase + (now * 1000 - phase) / period * period }
                }
                Expiry::AtDeadline => now * 1000,
            };
            for c in 0..CHANNELS {
                for k in 0..MSGS {
                    if let Some(info) = s.claim_info(&channel(c), &msg_id(k)) {
                        prop_assert_eq!(info.deadline.0, info.granted_at.0 + ttl);
                        prop_assert!(info.deadline.0 * 1000 > horizon_us, "claim outlived its TTL");
                        prop_assert!(info.granted_at.0 <= now);
                        prop_assert_eq!(s.holder(&channel(c), &msg_id(k)).is_some(), !info.answered);
                    }
                }
            }
        }
    }

    /// The client's state never leaks: after every message is finished
    /// (replied, aborted or skipped, with any recheck run out), nothing is
    /// tracked, and every started inference was preceded by exactly one
    /// claim (none under `none`, exempt ones excepted).
    #[test]
    fn client_self_cleans(
        policy in proptest::sample::select(PolicyKind::ALL.to_vec()),
        recheck in any::<bool>(),
        max_rechecks in 0u32..3,
        events in proptest::collection::vec((0usize..4, 0u8..6, 0i64..20_000), 1..60),
    ) {
        let mut c = Client::new(ClientConfig { id: "agent-1".into(), policy, ttl_ms: 5_000, recheck_on_expiry: recheck, max_rechecks, csma: CsmaWindow { min_ms: 0, max_ms: 2_000 } });
        let mut now = 0i64;
        let mut timers: BTreeMap<String, ()> = BTreeMap::new();
        let mut inferring: BTreeSet<String> = BTreeSet::new();
        let mut out = Vec::new();
        for (m, kind, dt) in events {
            now += dt % 3000;
            let id = msg_id(m);
            out.clear();
            match kind {
                0 => c.on_message(now, &id, "#c0", dt % 7 == 0, &mut || 0.5, &mut out),
                1 => c.on_timer(now, &id, &mut || 0.5, &mut out),
                2 => c.on_server_msg(now, &ServerMsg::RespondingTo { msg_id: id.clone(), from: "agent-0".into(), started_at: dt.into(), channel: "#c0".into() }, &mut || 0.5, &mut out),
                3 => c.on_server_msg(now, &ServerMsg::Yield { msg_id: id.clone(), winner: "agent-0".into(), channel: "#c0".into(), detail: None }, &mut || 0.5, &mut out),
                4 => c.on_server_msg(now, &ServerMsg::Msg { id: "s".into(), from: "agent-2".into(), to: "#c0".into(), content: String::new(), in_reply_to: Some(id.clone()) }, &mut || 0.5, &mut out),
                _ => c.on_inference_done(now, &id, None, String::new(), &mut out),
            }
            for a in &out {
                match a {
                    Action::Wait { msg_id, .. } | Action::WakeAt { msg_id, .. } => { timers.insert(msg_id.to_string(), ()); }
                    Action::StartInference { msg_id, .. } => { inferring.insert(msg_id.to_string()); }
                    Action::Abort { msg_id, .. } => { prop_assert!(inferring.remove(&**msg_id)); }
                    Action::Post(ClientMsg::Msg { in_reply_to: Some(r), .. }) => { prop_assert!(inferring.remove(r)); }
                    Action::Send(ClientMsg::RespondingTo { .. }) => prop_assert!(policy != PolicyKind::None),
                    _ => {}
                }
            }
            prop_assert!(c.tracked() <= MSGS + 1);
        }
        // Drain: fire timers (far in the future) until quiet, then finish inferences.
        for _ in 0..(2 * max_rechecks + 4) {
            now += 1_000_000;
            for id in timers.keys().cloned().collect::<Vec<_>>() {
                out.clear();
                c.on_timer(now, &id, &mut || 0.5, &mut out);
                for a in &out {
                    if let Action::StartInference { msg_id, .. } = a { inferring.insert(msg_id.to_string()); }
                }
            }
        }
        for id in inferring.iter() {
            out.clear();
            c.on_inference_done(now, id, None, String::new(), &mut out);
        }
        prop_assert_eq!(c.tracked(), 0);
    }
}

// ------------------------------------------------------------ decoding

/// Any JSON value, with strings that look like the protocol's (also the
/// strategy of `replay::events`' log round trip).
pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-zA-Z#@_0-9-]{0,8}".prop_map(Value::String),
        proptest::sample::select(vec![
            "RESPONDING_TO",
            "MSG",
            "YIELD",
            "FLOOR_CLAIMED",
            "ERROR",
            "#general",
            "@agent-a"
        ])
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(
                proptest::sample::select(vec![
                    "type",
                    "msg_id",
                    "started_at",
                    "channel",
                    "to",
                    "content",
                    "in_reply_to",
                    "id",
                    "from",
                    "winner",
                    "holder",
                    "holder_started_at",
                    "reason",
                    "code",
                    "message",
                    "x",
                ]),
                inner,
                0..8
            )
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

fn id_str() -> impl Strategy<Value = String> {
    "[a-z0-9_-]{1,6}"
}

fn client_msg() -> impl Strategy<Value = ClientMsg> {
    let target = prop_oneof![
        "#[A-Za-z0-9_-]{1,6}",
        id_str().prop_map(|s| format!("@{s}")),
    ];
    prop_oneof![
        (id_str(), any::<i64>(), target.clone()).prop_map(|(msg_id, started_at, channel)| {
            ClientMsg::RespondingTo {
                msg_id,
                started_at: started_at.into(),
                channel,
            }
        }),
        (
            proptest::option::of(id_str()),
            target,
            ".{0,12}",
            proptest::option::of(id_str())
        )
            .prop_map(|(id, to, content, in_reply_to)| ClientMsg::Msg {
                id,
                to,
                content,
                in_reply_to
            }),
    ]
}

fn server_msg() -> impl Strategy<Value = ServerMsg> {
    let ch = "#[A-Za-z0-9_-]{1,6}";
    prop_oneof![
        (id_str(), id_str(), any::<i64>(), ch).prop_map(|(msg_id, from, started_at, channel)| {
            ServerMsg::RespondingTo {
                msg_id,
                from,
                started_at: started_at.into(),
                channel,
            }
        }),
        (
            id_str(),
            id_str(),
            ch,
            proptest::option::of((any::<i64>(), ".{0,8}"))
        )
            .prop_map(|(msg_id, winner, channel, d)| ServerMsg::Yield {
                msg_id,
                winner,
                channel,
                detail: d.map(|(holder_started_at, reason)| YieldDetail {
                    holder_started_at: holder_started_at.into(),
                    reason
                })
            }),
        (id_str(), ch, id_str(), any::<i64>()).prop_map(|(msg_id, channel, holder, started_at)| {
            ServerMsg::FloorClaimed {
                msg_id,
                channel,
                holder,
                started_at: started_at.into(),
            }
        }),
        (
            id_str(),
            id_str(),
            ch,
            ".{0,8}",
            proptest::option::of(id_str())
        )
            .prop_map(|(id, from, to, content, in_reply_to)| ServerMsg::Msg {
                id,
                from,
                to,
                content,
                in_reply_to
            }),
        (".{0,6}", ".{0,8}").prop_map(|(code, message)| ServerMsg::Error { code, message }),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    proptest::collection::vec(
        prop_oneof![
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
            (
                any::<usize>(),
                proptest::sample::select(b"{}[]\",:0-9.e#@\\ ".to_vec())
            )
                .prop_map(|(i, b)| Mutation::Insert(i, b)),
            any::<usize>().prop_map(Mutation::Delete),
            any::<usize>().prop_map(Mutation::Truncate),
        ],
        1..4,
    )
}

fn mutate(mut bytes: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let n = bytes.len();
        match *m {
            Mutation::Flip(i, b) if n > 0 => bytes[i % n] ^= b | 1,
            Mutation::Insert(i, b) => bytes.insert(i % (n + 1), b),
            Mutation::Delete(i) if n > 0 => {
                bytes.remove(i % n);
            }
            Mutation::Truncate(i) => bytes.truncate(i % (n + 1)),
            _ => {}
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = ClientMsg::decode(&bytes);
        let _ = ServerMsg::decode(&bytes);
        let mut s = Server::new(Config::default());
        let mut out = Vec::new();
        s.run_frame(1, "agent-a", Role::Agent, &bytes, &mut out);
    }

    #[test]
    fn decoders_never_panic_on_arbitrary_json(v in json_value()) {
        let c = ClientMsg::from_value(&v);
        let _ = ServerMsg::from_value(&v);
        // Whatever decodes re-encodes to something that decodes the same.
        if let Ok(m) = c {
            prop_assert_eq!(ClientMsg::decode_str(&m.to_json_string()), Ok(m));
        }
        for p in PolicyKind::ALL {
            let mut s = Server::new(Config::for_policy(p));
            let mut out = Vec::new();
            s.run_owned(0, Input::Join { agent: "agent-a".into(), channel: "#general".into() }, &mut out);
            s.run_value(1, "agent-a", Role::Agent, &v, &mut out);
        }
    }

    #[test]
    fn valid_messages_roundtrip_and_mutations_never_panic(
        cm in client_msg(), sm in server_msg(), muts in mutations(),
    ) {
        let cb = cm.to_json_string().into_bytes();
        prop_assert_eq!(ClientMsg::decode(&cb), Ok(cm.clone()));
        prop_assert_eq!(ClientMsg::from_value(&cm.to_json()), Ok(cm));
        let sb = sm.to_json_string().into_bytes();
        prop_assert_eq!(ServerMsg::decode(&sb), Ok(sm.clone()));
        prop_assert_eq!(ServerMsg::from_value(&sm.to_json()), Ok(sm));
        let (cb, sb) = (mutate(cb, &muts), mutate(sb, &muts));
        for b in [&cb, &sb] {
            let _ = ClientMsg::decode(b);
            let _ = ServerMsg::decode(b);
            let mut s = Server::new(Config::default());
            let mut out = Vec::new();
            s.run_frame(1, "agent-a", Role::Agent, b, &mut out);
        }
    }
}
