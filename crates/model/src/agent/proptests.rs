//! Property tests of the agent actor: whatever the server sends and
//! whenever its timers fire, its outputs keep their promises to the driver.

use super::*;
use proptest::prelude::*;
use rand::SeedableRng;
use std::collections::BTreeMap;

const ME: &str = "agent-000";
const CH: &str = "#general";
const MSGS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    /// A root message from the operator (mentioning the agent if true).
    Root(usize, bool),
    /// Another agent's claim, stamped `dt` ms from the agent's local now.
    Claim(usize, i64),
    Yield(usize),
    /// Another agent's reply to message k.
    Response(usize),
    /// Time passes by this many µs; whatever falls due fires in order.
    Advance(u64),
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..MSGS, any::<bool>()).prop_map(|(k, m)| Op::Root(k, m)),
        (0..MSGS, -20i64..20).prop_map(|(k, d)| Op::Claim(k, d)),
        (0..MSGS).prop_map(Op::Yield),
        (0..MSGS).prop_map(Op::Response),
        (0u64..200_000).prop_map(Op::Advance),
        Just(Op::Crash),
    ]
}

fn behaviour(p: [f64; 3], recheck: bool) -> Behaviour {
    Behaviour {
        ttl_ms: 30,
        recheck,
        max_rechecks: 2,
        respond_p: 0.7,
        reply_p: 0.5,
        max_depth: 2,
        csma: Dist::fixed_us(3_000),
        tick_us: 0,
        inference: Dist::fixed_us(50_000),
        ignore_yield_p: p[0],
        crash_p: p[1],
        hang_p: p[2],
        squat: None,
    }
}

fn id(k: usize) -> String {
    format!("m{k}")
}

/// A minimal driver that checks every output against what it was told.
struct Driver {
    agent: Agent,
    now: u64,
    /// Due callbacks: (time, order) -> what to feed.
    due: BTreeMap<(u64, u64), Due>,
    seq: u64,
    busy: BTreeMap<String, bool>,
    /// Inferences started and not yet ended, with the key of their end.
    running: BTreeMap<String, Option<(u64, u64)>>,
}

#[derive(Debug, Clone)]
enum Due {
    Timer(String),
    Done(String),
    Crash,
}

impl Driver {
    fn feed(&mut self, input: Input<'_>) -> Result<(), TestCaseError> {
        let mut out = Vec::new();
        let crashed = matches!(input, Input::Crash);
        self.agent.handle(self.now, input, &mut out);
        let mut last_done: Option<String> = None;
        for (i, o) in out.iter().enumerate() {
            match o {
                Output::Again { msg_id } => {
                    prop_assert!(
                        !self.busy.contains_key(&**msg_id),
                        "Again for busy {}",
                        msg_id
                    );
                    self.busy.insert(msg_id.to_string(), true);
                }
                Output::Wants { msg_id } => {
                    // A second relay of a message it is busy with draws
                    // again (the simulator never sends one).
                    self.busy.insert(msg_id.to_string(), true);
                }
                Output::Idle { msg_id } => {
                    let was = self.busy.remove(&**msg_id);
                    prop_assert_eq!(was, Some(true), "Idle for {} not busy", msg_id);
                    prop_assert!(!self.agent.is_busy(msg_id));
                }
                Output::SetTimer { msg_id, at_us, .. } => {
                    prop_assert!(*at_us >= self.now);
                    prop_assert!(self.busy.contains_key(&**msg_id));
                    self.at(*at_us, Due::Timer(msg_id.to_string()));
                }
                Output::Send(ClientMsg::RespondingTo {
                    msg_id, started_at, ..
                }) => {
                    prop_assert!(self.busy.contains_key(msg_id));
                    prop_assert_eq!(started_at, &self.agent.local_ms(self.now).into());
                }
                Output::Send(other) => prop_assert!(false, "unexpected send {:?}", other),
                Output::Infer { msg_id, end, .. } => {
                    prop_assert!(!self.running.contains_key(&**msg_id));
                    let key = match *end {
                        InferenceEnd::DoneAt(t) => Some(self.at(t, Due::Done(msg_id.to_string()))),
                        InferenceEnd::CrashAt(t) => Some(self.at(t, Due::Crash)),
                        InferenceEnd::Hang => None,
                    };
                    self.running.insert(msg_id.to_string(), key);
                }
                Output::Abort { msg_id, .. } | Output::Lost { msg_id, .. } => {
                    let key = self.running.remove(&**msg_id);
                    prop_assert!(key.is_some(), "{:?} of no inference", o);
                    if let Some(Some(k)) = key {
                        self.due.remove(&k);
                    }
                }
                Output::Done { msg_id } => {
                    prop_assert!(self.running.remove(&**msg_id).is_some());
                    last_done = Some(msg_id.to_string());
                }
                Output::Reply { parent, .. } => {
                    prop_assert_eq!(Some(parent.to_string()), last_done.clone());
                    last_done = None;
                }
                Output::Skip { .. } => {}
                Output::Crashed => {
                    prop_assert!(crashed && i + 1 == out.len());
                    prop_assert!(self.busy.is_empty() && self.running.is_empty());
                    // Its timers are stale now (the world drops them by
                    // incarnation): forget them.
                    self.due.clear();
                }
            }
        }
        for m in self.busy.keys() {
            prop_assert!(self.agent.is_busy(m));
        }
        for m in self.running.keys() {
            prop_assert!(self.agent.is_running(m));
        }
        Ok(())
    }

    fn at(&mut self, t: u64, d: Due) -> (u64, u64) {
        self.seq += 1;
        let key = (t, self.seq);
        self.due.insert(key, d);
        key
    }

    fn advance(&mut self, dt: u64) -> Result<(), TestCaseError> {
        let until = self.now + dt;
        while let Some((&(t, s), _)) = self.due.first_key_value() {
            if t > until {
                break;
            }
            let Some(d) = self.due.remove(&(t, s)) else {
                break;
            };
            self.now = t;
            match d {
                Due::Timer(m) => self.feed(Input::Timer { msg_id: &m })?,
                Due::Done(m) => {
                    let reply = format!("r{s}");
                    let input = Input::InferenceDone {
                        msg_id: &m,
                        reply_id: Some(reply),
                    };
                    self.feed(input)?;
                }
                Due::Crash => self.feed(Input::Crash)?,
            }
        }
        self.now = until;
        Ok(())
    }

    fn server(&mut self, msg: ServerMsg, depth: Option<u32>) -> Result<(), TestCaseError> {
        self.feed(Input::Server { msg: &msg, depth })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn outputs_keep_their_promises(
        ops in proptest::collection::vec(op(), 1..60),
        seed in any::<u64>(),
        faults in prop::array::uniform3(prop_oneof![Just(0.0), Just(0.3), Just(1.0)]),
        recheck in any::<bool>(),
        policy in prop_oneof![
            Just(PolicyKind::Spec),
            Just(PolicyKind::None),
            Just(PolicyKind::Agentchat036),
            Just(PolicyKind::Tombstone),
        ],
    ) {
        let rng = Stream::seed_from_u64(seed);
        let b = Arc::new(behaviour(faults, recheck));
        let mut d = Driver {
            agent: Agent::new(ME.into(), policy, b, rng, Clock::Offset(1_000_000)),
            now: 0,
            due: BTreeMap::new(),
            seq: 0,
            busy: BTreeMap::new(),
            running: BTreeMap::new(),
        };
        let other = "agent-001".to_string();
        for o in ops {
            match o {
                Op::Root(k, mention) => {
                    let content = if mention { "@agent-000 q" } else { "q" };
                    let msg = ServerMsg::Msg {
                        id: id(k),
                        from: "operator".into(),
                        to: CH.into(),
                        content: content.into(),
                        in_reply_to: None,
                    };
                    d.server(msg, Some(0))?;
                }
                Op::Claim(k, dt) => {
                    let at = d.agent.local_ms(d.now) + dt;
                    let msg = ServerMsg::RespondingTo {
                        msg_id: id(k),
                        from: other.clone(),
                        started_at: at.into(),
                        channel: CH.into(),
                    };
                    d.server(msg, None)?;
                }
                Op::Yield(k) => {
                    let msg = ServerMsg::Yield {
                        msg_id: id(k),
                        winner: other.clone(),
                        channel: CH.into(),
                        detail: None,
                    };
                    d.server(msg, None)?;
                }
                Op::Response(k) => {
                    let msg = ServerMsg::Msg {
                        id: format!("x{k}"),
                        from: other.clone(),
                        to: CH.into(),
                        content: "a".into(),
                        in_reply_to: Some(id(k)),
                    };
                    d.server(msg, Some(1))?;
                }
                Op::Advance(dt) => d.advance(dt)?,
                Op::Crash => d.feed(Input::Crash)?,
            }
        }
        // Left alone long enough, everything that is not hung settles.
        d.advance(10_000_000)?;
        for (m, end) in &d.running {
            prop_assert!(end.is_none(), "{} still running with an end", m);
        }
    }
}
