//! A new embedder's harness, from the crate's public API and rustdoc only:
//! a [`Server`] and four [`Agent`]s on a fake clock and an in-memory bus
//! (every frame encoded to JSON and decoded again, each hop 20 ms), under
//! the default configuration. Each case checks what the docs say happens.

use std::collections::{BTreeMap, BTreeSet};

use herdsim_floor::{
    Agent, AgentInput, AgentOutput, ClientConfig, ClientMsg, Config, Input, Millis, Role, Sends,
    Server, ServerMsg, SkipReason, edge,
};

const G: &str = "#general";
const OP: &str = "operator";
const HOP_MS: u64 = 20;
const INFER_MS: u64 = 3_000;
const AGENTS: [&str; 4] = ["agent-1", "agent-2", "agent-3", "agent-4"];

/// A small deterministic stream of uniform draws (an LCG): each agent its own.
fn draws(seed: u64) -> impl FnMut() -> f64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

type Draw = Box<dyn FnMut() -> f64>;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A frame (JSON) from the server reaches `to`.
    ToAgent { to: String, json: String },
    /// A frame (JSON) from `from` reaches the server.
    ToServer { from: String, json: String },
    /// `agent`'s inference on `msg` ends.
    InferDone { agent: String, msg: String },
    /// The connection of `agent` is gone: the server sees the disconnect.
    Disconnect { agent: String },
}

/// What happened, for the assertions.
#[derive(Default, Debug)]
struct Log {
    /// (message answered, by whom, at).
    answers: Vec<(String, String, u64)>,
    claims: Vec<(String, String)>,
    started: Vec<(String, String, bool)>,
    /// (message, by whom, at).
    started_at: Vec<(String, String, u64)>,
    aborted: Vec<(String, String)>,
    skipped: Vec<(String, String, SkipReason)>,
    /// FLOOR_RELEASED frames the agents received.
    releases: usize,
    /// Frames the operator received.
    to_operator: Vec<ServerMsg>,
}

struct World {
    now: u64,
    server: Server,
    agents: BTreeMap<String, Agent<Draw>>,
    /// (time, seq) -> event.
    queue: BTreeMap<(u64, u64), Ev>,
    seq: u64,
    /// Agents whose connection is gone (nothing reaches them).
    gone: BTreeSet<String>,
    /// An agent that crashes when it starts inferring (its process dies
    /// at once; the server sees the disconnect `after` ms later).
    crash_on_start: Option<(String, u64)>,
    log: Log,
}

impl World {
    fn new(draw_of: impl Fn(usize) -> Draw) -> World {
        let mut w = World {
            now: 0,
            server: Server::new(Config::default()),
            agents: BTreeMap::new(),
            queue: BTreeMap::new(),
            seq: 0,
            gone: BTreeSet::new(),
            crash_on_start: None,
            log: Log::default(),
        };
        let mut sends = Sends::new();
        for (i, id) in AGENTS.iter().enumerate() {
            w.agents.insert(
                id.to_string(),
                Agent::new(ClientConfig::new(*id), draw_of(i)),
            );
        }
        for who in std::iter::once(OP).chain(AGENTS) {
            let join = Input::Join {
                agent: who.into(),
                channel: G.into(),
            };
            w.server.handle(Millis(0), join, &mut sends);
        }
        w
    }

    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.queue.insert((t, self.seq), ev);
    }

    /// The operator sends `msg` at `t`.
    fn operator_sends(&mut self, t: u64, msg: ClientMsg) {
        let json = msg.to_json_string();
        self.at(
            t,
            Ev::ToServer {
                from: OP.into(),
                json,
            },
        );
    }

    fn ask(&mut self, t: u64, id: &str, to: &str, content: &str) {
        let msg = ClientMsg::Msg {
            id: Some(id.into()),
            to: to.into(),
            content: content.into(),
            in_reply_to: None,
        };
        self.operator_sends(t, msg);
    }

    /// Deliver what the server sent, one hop later.
    fn route(&mut self, sends: &Sends) {
        let deliveries: Vec<(String, String)> = sends
            .iter()
            .map(|(to, msg)| (to.clone(), msg.to_json_string()))
            .collect();
        for (to, json) in deliveries {
            self.at(self.now + HOP_MS, Ev::ToAgent { to, json });
        }
    }

    /// Carry out everything agent `id` asks for.
    fn drain(&mut self, id: &str) {
        let mut outs = Vec::new();
        if let Some(a) = self.agents.get_mut(id) {
            while let Some(o) = a.poll_output() {
                outs.push(o);
            }
        }
        for o in outs {
            match o {
                AgentOutput::Transmit(msg) => {
                    if let ClientMsg::RespondingTo { msg_id, .. } = &msg {
                        self.log.claims.push((msg_id.clone(), id.into()));
                    }
                    if let ClientMsg::Msg {
                        in_reply_to: Some(q),
                        ..
                    } = &msg
                    {
                        self.log.answers.push((q.clone(), id.into(), self.now));
                    }
                    let json = msg.to_json_string();
                    self.at(
                        self.now + HOP_MS,
                        Ev::ToServer {
                            from: id.into(),
                            json,
                        },
                    );
                }
                AgentOutput::StartInference { msg_id, exempt, .. } => {
                    self.log.started.push((msg_id.clone(), id.into(), exempt));
                    self.log
                        .started_at
                        .push((msg_id.clone(), id.into(), self.now));
                    if let Some((who, after)) = self.crash_on_start.clone()
                        && who == id
                    {
                        self.crash_on_start = None;
                        self.gone.insert(id.into());
                        self.at(self.now + after, Ev::Disconnect { agent: id.into() });
                    } else {
                        let agent = id.to_string();
                        self.at(self.now + INFER_MS, Ev::InferDone { agent, msg: msg_id });
                    }
                }
                AgentOutput::AbortInference { msg_id, .. } => {
                    self.log.aborted.push((msg_id, id.into()));
                }
                AgentOutput::Skipped { msg_id, reason } => {
                    self.log.skipped.push((msg_id, id.into(), reason));
                }
                _ => {}
            }
        }
    }

    /// The next moment anything happens: an event, an agent's timer or the
    /// server's.
    fn next_time(&self) -> Option<u64> {
        let ev = self.queue.keys().next().map(|k| k.0);
        let agents = self
            .agents
            .iter()
            .filter(|(id, _)| !self.gone.contains(*id))
            .filter_map(|(_, a)| a.poll_timeout().map(Millis::as_ms));
        let server = self.server.poll_timeout().map(Millis::as_ms);
        ev.into_iter().chain(agents).chain(server).min()
    }

    /// Run until `end` (ms).
    fn run_until(&mut self, end: u64) {
        while let Some(t) = self.next_time() {
            if t > end {
                break;
            }
            self.now = t;
            // The server's timers, the agents' timers, then the events due.
            if self.server.poll_timeout().is_some_and(|d| d.as_ms() <= t) {
                let mut sends = Sends::new();
                self.server.handle(Millis(t), Input::Tick, &mut sends);
                self.route(&sends);
            }
            let ids: Vec<String> = self.agents.keys().cloned().collect();
            for id in &ids {
                if self.gone.contains(id) {
                    continue;
                }
                let due = self.agents[id]
                    .poll_timeout()
                    .is_some_and(|d| d.as_ms() <= t);
                if due {
                    if let Some(a) = self.agents.get_mut(id) {
                        a.handle_input(Millis(t), AgentInput::Timeout);
                    }
                    self.drain(id);
                }
            }
            while let Some(entry) = self.queue.first_entry() {
                if entry.key().0 > t {
                    break;
                }
                let ev = entry.remove();
                self.event(ev);
            }
        }
        self.now = end;
    }

    fn event(&mut self, ev: Ev) {
        let now = Millis(self.now);
        match ev {
            Ev::ToServer { from, json } => {
                // A frame in flight arrives, even from a process that died.
                let role = if from == OP {
                    Role::Operator
                } else {
                    Role::Agent
                };
                let mut sends = Sends::new();
                let input = edge::decode_bytes(&from, role, json.as_bytes());
                self.server.handle(now, input, &mut sends);
                self.route(&sends);
            }
            Ev::ToAgent { to, json } => {
                let Ok(msg) = ServerMsg::decode_str(&json) else {
                    panic!("the server sent a frame its own decoder refuses: {json}");
                };
                if to == OP {
                    self.log.to_operator.push(msg);
                    return;
                }
                if self.gone.contains(&to) {
                    return;
                }
                let Some(a) = self.agents.get_mut(&to) else {
                    return;
                };
                if let ServerMsg::FloorReleased { .. } = &msg {
                    self.log.releases += 1;
                }
                a.handle_input(now, AgentInput::Frame(&msg));
                // Every agent here would like to answer every question
                // (a message that answers none) from someone else.
                if let ServerMsg::Msg {
                    in_reply_to: None, ..
                } = &msg
                {
                    a.handle_input(now, AgentInput::Answer(&msg));
                }
                self.drain(&to);
            }
            Ev::InferDone { agent, msg } => {
                if self.gone.contains(&agent) {
                    return;
                }
                if let Some(a) = self.agents.get_mut(&agent) {
                    let content = format!("{agent} answers {msg}");
                    let done = AgentInput::InferenceDone {
                        msg_id: &msg,
                        reply_id: None,
                        content: &content,
                    };
                    a.handle_input(now, done);
                }
                self.drain(&agent);
            }
            Ev::Disconnect { agent } => {
                let mut sends = Sends::new();
                self.server
                    .handle(now, Input::Disconnect { agent }, &mut sends);
                self.route(&sends);
            }
        }
    }

    fn answers_to(&self, q: &str) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .log
            .answers
            .iter()
            .filter(|(m, _, _)| m == q)
            .map(|(_, who, _)| who.as_str())
            .collect();
        v.sort();
        v
    }
}

fn seeded() -> World {
    World::new(|i| Box::new(draws(i as u64 + 1)) as Draw)
}

/// When and by whom the first inference on a question posted at 1 s starts
/// in the [`seeded`] world (the same world is the same run).
fn first_start() -> (u64, String) {
    let mut w = seeded();
    w.ask(1_000, "q", G, "what now?");
    w.run_until(20_000);
    let (_, who, at) = w.log.started_at[0].clone();
    (at, who)
}

#[test]
fn each_question_is_answered_once_under_the_default_config() {
    let mut w = seeded();
    for k in 0..20u64 {
        w.ask(1_000 + k * 60_000, &format!("q{k}"), G, "what now?");
    }
    w.run_until(20 * 60_000 + 60_000);
    for k in 0..20 {
        let q = format!("q{k}");
        assert_eq!(w.answers_to(&q).len(), 1, "{q}: {:?}", w.log);
    }
    // The CSMA wait is the protocol's 2-8 s: every claim comes 2-8 s (plus
    // one hop) after its question.
    let claims = w.log.claims.len();
    assert!((20..=80).contains(&claims), "{claims} claims");
}

#[test]
fn the_operators_claim_holds_the_floor_for_the_operator() {
    let mut w = seeded();
    w.ask(1_000, "q1", G, "what now?");
    // The operator says it answers, before any agent's wait (2 s) ends.
    w.operator_sends(
        1_100,
        ClientMsg::RespondingTo {
            msg_id: "q1".into(),
            started_at: 1_100.into(),
            channel: G.into(),
        },
    );
    w.run_until(30_000);
    assert_eq!(w.server.holder(G, "q1").map(|(h, _)| h.as_str()), Some(OP));
    assert!(w.answers_to("q1").is_empty(), "{:?}", w.log);
    assert!(w.log.claims.is_empty(), "{:?}", w.log);
    assert_eq!(w.log.skipped.len(), 4);
    assert!(
        w.log
            .skipped
            .iter()
            .all(|(_, _, r)| *r == SkipReason::SeenClaim)
    );
    // An operator who claims while an agent infers takes the floor too: the
    // agent is yielded and sends nothing; the server and the agents agree.
    let (t0, first) = first_start();
    let mut w = seeded();
    w.ask(1_000, "q2", G, "what now?");
    w.run_until(t0 + 500);
    w.operator_sends(
        t0 + 500,
        ClientMsg::RespondingTo {
            msg_id: "q2".into(),
            started_at: (t0 as i64 + 500).into(),
            channel: G.into(),
        },
    );
    // (The operator's claim, like any, lives for the 45 s TTL.)
    w.run_until(t0 + 30_000);
    assert_eq!(w.log.aborted, [("q2".to_string(), first)]);
    assert!(w.answers_to("q2").is_empty(), "{:?}", w.log);
    assert_eq!(w.server.holder(G, "q2").map(|(h, _)| h.as_str()), Some(OP));
}

#[test]
fn a_claimant_that_disconnects_leaves_the_question_to_the_others_at_once() {
    // The first agent to start dies at once; the server notices 1 s later.
    let (t0, first) = first_start();
    let mut w = seeded();
    w.crash_on_start = Some((first.clone(), 1_000));
    w.ask(1_000, "q1", G, "what now?");
    w.run_until(60_000);
    let answers = w.answers_to("q1");
    assert_eq!(answers.len(), 1, "{:?}", w.log);
    assert_ne!(answers[0], first);
    // The others had skipped it for the dead agent's claim, and heard it
    // released.
    assert_eq!(w.log.releases, 3, "{:?}", w.log);
    assert!(
        w.log
            .skipped
            .iter()
            .any(|(_, _, r)| *r == SkipReason::SeenClaim)
    );
    // Answered within a CSMA wait and an inference of the release (well
    // before the 45 s TTL).
    let (_, _, at) = w.log.answers[0];
    let released_at = t0 + 1_000 + HOP_MS;
    assert!(at <= released_at + 8_000 + INFER_MS, "answered at {at}");
    assert!(at < 45_000);
}

#[test]
fn identical_started_at_goes_to_the_smaller_agent_id() {
    // Every agent draws the same wait: all claim in the same millisecond.
    let mut w = World::new(|_| Box::new(|| 0.25) as Draw);
    w.ask(1_000, "q1", G, "what now?");
    w.run_until(30_000);
    assert_eq!(w.log.claims.len(), 4);
    assert_eq!(w.answers_to("q1"), ["agent-1"], "{:?}", w.log);
    assert_eq!(w.log.aborted.len(), 3);
    assert!(w.log.aborted.iter().all(|(_, a)| a != "agent-1"));
}

#[test]
fn an_at_mention_is_answered_once_by_the_agent_it_names() {
    let mut w = seeded();
    w.ask(1_000, "q1", G, "@agent-3 what now?");
    w.run_until(30_000);
    assert_eq!(w.answers_to("q1"), ["agent-3"]);
    assert!(w.log.claims.is_empty(), "{:?}", w.log);
    assert_eq!(w.log.started, [("q1".into(), "agent-3".into(), true)]);
    let mut others: Vec<&str> = w.log.skipped.iter().map(|(_, a, _)| a.as_str()).collect();
    others.sort();
    assert_eq!(others, ["agent-1", "agent-2", "agent-4"]);
    assert!(
        w.log
            .skipped
            .iter()
            .all(|(_, _, r)| *r == SkipReason::AddressedToOthers)
    );
    // It answers at once: one hop in, then the inference (no CSMA wait).
    assert_eq!(w.log.answers[0].2, 1_000 + HOP_MS + INFER_MS);
}

#[test]
fn a_dm_is_answered_at_once_to_its_sender_only() {
    let mut w = seeded();
    w.ask(1_000, "d1", "@agent-2", "a word in private");
    w.run_until(30_000);
    assert_eq!(w.answers_to("d1"), ["agent-2"]);
    assert!(w.log.claims.is_empty());
    assert_eq!(w.log.started, [("d1".into(), "agent-2".into(), true)]);
    let replies: Vec<&ServerMsg> = w
        .log
        .to_operator
        .iter()
        .filter(|m| matches!(m, ServerMsg::Msg { in_reply_to: Some(q), .. } if q == "d1"))
        .collect();
    assert_eq!(replies.len(), 1);
    assert!(
        matches!(replies[0], ServerMsg::Msg { from, to, .. } if from == "agent-2" && to == "@operator")
    );
}
