//! The agent actor the live driver runs: the scenario's agent (respond_p,
//! CSMA, inference, faults, ignore-yield) around the real
//! [`floor::Client`], sans-IO: no clock, no socket. The driver feeds it
//! [`Input`]s at its scenario-time clock and carries out its [`Output`]s.
//!
//! This is the interface of `herdsim::agent` (issue 10) as planned; until
//! that module lands, this file holds a faithful local copy of the
//! simulator's agent decisions (src/model/world.rs: `consider`, `apply`,
//! `start_inference`, `abort`, `infer_done`, `crash`) so that the driver
//! can be written and tested. When `agent` lands, this file goes and the
//! driver uses it unchanged.

use crate::floor::{self, Action, ClientConfig, ClientMsg, PolicyKind, ServerMsg};
use crate::model::dist::{DataCache, Dist, DistError, DistSpec};
use crate::scenario::{AgentGroup, Arrivals, Scenario};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

fn us(ms: f64) -> u64 {
    (ms * 1000.0).round() as u64
}

/// What an agent is like (one per scenario group, shared).
#[derive(Debug, Clone)]
pub struct Behaviour {
    pub policy: PolicyKind,
    /// The TTL the agent believes claims live (scenario ms, its local clock).
    pub ttl_ms: u64,
    pub recheck: bool,
    pub max_rechecks: u32,
    pub respond_p: f64,
    pub reply_p: f64,
    pub max_depth: u32,
    pub csma: Dist,
    pub tick_us: u64,
    pub inference: Dist,
    pub skew: Dist,
    pub ignore_yield_p: f64,
    pub crash_p: f64,
    pub hang_p: f64,
    pub channels: Vec<String>,
}

impl Behaviour {
    /// The behaviour of one agent group of a (validated) scenario.
    pub fn from_group(
        s: &Scenario,
        g: &AgentGroup,
        policy: PolicyKind,
        base_dir: &Path,
        cache: &DataCache,
    ) -> Result<Behaviour, DistError> {
        let prep = |d: &DistSpec| d.prepare_with(base_dir, cache);
        Ok(Behaviour {
            policy,
            ttl_ms: s.server.ttl_ms.round() as u64,
            recheck: g.recheck_on_expiry,
            max_rechecks: g.max_rechecks,
            respond_p: g.respond_p,
            reply_p: s.workload.reply_to_agent_p,
            max_depth: s.workload.max_depth,
            csma: prep(&g.csma)?,
            tick_us: us(g.csma_tick_ms),
            inference: prep(&g.inference)?,
            skew: prep(&g.clock_skew)?,
            ignore_yield_p: g.ignore_yield_p,
            crash_p: g.crash_p,
            hang_p: g.hang_p,
            channels: g.channels.clone(),
        })
    }
}

/// What the driver tells the agent.
#[derive(Debug)]
pub enum Input<'a> {
    /// A server message arrived. `depth`: the reply depth of a relayed MSG
    /// the agent may answer (0 = an operator post); None = do not consider
    /// answering it.
    Server {
        msg: &'a ServerMsg,
        depth: Option<u32>,
    },
    /// A timer set by [`Output::SetTimer`] is due.
    Timer { msg_id: &'a str },
    /// The inference of `msg_id` finished; `reply_id`: the wire id of the reply.
    InferenceDone {
        msg_id: &'a str,
        reply_id: Option<String>,
    },
    /// The process dies now.
    Crash,
}

/// Which timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    Csma,
    Recheck,
}

/// How a started inference ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InferenceEnd {
    /// Feed `Input::InferenceDone` at this driver time.
    DoneAt(u64),
    /// Feed `Input::Crash` at this driver time.
    CrashAt(u64),
    /// Never ends.
    Hang,
}

/// What the agent asks the driver to do (in order).
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Send(ClientMsg),
    /// Send this reply (answering `parent`) after an inference of `infer_us`.
    Reply {
        msg: ClientMsg,
        parent: String,
        infer_us: u64,
    },
    Wants {
        msg_id: String,
    },
    SetTimer {
        msg_id: String,
        at_us: u64,
        kind: TimerKind,
    },
    Infer {
        msg_id: String,
        started_at: i64,
        duration_us: u64,
        end: InferenceEnd,
        ignore_yield: bool,
    },
    Abort {
        msg_id: String,
        winner: String,
        ran_us: u64,
    },
    Done {
        msg_id: String,
    },
    Skip {
        msg_id: String,
        reason: floor::SkipReason,
    },
    Idle {
        msg_id: String,
    },
    Lost {
        msg_id: String,
        ran_us: u64,
        hung: bool,
    },
    Crashed,
}

#[derive(Debug, Clone, Copy)]
struct Running {
    start_us: u64,
    dur_us: u64,
    hung: bool,
}

/// One agent: the floor client, its decisions and its own random stream.
#[derive(Debug)]
pub struct Agent {
    id: String,
    b: Arc<Behaviour>,
    client: floor::Client,
    rng: ChaCha8Rng,
    clock_offset_us: i64,
    running: BTreeMap<String, Running>,
    active: BTreeSet<String>,
    actions: Vec<Action>,
}

impl Agent {
    /// `clock_offset_us`: the agent's local clock (µs) = driver time +
    /// this offset (epoch plus skew).
    pub fn new(id: String, b: Arc<Behaviour>, rng: ChaCha8Rng, clock_offset_us: i64) -> Agent {
        let client = floor::Client::new(Self::config(&id, &b));
        Agent {
            id,
            b,
            client,
            rng,
            clock_offset_us,
            running: BTreeMap::new(),
            active: BTreeSet::new(),
            actions: Vec::new(),
        }
    }

    fn config(id: &str, b: &Behaviour) -> ClientConfig {
        ClientConfig {
            id: id.to_string(),
            policy: b.policy,
            ttl_ms: b.ttl_ms,
            recheck_on_expiry: b.recheck,
            max_rechecks: b.max_rechecks,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether an inference is running for `msg_id`.
    pub fn is_running(&self, msg_id: &str) -> bool {
        self.running.contains_key(msg_id)
    }

    fn local_ms(&self, now_us: u64) -> i64 {
        (now_us as i64)
            .saturating_add(self.clock_offset_us)
            .div_euclid(1000)
    }

    /// Feed one input at driver time `now_us`; actions are appended to `out`.
    pub fn handle(&mut self, now_us: u64, input: Input<'_>, out: &mut Vec<Output>) {
        let t = self.local_ms(now_us);
        let mut acts = std::mem::take(&mut self.actions);
        acts.clear();
        match input {
            Input::Server { msg, depth } => {
                self.client.on_server_msg(t, msg, &mut acts);
                self.apply(now_us, &mut acts, out);
                let subject = match msg {
                    ServerMsg::RespondingTo { msg_id, .. }
                    | ServerMsg::Yield { msg_id, .. }
                    | ServerMsg::FloorClaimed { msg_id, .. } => Some(msg_id.clone()),
                    ServerMsg::Msg { in_reply_to, .. } => in_reply_to.clone(),
                    ServerMsg::Error { .. } => None,
                };
                if let Some(m) = subject {
                    self.settle(&m, out);
                }
                if let (
                    Some(depth),
                    ServerMsg::Msg {
                        id,
                        from,
                        to,
                        content,
                        ..
                    },
                ) = (depth, msg)
                {
                    self.consider(now_us, t, depth, id, from, to, content, &mut acts, out);
                }
            }
            Input::Timer { msg_id } => {
                self.client.on_timer(t, msg_id, &mut acts);
                self.apply(now_us, &mut acts, out);
                self.settle(msg_id, out);
            }
            Input::InferenceDone { msg_id, reply_id } => {
                if let Some(r) = self.running.remove(msg_id) {
                    out.push(Output::Done {
                        msg_id: msg_id.to_string(),
                    });
                    let content = format!("answer to {msg_id} from {}", self.id);
                    self.client
                        .on_inference_done(t, msg_id, reply_id, content, &mut acts);
                    for a in acts.drain(..) {
                        match a {
                            Action::Send(msg @ ClientMsg::Msg { .. }) => out.push(Output::Reply {
                                msg,
                                parent: msg_id.to_string(),
                                infer_us: r.dur_us,
                            }),
                            other => {
                                let mut one = vec![other];
                                self.apply(now_us, &mut one, out);
                            }
                        }
                    }
                    self.settle(msg_id, out);
                }
            }
            Input::Crash => {
                for (m, r) in std::mem::take(&mut self.running) {
                    out.push(Output::Lost {
                        msg_id: m,
                        ran_us: now_us.saturating_sub(r.start_us),
                        hung: r.hung,
                    });
                }
                for m in std::mem::take(&mut self.active) {
                    out.push(Output::Idle { msg_id: m });
                }
                self.client = floor::Client::new(Self::config(&self.id, &self.b));
                out.push(Output::Crashed);
            }
        }
        self.actions = acts;
    }

    /// A relayed MSG: does the agent want to answer it?
    #[allow(clippy::too_many_arguments)]
    fn consider(
        &mut self,
        now_us: u64,
        t: i64,
        depth: u32,
        id: &str,
        from: &str,
        to: &str,
        content: &str,
        acts: &mut Vec<Action>,
        out: &mut Vec<Output>,
    ) {
        if from == self.id {
            return;
        }
        let dm = to.strip_prefix('@') == Some(self.id.as_str());
        let mention = !dm && mentions(content, &self.id);
        let exempt = dm || mention || from == "@server";
        let p = if depth == 0 {
            self.b.respond_p
        } else if depth < self.b.max_depth {
            self.b.reply_p
        } else {
            0.0
        };
        let wants = exempt || (p > 0.0 && self.rng.random_bool(p));
        if !wants {
            return;
        }
        let reply_to = if dm {
            format!("@{from}")
        } else {
            to.to_string()
        };
        out.push(Output::Wants {
            msg_id: id.to_string(),
        });
        self.active.insert(id.to_string());
        acts.clear();
        self.client.on_message(t, id, &reply_to, exempt, acts);
        self.apply(now_us, acts, out);
        self.settle(id, out);
    }

    fn apply(&mut self, now_us: u64, acts: &mut Vec<Action>, out: &mut Vec<Output>) {
        for a in acts.drain(..) {
            match a {
                Action::StartCsma { msg_id } => {
                    let mut due = now_us + self.b.csma.sample_us(&mut self.rng);
                    if self.b.tick_us > 0 {
                        due = due.div_ceil(self.b.tick_us) * self.b.tick_us;
                    }
                    out.push(Output::SetTimer {
                        msg_id,
                        at_us: due,
                        kind: TimerKind::Csma,
                    });
                }
                Action::WakeAt { msg_id, at_ms } => {
                    let virt = at_ms
                        .saturating_mul(1000)
                        .saturating_sub(self.clock_offset_us);
                    let at = u64::try_from(virt).unwrap_or(0).max(now_us);
                    out.push(Output::SetTimer {
                        msg_id,
                        at_us: at,
                        kind: TimerKind::Recheck,
                    });
                }
                Action::Send(msg) => out.push(Output::Send(msg)),
                Action::StartInference { msg_id, started_at } => {
                    let dur = self.b.inference.sample_us(&mut self.rng);
                    let fault: f64 = self.rng.random();
                    let ignore =
                        self.b.ignore_yield_p > 0.0 && self.rng.random_bool(self.b.ignore_yield_p);
                    let hung = fault < self.b.hang_p;
                    let crash = !hung && fault < self.b.hang_p + self.b.crash_p;
                    let end = if hung {
                        InferenceEnd::Hang
                    } else if crash {
                        let at = now_us + (dur as f64 * self.rng.random::<f64>()).round() as u64;
                        InferenceEnd::CrashAt(at)
                    } else {
                        InferenceEnd::DoneAt(now_us + dur)
                    };
                    if ignore || hung {
                        self.client.set_ignore_yield(&msg_id, true);
                    }
                    self.running.insert(
                        msg_id.clone(),
                        Running {
                            start_us: now_us,
                            dur_us: dur,
                            hung,
                        },
                    );
                    out.push(Output::Infer {
                        msg_id,
                        started_at,
                        duration_us: dur,
                        end,
                        ignore_yield: ignore,
                    });
                }
                Action::Abort { msg_id, winner } => {
                    if self.running.get(&msg_id).is_some_and(|r| r.hung) {
                        continue;
                    }
                    if let Some(r) = self.running.remove(&msg_id) {
                        out.push(Output::Abort {
                            msg_id,
                            winner,
                            ran_us: now_us.saturating_sub(r.start_us),
                        });
                    }
                }
                Action::Skip { msg_id, reason } => out.push(Output::Skip { msg_id, reason }),
            }
        }
    }

    fn settle(&mut self, m: &str, out: &mut Vec<Output>) {
        if self.active.contains(m) && !self.running.contains_key(m) && !self.client.is_tracking(m)
        {
            self.active.remove(m);
            out.push(Output::Idle {
                msg_id: m.to_string(),
            });
        }
    }
}

/// Does `content` @mention `id` (as a whole word)?
pub fn mentions(content: &str, id: &str) -> bool {
    if !content.contains('@') {
        return false;
    }
    content.split_whitespace().any(|w| {
        w.strip_prefix('@').map(|rest| {
            rest.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
        }) == Some(id)
    })
}

/// The operator's workload, sans-IO, with its own random stream.
#[derive(Debug)]
pub struct Workload {
    gap: Dist,
    count: u64,
    duration_us: Option<u64>,
    channel: String,
    mention_p: f64,
    dm_p: f64,
    ids: Vec<String>,
    rng: ChaCha8Rng,
    posted: u64,
}

impl Workload {
    pub fn new(
        s: &Scenario,
        ids: Vec<String>,
        rng: ChaCha8Rng,
        base_dir: &Path,
        cache: &DataCache,
    ) -> Result<Workload, DistError> {
        let w = &s.workload;
        let gap = match w.arrivals {
            Arrivals::Poisson => DistSpec::Exponential {
                mean_ms: w.mean_gap_ms,
            },
            Arrivals::Fixed => DistSpec::Fixed { ms: w.mean_gap_ms },
        };
        Ok(Workload {
            gap: gap.prepare_with(base_dir, cache)?,
            count: w.count,
            duration_us: w.duration_ms.map(us),
            channel: w.channel.clone(),
            mention_p: w.mention_p,
            dm_p: w.dm_p,
            ids,
            rng,
            posted: 0,
        })
    }

    /// Posts expected in all (for progress only).
    pub fn expected_posts(&self, mean_gap_ms: f64) -> u64 {
        match self.duration_us {
            Some(d) => (d as f64 / 1000.0 / mean_gap_ms.max(1e-9)).ceil() as u64,
            None => self.count,
        }
    }

    /// Time of the next post after `now_us`, or None when the workload is over.
    pub fn next_post(&mut self, now_us: u64) -> Option<u64> {
        if self.duration_us.is_none() && self.posted >= self.count {
            return None;
        }
        let at = now_us + self.gap.sample_us(&mut self.rng);
        if let Some(d) = self.duration_us
            && at > d
        {
            return None;
        }
        self.posted += 1;
        Some(at)
    }

    /// Where post number `m` goes and what it says.
    pub fn draw(&mut self, m: u32) -> (String, String) {
        let n = self.ids.len();
        let r: f64 = self.rng.random();
        if n > 0 && r < self.dm_p {
            let k = self.rng.random_range(0..n);
            (format!("@{}", self.ids[k]), format!("question {m}"))
        } else if n > 0 && r < self.dm_p + self.mention_p {
            let k = self.rng.random_range(0..n);
            (
                self.channel.clone(),
                format!("@{} question {m}", self.ids[k]),
            )
        } else {
            (self.channel.clone(), format!("question {m}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn behaviour(policy: PolicyKind) -> Arc<Behaviour> {
        Arc::new(Behaviour {
            policy,
            ttl_ms: 45_000,
            recheck: false,
            max_rechecks: 0,
            respond_p: 1.0,
            reply_p: 0.0,
            max_depth: 1,
            csma: Dist::fixed_us(2_000_000),
            tick_us: 0,
            inference: Dist::fixed_us(4_000_000),
            skew: Dist::fixed_us(0),
            ignore_yield_p: 0.0,
            crash_p: 0.0,
            hang_p: 0.0,
            channels: vec!["#general".into()],
        })
    }

    fn post(id: &str) -> ServerMsg {
        ServerMsg::Msg {
            id: id.into(),
            from: "operator".into(),
            to: "#general".into(),
            content: "q".into(),
            in_reply_to: None,
        }
    }

    #[test]
    fn csma_then_claim_then_reply() {
        let mut a = Agent::new(
            "agent-000".into(),
            behaviour(PolicyKind::Spec),
            ChaCha8Rng::seed_from_u64(1),
            0,
        );
        let mut out = Vec::new();
        let m = post("m0");
        a.handle(
            1000,
            Input::Server {
                msg: &m,
                depth: Some(0),
            },
            &mut out,
        );
        assert!(matches!(out[0], Output::Wants { .. }));
        assert!(matches!(
            out[1],
            Output::SetTimer {
                at_us: 2_001_000,
                kind: TimerKind::Csma,
                ..
            }
        ));
        out.clear();
        a.handle(2_001_000, Input::Timer { msg_id: "m0" }, &mut out);
        assert!(matches!(&out[0], Output::Send(ClientMsg::RespondingTo { .. })));
        assert!(matches!(
            out[1],
            Output::Infer {
                end: InferenceEnd::DoneAt(6_001_000),
                ..
            }
        ));
        assert!(a.is_running("m0"));
        out.clear();
        a.handle(
            6_001_000,
            Input::InferenceDone {
                msg_id: "m0",
                reply_id: Some("m1".into()),
            },
            &mut out,
        );
        assert!(matches!(out[0], Output::Done { .. }));
        assert!(matches!(&out[1], Output::Reply { parent, infer_us: 4_000_000, .. } if parent == "m0"));
        assert!(matches!(&out[2], Output::Idle { msg_id } if msg_id == "m0"));
    }

    #[test]
    fn yield_aborts_and_crash_loses() {
        let mut a = Agent::new(
            "agent-001".into(),
            behaviour(PolicyKind::Spec),
            ChaCha8Rng::seed_from_u64(1),
            0,
        );
        let mut out = Vec::new();
        for m in ["m0", "m1"] {
            let p = post(m);
            a.handle(
                0,
                Input::Server {
                    msg: &p,
                    depth: Some(0),
                },
                &mut out,
            );
            a.handle(2_000_000, Input::Timer { msg_id: m }, &mut out);
        }
        out.clear();
        let y = ServerMsg::Yield {
            msg_id: "m0".into(),
            winner: "agent-000".into(),
            channel: "#general".into(),
            detail: None,
        };
        a.handle(
            2_500_000,
            Input::Server {
                msg: &y,
                depth: None,
            },
            &mut out,
        );
        assert!(
            matches!(&out[0], Output::Abort { ran_us: 500_000, winner, .. } if winner == "agent-000")
        );
        out.clear();
        a.handle(3_000_000, Input::Crash, &mut out);
        assert!(matches!(&out[0], Output::Lost { msg_id, ran_us: 1_000_000, hung: false } if msg_id == "m1"));
        assert!(matches!(out.last(), Some(Output::Crashed)));
        assert!(!a.is_running("m1"));
    }
}
