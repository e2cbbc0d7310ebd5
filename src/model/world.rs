//! One simulated run: the world of docs/model.md driven by the event engine.
//!
//! The world adds only time, randomness and transport. The server is the
//! real [`floor::Server`]; every agent runs the real [`floor::Client`]. The
//! world samples delays and durations, moves messages over links, and
//! counts what happens (see [`crate::metrics::run`]).
//!
//! Modelling choices (docs/model.md, "Every modelling choice"):
//! - Exempt messages (a DM to the agent, an @mention of it) are always
//!   answered (no `respond_p` draw), with no CSMA and no claim. DMs are not
//!   channel messages and stay out of every metric; @mentions count.
//! - A crash kills the agent process: all its waits and inferences end (the
//!   running ones count as wasted up to the crash); the server sees the
//!   disconnect after `disconnect_detect`, the agent rejoins its channels
//!   `restart` later with a fresh client; deliveries to it meanwhile are
//!   dropped. The crash instant is uniform over the drawn inference duration.
//! - An agent tracks claims only for messages it is handling; a claim that
//!   overtakes its message on a non-FIFO link is not remembered.
//! - Server processing time is added to the uplink delay (FIFO kept).

use crate::engine::{Engine, EventKey};
use crate::floor::{self, Action, ClientConfig, ClientMsg, Input, PolicyKind, Role, ServerMsg};
use crate::metrics::run::{MessageOutcome, RunAccumulator, RunResult, ServerCounts};
use crate::model::dist::{DataCache, Dist, DistError, DistSpec};
use crate::model::names;
use crate::scenario::limits::HORIZON_US;
use crate::scenario::{Arrivals, Scenario, ScriptEvent, SweepPhase};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Name of the operator on the wire.
pub const OPERATOR: &str = "operator";

/// Scenario values converted once per sweep point: distributions prepared
/// (empirical CSVs loaded), milliseconds turned into microseconds.
#[derive(Debug, Clone)]
pub struct Prepared {
    groups: Vec<GroupParams>,
    /// Agent index -> group index.
    agent_group: Vec<u16>,
    ids: Vec<String>,
    base_us: u64,
    jitter: Dist,
    processing: Dist,
    fifo: bool,
    loss_p: f64,
    ttl_ms: u64,
    enabled: bool,
    rate_limit_ms: u64,
    /// `None`: drawn per replication.
    sweep_phase_ms: Option<u64>,
    sweep_drift_us: u64,
    detect: Dist,
    restart: Dist,
    epoch_us: i64,
    gap: Dist,
    count: u64,
    duration_us: Option<u64>,
    channel: String,
    mention_p: f64,
    dm_p: f64,
    reply_p: f64,
    max_depth: u32,
    script: Vec<ScriptEvent>,
    /// Operator posts expected in one run (for progress weighting only).
    expected_posts: f64,
    /// Events one replication may process (`max_events`).
    max_events: u64,
    /// Events that may be pending at once (the memory budget of one run).
    max_pending: usize,
}

/// Why a replication stopped before its natural end. Every limit is
/// documented in docs/limits.md; the caller reports it as bad input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunLimit {
    #[error(
        "the replication processed more than {0} events (key `max_events`); raise \
         `max_events` or shrink the scenario (fewer messages, agents or cascades)"
    )]
    Events(u64),
    #[error(
        "the replication's virtual time passed the horizon of 1e13 ms (about 317 years); \
         shorten the workload (`workload.count`, `workload.mean_gap_ms`, \
         `workload.duration_ms`) or the cascades (`workload.max_depth`)"
    )]
    Horizon,
    #[error(
        "the replication created more than 4294967295 messages (operator posts and \
         replies); lower `workload.count` or `workload.reply_to_agent_p`"
    )]
    Messages,
    #[error(
        "the replication needed more than {0} pending events at once, more than its share \
         of the memory budget (`--max-memory`, or fewer `--jobs`); lower the number of \
         agents (`agents.*.count`) or how many of them answer (`respond_p`)"
    )]
    Pending(usize),
}

#[derive(Debug, Clone)]
struct GroupParams {
    respond_p: f64,
    csma: Dist,
    tick_us: u64,
    inference: Dist,
    skew: Dist,
    ignore_yield_p: f64,
    crash_p: f64,
    hang_p: f64,
    recheck: bool,
    max_rechecks: u32,
    channels: Vec<String>,
}

fn us(ms: f64) -> u64 {
    (ms * 1000.0).round() as u64
}

impl Prepared {
    /// Prepare a validated scenario; `base_dir` resolves empirical CSV paths.
    pub fn new(s: &Scenario, base_dir: &Path) -> Result<Prepared, DistError> {
        Prepared::with_cache(s, base_dir, &DataCache::default())
    }

    /// [`Prepared::new`], taking empirical data from `cache`: the points of
    /// a sweep share one parsed copy of each file.
    pub fn with_cache(
        s: &Scenario,
        base_dir: &Path,
        cache: &DataCache,
    ) -> Result<Prepared, DistError> {
        let prep = |d: &DistSpec| d.prepare_with(base_dir, cache);
        let mut groups = Vec::with_capacity(s.agents.len());
        let mut agent_group = Vec::new();
        for (gi, g) in s.agents.iter().enumerate() {
            groups.push(GroupParams {
                respond_p: g.respond_p,
                csma: prep(&g.csma)?,
                tick_us: us(g.csma_tick_ms),
                inference: prep(&g.inference)?,
                skew: prep(&g.clock_skew)?,
                ignore_yield_p: g.ignore_yield_p,
                crash_p: g.crash_p,
                hang_p: g.hang_p,
                recheck: g.recheck_on_expiry,
                max_rechecks: g.max_rechecks,
                channels: g.channels.clone(),
            });
            agent_group.extend(std::iter::repeat_n(gi as u16, g.count as usize));
        }
        let n = agent_group.len();
        let w = &s.workload;
        let gap = match w.arrivals {
            Arrivals::Poisson => DistSpec::Exponential {
                mean_ms: w.mean_gap_ms,
            },
            Arrivals::Fixed => DistSpec::Fixed { ms: w.mean_gap_ms },
        };
        Ok(Prepared {
            groups,
            ids: (0..n).map(|i| names::agent_id(i, n)).collect(),
            agent_group,
            base_us: us(s.network.base_ms),
            jitter: prep(&s.network.jitter)?,
            processing: prep(&s.server.processing)?,
            fifo: s.network.fifo,
            loss_p: s.network.loss_p,
            ttl_ms: s.server.ttl_ms.round() as u64,
            enabled: s.server.enabled,
            rate_limit_ms: s.server.rate_limit_ms.round() as u64,
            sweep_phase_ms: match s.server.sweep_phase_ms {
                SweepPhase::Ms(ms) => Some(ms.floor() as u64),
                SweepPhase::Word(_) => None,
            },
            sweep_drift_us: us(s.server.sweep_drift_ms),
            detect: prep(&s.server.disconnect_detect)?,
            restart: prep(&s.server.restart)?,
            epoch_us: (s.epoch_ms as i64).saturating_mul(1000),
            gap: prep(&gap)?,
            count: w.count,
            duration_us: w.duration_ms.map(us),
            channel: w.channel.clone(),
            mention_p: w.mention_p,
            dm_p: w.dm_p,
            reply_p: w.reply_to_agent_p,
            max_depth: w.max_depth,
            script: s.script.clone(),
            expected_posts: match w.duration_ms {
                Some(d) => d / w.mean_gap_ms.max(1e-9),
                None => w.count as f64,
            } + s.script.len() as f64,
            max_events: s.max_events,
            max_pending: usize::MAX,
        })
    }

    /// Cap the events pending at once (a replication that needs more
    /// stops with [`RunLimit::Pending`]); unbounded by default.
    pub fn set_max_pending(&mut self, n: usize) {
        // The event queue addresses at most u32::MAX pending events.
        self.max_pending = n.clamp(1, u32::MAX as usize - 1);
    }

    /// Number of agents.
    pub fn agents(&self) -> usize {
        self.ids.len()
    }

    /// A rough relative cost of one run, agents x expected posts (at least
    /// 1): what the progress bar weighs replications by, so that its ETA
    /// counts a 1000-agent point as the larger job it is. Not a result.
    pub fn expected_cost(&self) -> u64 {
        let c = self.agents() as f64 * self.expected_posts;
        if c.is_finite() && c >= 1.0 {
            c.min(1e15) as u64
        } else {
            1
        }
    }
}

/// The events of the world.
#[derive(Debug)]
enum Ev {
    /// The operator posts message number `n` (0-based).
    Post { n: u64 },
    /// A client message reaches the server.
    ServerIn {
        agent: u32,
        msg: ClientMsg,
        /// For a reply: its inference duration (for wasted-time accounting).
        infer_us: Option<u64>,
    },
    /// A server message reaches an agent.
    AgentIn {
        agent: u32,
        inc: u32,
        msg: ServerMsg,
    },
    /// A CSMA timer or a recheck wake fires.
    Timer { agent: u32, inc: u32, msg: u32 },
    /// An inference completes.
    InferDone { agent: u32, msg: u32 },
    /// An agent crashes in the middle of an inference.
    Crash { agent: u32 },
    /// The server notices a crashed agent's disconnect.
    DisconnectSeen { agent: u32 },
    /// A crashed agent is back and rejoins.
    Reconnect { agent: u32 },
    /// The server asked to be woken (expiry, sweeps).
    ServerWake,
    /// Scripted event number `i`.
    Script { i: usize },
}

struct Running {
    start_us: u64,
    dur_us: u64,
    key: Option<EventKey>,
    hung: bool,
    counted: bool,
}

struct Agent {
    group: usize,
    client: floor::Client,
    skew_us: i64,
    /// Incarnation: bumped at a crash so stale events are ignored.
    inc: u32,
    alive: bool,
    rng: ChaCha8Rng,
    up_rng: ChaCha8Rng,
    down_rng: ChaCha8Rng,
    up_last: u64,
    down_last: u64,
    running: BTreeMap<u32, Running>,
    /// Messages this agent is busy with (waiting, inferring, rechecking).
    active: BTreeSet<u32>,
}

struct MsgInfo {
    post_us: u64,
    depth: u32,
    /// Counts in metrics (a channel message, not a DM).
    channel_msg: bool,
    author: Option<u32>,
    wanted: u32,
    responses: u32,
    first_us: Option<u64>,
    /// Agents that started inference on it.
    starters: u32,
    /// Deliveries, agent activities and replies still in flight.
    pending: u32,
}

/// Where trace lines go (one JSON object per line).
pub type TraceBuf = Vec<u8>;

struct World<'a> {
    p: &'a Prepared,
    policy: PolicyKind,
    eng: Engine<Ev>,
    server: floor::Server,
    agents: Vec<Agent>,
    msgs: BTreeMap<u32, MsgInfo>,
    next_msg: u32,
    work_rng: ChaCha8Rng,
    server_rng: ChaCha8Rng,
    wake: Option<(u64, EventKey)>,
    acc: RunAccumulator,
    out: Vec<floor::Outgoing>,
    actions: Vec<Action>,
    trace: Option<&'a mut TraceBuf>,
    posted: u64,
    /// Scripted message ids and their numbers, both ways.
    labels: BTreeMap<String, u32>,
    label_of: BTreeMap<u32, String>,
    /// Duration and ignore-yield of the next inference, set by a script.
    forced: Option<(u64, bool)>,
    /// Scripted inferences still to come, per scripted message: each keeps
    /// the message open until it has fired.
    script_holds: BTreeMap<u32, u32>,
    /// Reused buffer for message ids looked up on the hot path.
    scratch: String,
    /// Set when a limit is hit inside an event; the run stops after it.
    halt: Option<RunLimit>,
}

/// Seed of component stream `stream` of a run.
fn stream(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// Simulate one replication of `p` under `policy` with `seed`.
pub fn simulate(
    p: &Prepared,
    policy: PolicyKind,
    seed: u64,
    trace: Option<&mut TraceBuf>,
) -> Result<RunResult, RunLimit> {
    // The agentchat sweep phase comes from a stream of its own (3), so
    // drawing it changes no other draw of the run.
    let sweep_phase_ms = p
        .sweep_phase_ms
        .unwrap_or_else(|| stream(seed, 3).random_range(0..floor::policy::AGENTCHAT_SWEEP_MS));
    let server = floor::Server::new(floor::Config {
        policy,
        ttl_ms: p.ttl_ms,
        enabled: p.enabled,
        rate_limit_ms: p.rate_limit_ms,
        sweep_phase_ms,
        sweep_drift_us: p.sweep_drift_us,
    });
    let n = p.agents();
    let mut agents = Vec::with_capacity(n);
    for i in 0..n {
        let gi = usize::from(p.agent_group[i]);
        let g = &p.groups[gi];
        let base = 16 + 4 * i as u64;
        let mut rng = stream(seed, base);
        let skew_us = g.skew.sample_signed_us(&mut rng);
        agents.push(Agent {
            group: gi,
            client: floor::Client::new(client_config(p, policy, i)),
            skew_us,
            inc: 0,
            alive: true,
            rng,
            up_rng: stream(seed, base + 1),
            down_rng: stream(seed, base + 2),
            up_last: 0,
            down_last: 0,
            running: BTreeMap::new(),
            active: BTreeSet::new(),
        });
    }
    let mut w = World {
        p,
        policy,
        eng: Engine::with_capacity(1024),
        server,
        agents,
        msgs: BTreeMap::new(),
        next_msg: 0,
        work_rng: stream(seed, 1),
        server_rng: stream(seed, 2),
        wake: None,
        acc: RunAccumulator::new(),
        out: Vec::new(),
        actions: Vec::new(),
        trace,
        posted: 0,
        labels: BTreeMap::new(),
        label_of: BTreeMap::new(),
        forced: None,
        script_holds: BTreeMap::new(),
        scratch: String::new(),
        halt: None,
    };
    w.run()
}

fn client_config(p: &Prepared, policy: PolicyKind, i: usize) -> ClientConfig {
    let g = &p.groups[usize::from(p.agent_group[i])];
    ClientConfig {
        id: p.ids[i].clone(),
        policy,
        ttl_ms: p.ttl_ms,
        recheck_on_expiry: g.recheck,
        max_rechecks: g.max_rechecks,
    }
}

impl World<'_> {
    fn run(&mut self) -> Result<RunResult, RunLimit> {
        if matches!(
            self.policy.rules().expiry,
            floor::policy::Expiry::Sweep { .. }
        ) {
            let cfg = self.server.config();
            let line = serde_json::json!({
                "t_us": 0, "ev": "sweep_phase",
                "phase_ms": cfg.sweep_phase_ms, "drift_us": cfg.sweep_drift_us,
            });
            self.trace_line(line);
        }
        // Everybody joins at t = 0; the operator joins the workload channel.
        for i in 0..self.agents.len() {
            self.join(i as u32);
        }
        let ch = self.p.channel.clone();
        self.server_input(Input::Join {
            agent: OPERATOR.into(),
            channel: ch,
        });
        self.schedule_script();
        self.schedule_next_post();
        let (max_events, max_pending) = (self.p.max_events, self.p.max_pending);
        while let Some((now, ev)) = self.eng.pop() {
            // One branch per event; which limit it was is sorted out after.
            if (now > HORIZON_US) | (self.eng.popped() > max_events) {
                return Err(if now > HORIZON_US {
                    RunLimit::Horizon
                } else {
                    RunLimit::Events(max_events)
                });
            }
            self.dispatch(now, ev);
            if (self.eng.len() > max_pending) | self.halt.is_some() {
                return Err(match self.halt.take() {
                    Some(limit) => limit,
                    None => RunLimit::Pending(max_pending),
                });
            }
        }
        // Hung inferences keep messages open: close them now.
        let open: Vec<u32> = self.msgs.keys().copied().collect();
        for m in open {
            self.finish_msg(m);
        }
        let st = self.server.stats();
        let counts = ServerCounts {
            yields: st.yields,
            expired: st.expired,
            relayed: st.relayed,
            overruled: st.overruled,
        };
        Ok(self.acc.finish(counts, self.eng.popped()))
    }

    fn join(&mut self, a: u32) {
        let g = self.agents[a as usize].group;
        for c in self.p.groups[g].channels.clone() {
            let agent = self.p.ids[a as usize].clone();
            self.server_input(Input::Join { agent, channel: c });
        }
    }

    fn schedule_next_post(&mut self) {
        if self.p.duration_us.is_none() && self.posted >= self.p.count {
            return;
        }
        let gap = self.p.gap.sample_us(&mut self.work_rng);
        let at = self.eng.now() + gap;
        if let Some(d) = self.p.duration_us
            && at > d
        {
            return;
        }
        self.eng.schedule_at(at, Ev::Post { n: self.posted });
        self.posted += 1;
    }

    fn dispatch(&mut self, now: u64, ev: Ev) {
        match ev {
            Ev::Post { n } => self.post(now, n),
            Ev::ServerIn {
                agent,
                msg,
                infer_us,
            } => self.server_in(now, agent, msg, infer_us),
            Ev::AgentIn { agent, inc, msg } => self.agent_in(now, agent, inc, msg),
            Ev::Timer { agent, inc, msg } => {
                if self.agents[agent as usize].inc == inc {
                    let id = self.id_of(msg);
                    self.with_client(agent, msg, |c, t, out| c.on_timer(t, &id, out));
                }
            }
            Ev::InferDone { agent, msg } => self.infer_done(now, agent, msg),
            Ev::Crash { agent } => {
                let d = self.p.detect.sample_us(&mut self.server_rng);
                self.crash(now, agent, d);
            }
            Ev::DisconnectSeen { agent } => {
                let name = self.p.ids[agent as usize].clone();
                self.server_input(Input::Disconnect { agent: name });
                let d = self.p.restart.sample_us(&mut self.server_rng);
                self.eng.schedule_in(d, Ev::Reconnect { agent });
            }
            Ev::Reconnect { agent } => {
                let a = &mut self.agents[agent as usize];
                a.alive = true;
                self.trace_state(agent, None, "reconnect", || serde_json::json!({}));
                self.join(agent);
            }
            Ev::Script { i } => self.script(now, i),
            Ev::ServerWake => {
                self.wake = None;
                self.server_input(Input::Tick);
            }
        }
    }

    // ----- the operator -------------------------------------------------

    fn post(&mut self, now: u64, _n: u64) {
        let m = self.new_msg();
        let (to, content) = self.draw_post(m);
        self.post_msg(now, m, to, content);
        self.schedule_next_post();
    }

    /// Where a random post goes and what it says (a DM, an @mention or a
    /// plain channel message).
    fn draw_post(&mut self, m: u32) -> (String, String) {
        let n_agents = self.agents.len() as u32;
        let r: f64 = self.work_rng.random();
        if r < self.p.dm_p {
            let k = self.work_rng.random_range(0..n_agents);
            (
                format!("@{}", self.p.ids[k as usize]),
                format!("question {m}"),
            )
        } else if r < self.p.dm_p + self.p.mention_p {
            let k = self.work_rng.random_range(0..n_agents);
            (
                self.p.channel.clone(),
                format!("@{} question {m}", self.p.ids[k as usize]),
            )
        } else {
            (self.p.channel.clone(), format!("question {m}"))
        }
    }

    /// The operator's message `m` reaches the server now.
    fn post_msg(&mut self, now: u64, m: u32, to: String, content: String) {
        let kind = if to.starts_with('@') {
            "dm"
        } else if content.split_whitespace().any(|w| w.starts_with('@')) {
            "mention"
        } else {
            "channel"
        };
        self.msgs.insert(
            m,
            MsgInfo {
                post_us: now,
                depth: 0,
                channel_msg: kind != "dm",
                author: None,
                wanted: 0,
                responses: 0,
                first_us: None,
                starters: 0,
                // Held until the relay is dispatched, and by scripted inferences.
                pending: 1 + self.script_holds.get(&m).copied().unwrap_or(0),
            },
        );
        let id = self.id_of(m);
        self.trace_line(serde_json::json!({
            "t_us": now, "ev": "post", "msg_id": id, "from": OPERATOR, "to": to, "kind": kind,
        }));
        let msg = ClientMsg::Msg {
            id: Some(id),
            to,
            content,
            in_reply_to: None,
        };
        self.server_input(Input::Client {
            from: OPERATOR.into(),
            role: Role::Operator,
            msg,
        });
        self.release(m);
    }

    fn new_msg(&mut self) -> u32 {
        let m = self.next_msg;
        match m.checked_add(1) {
            Some(next) => self.next_msg = next,
            None => self.halt = Some(RunLimit::Messages),
        }
        m
    }

    /// The wire id of message number `m`.
    fn id_of(&self, m: u32) -> String {
        match self.label_of.get(&m) {
            Some(label) => label.clone(),
            None => names::msg_id(m),
        }
    }

    /// The number of a wire message id.
    fn num_of(&self, id: &str) -> Option<u32> {
        match names::parse_msg(id) {
            Some(m) => Some(m),
            None => self.labels.get(id).copied(),
        }
    }

    // ----- the script ---------------------------------------------------

    /// Number the scripted posts and schedule every scripted event.
    fn schedule_script(&mut self) {
        let p = self.p;
        for e in &p.script {
            if let Some(post) = &e.post {
                let m = self.new_msg();
                self.labels.insert(post.id.clone(), m);
                self.label_of.insert(m, post.id.clone());
            }
        }
        for e in &self.p.script {
            if let Some(m) = e.infer.as_ref().and_then(|i| self.labels.get(&i.msg)) {
                *self.script_holds.entry(*m).or_insert(0) += 1;
            }
        }
        for i in 0..self.p.script.len() {
            let at = us(self.p.script[i].at_ms);
            self.eng.schedule_at(at, Ev::Script { i });
        }
    }

    fn script(&mut self, now: u64, i: usize) {
        let e = &self.p.script[i];
        if let Some(post) = &e.post {
            let Some(&m) = self.labels.get(&post.id) else {
                return;
            };
            let to = post.to.clone().unwrap_or_else(|| self.p.channel.clone());
            let content = post.content.clone();
            if post.from == OPERATOR {
                self.post_msg(now, m, to, content);
            } else if let Some(a) = names::parse_agent(&post.from, self.agents.len()) {
                let id = self.id_of(m);
                let msg = ClientMsg::Msg {
                    id: Some(id),
                    to,
                    content,
                    in_reply_to: None,
                };
                self.send_up(a, msg, None);
            }
        } else if let Some(inf) = &e.infer {
            let (Some(a), Some(&m)) = (
                names::parse_agent(&inf.agent, self.agents.len()),
                self.labels.get(&inf.msg),
            ) else {
                return;
            };
            if !self.agents[a as usize].alive {
                self.release(m);
                return;
            }
            let reply_to = self
                .p
                .script
                .iter()
                .filter_map(|o| o.post.as_ref())
                .find(|p| p.id == inf.msg)
                .and_then(|p| p.to.clone())
                .unwrap_or_else(|| self.p.channel.clone());
            let started_at = inf.started_at.unwrap_or_else(|| self.local_ms(a));
            self.forced = Some((us(inf.duration_ms), inf.ignore_yield));
            if self.agents[a as usize].active.insert(m)
                && let Some(info) = self.msgs.get_mut(&m)
            {
                info.wanted += 1;
                info.pending += 1;
            }
            let id = self.id_of(m);
            self.with_client(a, m, |c, _, out| {
                c.start_now(&id, &reply_to, started_at, out)
            });
            self.forced = None;
            self.release(m); // this event's hold
        } else if let Some(agent) = &e.disconnect
            && let Some(a) = names::parse_agent(agent, self.agents.len())
            && self.agents[a as usize].alive
        {
            self.crash(now, a, 0);
        }
    }

    // ----- the server side ----------------------------------------------

    fn server_now_ms(&self) -> u64 {
        self.eng.now() / 1000
    }

    /// Feed the server and deliver what it sends.
    fn server_input(&mut self, input: Input) {
        let now_ms = self.server_now_ms();
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.server.handle(now_ms, input, &mut out);
        for o in out.drain(..) {
            self.deliver(o);
        }
        self.out = out;
        self.schedule_wake();
    }

    fn schedule_wake(&mut self) {
        let Some(t_ms) = self.server.poll_timeout() else {
            return;
        };
        let now = self.eng.now();
        let mut at = t_ms.saturating_mul(1000);
        if at <= now {
            // Due now: wake at the next millisecond so a Tick makes progress.
            at = (now / 1000).saturating_add(1).saturating_mul(1000);
        }
        if let Some((cur, key)) = self.wake {
            if cur <= at {
                return;
            }
            self.eng.cancel(key);
        }
        let key = self.eng.schedule_at(at, Ev::ServerWake);
        self.wake = Some((at, key));
    }

    fn server_in(&mut self, now: u64, agent: u32, msg: ClientMsg, infer_us: Option<u64>) {
        if self.trace.is_some() {
            self.trace_line(serde_json::json!({
                "t_us": now, "ev": "server_recv", "agent": self.p.ids[agent as usize], "msg": msg.to_json(),
            }));
        }
        let mut posted = None;
        if let ClientMsg::Msg {
            id: Some(id),
            in_reply_to,
            to,
            ..
        } = &msg
        {
            let parent = in_reply_to.as_deref().and_then(|x| self.num_of(x));
            if let Some(m) = self.num_of(id) {
                posted = Some((m, parent, to.starts_with('#')));
            }
        }
        if let Some((m, parent, to_channel)) = posted {
            // A reply, or an agent's own (scripted) post.
            let depth = parent.map_or(0, |p| self.msgs.get(&p).map_or(0, |i| i.depth) + 1);
            // The reply is a channel message of its own (cascades).
            self.msgs.insert(
                m,
                MsgInfo {
                    post_us: now,
                    depth,
                    channel_msg: to_channel,
                    author: Some(agent),
                    wanted: 0,
                    responses: 0,
                    first_us: None,
                    starters: 0,
                    pending: 1 + self.script_holds.get(&m).copied().unwrap_or(0),
                },
            );
            let role = Role::Agent;
            let from = self.p.ids[agent as usize].clone();
            let refused_before = self.server.stats().refused_msgs;
            self.server_input(Input::Client { from, role, msg });
            // A MSG the server refused (agentchat-0.36: rate limit, DMs) is
            // not relayed: nobody sees it, it answers nothing, its
            // inference is wasted like a lost reply's.
            let refused = self.server.stats().refused_msgs > refused_before;
            let dur = infer_us.unwrap_or(0);
            if refused {
                self.msgs.remove(&m);
                if let Some(info) = parent.and_then(|p| self.msgs.get(&p))
                    && info.channel_msg
                    && infer_us.is_some()
                {
                    self.acc.wasted(dur);
                }
            } else if let Some(info) = parent.and_then(|p| self.msgs.get_mut(&p)) {
                info.responses += 1;
                let first = info.first_us.is_none();
                if first {
                    info.first_us = Some(now);
                }
                if info.channel_msg && infer_us.is_some() {
                    if first {
                        self.acc.useful(dur);
                    } else {
                        self.acc.wasted(dur);
                    }
                }
            }
            self.release(m);
            if let Some(parent) = parent {
                self.release(parent);
            }
            return;
        }
        let from = self.p.ids[agent as usize].clone();
        self.server_input(Input::Client {
            from,
            role: Role::Agent,
            msg,
        });
    }

    /// Send one server message down an agent's link.
    fn deliver(&mut self, o: floor::Outgoing) {
        let now = self.eng.now();
        if self.trace.is_some() {
            self.trace_line(serde_json::json!({
                "t_us": now, "ev": "server_send", "to": o.to, "msg": o.msg.to_json(),
            }));
        }
        let Some(agent) = names::parse_agent(&o.to, self.agents.len()) else {
            return; // the operator (not simulated) or an unknown name
        };
        let relay_of = match &o.msg {
            ServerMsg::Msg { id, .. } => self.num_of(id),
            _ => None,
        };
        let a = &mut self.agents[agent as usize];
        if self.p.loss_p > 0.0 && a.down_rng.random_bool(self.p.loss_p) {
            self.acc.lost += 1;
            if self.trace.is_some() {
                let name = self.p.ids[agent as usize].clone();
                self.trace_line(serde_json::json!({
                    "t_us": now, "ev": "lost", "dir": "down", "agent": name, "msg": o.msg.to_json(),
                }));
            }
            return;
        }
        let delay = self.p.base_us + self.p.jitter.sample_us(&mut a.down_rng);
        let mut at = now + delay;
        if self.p.fifo {
            at = at.max(a.down_last);
            a.down_last = at;
        }
        let inc = a.inc;
        if let Some(m) = relay_of
            && let Some(info) = self.msgs.get_mut(&m)
        {
            info.pending += 1;
        }
        self.eng.schedule_at(
            at,
            Ev::AgentIn {
                agent,
                inc,
                msg: o.msg,
            },
        );
    }

    // ----- the agent side -----------------------------------------------

    fn local_ms(&self, agent: u32) -> i64 {
        let a = &self.agents[agent as usize];
        let t = self.p.epoch_us + self.eng.now() as i64 + a.skew_us;
        t.div_euclid(1000)
    }

    /// Send a client message up an agent's link.
    fn send_up(&mut self, agent: u32, msg: ClientMsg, infer_us: Option<u64>) {
        let now = self.eng.now();
        let name = &self.p.ids[agent as usize];
        if self.trace.is_some() {
            let line = serde_json::json!({
                "t_us": now, "ev": "send", "agent": name, "msg": msg.to_json(),
            });
            self.trace_line(line);
        }
        let a = &mut self.agents[agent as usize];
        if self.p.loss_p > 0.0 && a.up_rng.random_bool(self.p.loss_p) {
            self.acc.lost += 1;
            if self.trace.is_some() {
                let line = serde_json::json!({
                    "t_us": now, "ev": "lost", "dir": "up", "agent": name, "msg": msg.to_json(),
                });
                self.trace_line(line);
            }
            if let ClientMsg::Msg { in_reply_to, .. } = &msg {
                // A lost reply is wasted inference.
                let parent = in_reply_to.as_deref().and_then(|x| self.num_of(x));
                if let (Some(d), Some(p)) = (infer_us, parent) {
                    if self.msgs.get(&p).is_some_and(|i| i.channel_msg) {
                        self.acc.wasted(d);
                    }
                    self.release(p);
                }
            }
            return;
        }
        let delay = self.p.base_us
            + self.p.jitter.sample_us(&mut a.up_rng)
            + self.p.processing.sample_us(&mut self.server_rng);
        let mut at = now + delay;
        if self.p.fifo {
            at = at.max(a.up_last);
            a.up_last = at;
        }
        self.eng.schedule_at(
            at,
            Ev::ServerIn {
                agent,
                msg,
                infer_us,
            },
        );
    }

    fn agent_in(&mut self, now: u64, agent: u32, inc: u32, msg: ServerMsg) {
        let relay_of = match &msg {
            ServerMsg::Msg { id, .. } => self.num_of(id),
            _ => None,
        };
        let a = &self.agents[agent as usize];
        if a.inc != inc || !a.alive {
            if let Some(m) = relay_of {
                self.release(m);
            }
            return;
        }
        if self.trace.is_some() {
            let line = serde_json::json!({
                "t_us": now, "ev": "recv", "agent": self.p.ids[agent as usize], "msg": msg.to_json(),
            });
            self.trace_line(line);
        }
        // Let the client record claims, responses and YIELDs first.
        let t = self.local_ms(agent);
        let mut actions = std::mem::take(&mut self.actions);
        actions.clear();
        self.agents[agent as usize]
            .client
            .on_server_msg(t, &msg, &mut actions);
        self.apply(agent, &mut actions);
        self.actions = actions;
        // Only the message this one is about can have changed state.
        let subject = match &msg {
            ServerMsg::RespondingTo { msg_id, .. }
            | ServerMsg::Yield { msg_id, .. }
            | ServerMsg::FloorClaimed { msg_id, .. } => Some(msg_id.as_str()),
            ServerMsg::Msg { in_reply_to, .. } => in_reply_to.as_deref(),
            ServerMsg::Error { .. } => None,
        };
        if let Some(m) = subject.and_then(|id| self.num_of(id)) {
            self.settle(agent, m);
        }
        if let (
            Some(m),
            ServerMsg::Msg {
                from, to, content, ..
            },
        ) = (relay_of, &msg)
        {
            self.consider(agent, m, from, to, content);
            self.release(m);
        }
    }

    /// A relayed MSG reached `agent`: does it want to answer?
    fn consider(&mut self, agent: u32, m: u32, from: &str, to: &str, content: &str) {
        let me = &self.p.ids[agent as usize];
        let Some(info) = self.msgs.get(&m) else {
            return;
        };
        if info.author == Some(agent) {
            return;
        }
        let dm = to.strip_prefix('@') == Some(me.as_str());
        let mention = !dm && mentions(content, me);
        let exempt = dm || mention || from == "@server";
        let depth = info.depth;
        let g = &self.p.groups[self.agents[agent as usize].group];
        let p = if depth == 0 {
            g.respond_p
        } else if depth < self.p.max_depth {
            self.p.reply_p
        } else {
            0.0
        };
        let wants = exempt || (p > 0.0 && self.agents[agent as usize].rng.random_bool(p));
        if !wants {
            return;
        }
        let reply_to = if dm {
            format!("@{from}")
        } else {
            to.to_string()
        };
        if let Some(info) = self.msgs.get_mut(&m) {
            info.wanted += 1;
            info.pending += 1;
        }
        self.agents[agent as usize].active.insert(m);
        let id = self.id_of(m);
        self.with_client(agent, m, |c, t, out| {
            c.on_message(t, &id, &reply_to, exempt, out)
        });
    }

    /// Run one client call for message `m` and apply its actions.
    fn with_client(
        &mut self,
        agent: u32,
        m: u32,
        f: impl FnOnce(&mut floor::Client, i64, &mut Vec<Action>),
    ) {
        let t = self.local_ms(agent);
        let mut actions = std::mem::take(&mut self.actions);
        actions.clear();
        f(&mut self.agents[agent as usize].client, t, &mut actions);
        self.apply(agent, &mut actions);
        self.actions = actions;
        self.settle(agent, m);
    }

    fn apply(&mut self, agent: u32, actions: &mut Vec<Action>) {
        for action in actions.drain(..) {
            match action {
                Action::StartCsma { msg_id } => {
                    let Some(m) = self.num_of(&msg_id) else {
                        continue;
                    };
                    let now = self.eng.now();
                    let a = &mut self.agents[agent as usize];
                    let g = &self.p.groups[a.group];
                    let mut due = now + g.csma.sample_us(&mut a.rng);
                    if g.tick_us > 0 {
                        due = due.div_ceil(g.tick_us) * g.tick_us;
                    }
                    let inc = a.inc;
                    self.eng.schedule_at(due, Ev::Timer { agent, inc, msg: m });
                    self.trace_state(
                        agent,
                        Some(m),
                        "csma",
                        || serde_json::json!({"until_us": due}),
                    );
                }
                Action::WakeAt { msg_id, at_ms } => {
                    let Some(m) = self.num_of(&msg_id) else {
                        continue;
                    };
                    let a = &self.agents[agent as usize];
                    let virt = at_ms
                        .saturating_mul(1000)
                        .saturating_sub(self.p.epoch_us + a.skew_us);
                    let at = u64::try_from(virt).unwrap_or(0).max(self.eng.now());
                    let inc = a.inc;
                    self.eng.schedule_at(at, Ev::Timer { agent, inc, msg: m });
                    self.trace_state(
                        agent,
                        Some(m),
                        "recheck_wait",
                        || serde_json::json!({"until_us": at}),
                    );
                }
                Action::Send(msg) => {
                    if matches!(msg, ClientMsg::RespondingTo { .. }) {
                        self.acc.claims += 1;
                    }
                    self.send_up(agent, msg, None);
                }
                Action::StartInference { msg_id, started_at } => {
                    if let Some(m) = self.num_of(&msg_id) {
                        self.start_inference(agent, m, &msg_id, started_at);
                    }
                }
                Action::Abort { msg_id, winner } => {
                    if let Some(m) = self.num_of(&msg_id) {
                        self.abort(agent, m, &winner);
                    }
                }
                Action::Skip { msg_id, reason } => {
                    if let Some(m) = self.num_of(&msg_id) {
                        let reason = match reason {
                            floor::SkipReason::SeenClaim => "seen_claim",
                            floor::SkipReason::SeenResponse => "seen_response",
                        };
                        self.trace_state(
                            agent,
                            Some(m),
                            "skip",
                            || serde_json::json!({"reason": reason}),
                        );
                    }
                }
            }
        }
    }

    fn start_inference(&mut self, agent: u32, m: u32, msg_id: &str, started_at: i64) {
        let now = self.eng.now();
        let counted = match self.msgs.get_mut(&m) {
            Some(info) => {
                info.starters += 1;
                info.channel_msg
            }
            None => false,
        };
        let a = &mut self.agents[agent as usize];
        let g = &self.p.groups[a.group];
        // Fixed draw order: duration, fault, ignore-yield. A scripted
        // inference draws nothing: its duration is given, it never faults.
        let (dur, ignore, hung, crash) = match self.forced.take() {
            Some((dur, ignore)) => (dur, ignore, false, false),
            None => {
                let dur = g.inference.sample_us(&mut a.rng);
                let fault: f64 = a.rng.random();
                let ignore = g.ignore_yield_p > 0.0 && a.rng.random_bool(g.ignore_yield_p);
                let hung = fault < g.hang_p;
                (dur, ignore, hung, !hung && fault < g.hang_p + g.crash_p)
            }
        };
        let key = if hung {
            None
        } else if crash {
            let at = now + (dur as f64 * a.rng.random::<f64>()).round() as u64;
            Some(self.eng.schedule_at(at, Ev::Crash { agent }))
        } else {
            Some(
                self.eng
                    .schedule_at(now + dur, Ev::InferDone { agent, msg: m }),
            )
        };
        if ignore || hung {
            a.client.set_ignore_yield(msg_id, true);
        }
        a.running.insert(
            m,
            Running {
                start_us: now,
                dur_us: dur,
                key,
                hung,
                counted,
            },
        );
        if counted {
            self.acc.started();
            if hung {
                self.acc.wasted(0);
            }
        }
        let until = if hung { None } else { Some(now + dur) };
        self.trace_state(
            agent,
            Some(m),
            "infer",
            || serde_json::json!({"started_at": started_at, "until_us": until, "ignore_yield": ignore, "hung": hung, "crash": crash}),
        );
    }

    fn abort(&mut self, agent: u32, m: u32, winner: &str) {
        let now = self.eng.now();
        let a = &mut self.agents[agent as usize];
        let Some(r) = a.running.get(&m) else {
            return;
        };
        if r.hung {
            return; // a hung inference obeys nothing
        }
        let Some(r) = a.running.remove(&m) else {
            return;
        };
        if let Some(k) = r.key {
            self.eng.cancel(k);
        }
        if r.counted {
            self.acc.wasted(now - r.start_us);
        }
        self.trace_state(
            agent,
            Some(m),
            "abort",
            || serde_json::json!({"winner": winner}),
        );
    }

    fn infer_done(&mut self, now: u64, agent: u32, m: u32) {
        let Some(r) = self.agents[agent as usize].running.remove(&m) else {
            return;
        };
        self.trace_state(agent, Some(m), "done", || serde_json::json!({}));
        let reply = self.new_msg();
        let id = self.id_of(m);
        let reply_id = self.id_of(reply);
        let content = format!("answer to {id} from {}", self.p.ids[agent as usize]);
        let t = self.local_ms(agent);
        let mut actions = std::mem::take(&mut self.actions);
        actions.clear();
        self.agents[agent as usize].client.on_inference_done(
            t,
            &id,
            Some(reply_id),
            content,
            &mut actions,
        );
        // The reply carries its inference time for the wasted-time count;
        // it keeps the parent open until it reaches the server (or is lost).
        let dur = if r.counted { Some(r.dur_us) } else { None };
        for action in actions.drain(..) {
            match action {
                Action::Send(msg @ ClientMsg::Msg { .. }) => {
                    if let Some(info) = self.msgs.get_mut(&m) {
                        info.pending += 1;
                    }
                    self.send_up(agent, msg, dur);
                }
                other => {
                    let mut one = vec![other];
                    self.apply(agent, &mut one);
                }
            }
        }
        self.actions = actions;
        let _ = now;
        self.settle(agent, m);
    }

    /// The agent's process dies now; the server notices after `detect_us`.
    fn crash(&mut self, now: u64, agent: u32, detect_us: u64) {
        let a = &mut self.agents[agent as usize];
        // Compared for equality only: wrapping after 2^32 crashes is harmless.
        a.inc = a.inc.wrapping_add(1);
        a.alive = false;
        let running = std::mem::take(&mut a.running);
        let active = std::mem::take(&mut a.active);
        a.client = floor::Client::new(client_config(self.p, self.policy, agent as usize));
        for (_, r) in running {
            if let Some(k) = r.key {
                self.eng.cancel(k);
            }
            if r.counted && !r.hung {
                self.acc.wasted(now - r.start_us);
            }
        }
        for m in active {
            self.release(m);
        }
        self.trace_state(agent, None, "crash", || serde_json::json!({}));
        self.eng
            .schedule_in(detect_us, Ev::DisconnectSeen { agent });
    }

    /// If `agent` is no longer busy with `m`, release its hold on `m`.
    fn settle(&mut self, agent: u32, m: u32) {
        if !self.agents[agent as usize].active.contains(&m) {
            return;
        }
        let a = &mut self.agents[agent as usize];
        if a.running.contains_key(&m) {
            return;
        }
        let tracking = match self.label_of.get(&m) {
            Some(label) => a.client.is_tracking(label),
            None => {
                self.scratch.clear();
                names::push_msg_id(&mut self.scratch, m);
                a.client.is_tracking(&self.scratch)
            }
        };
        if tracking {
            return;
        }
        a.active.remove(&m);
        self.release(m);
    }

    /// Drop one hold on message `m`; finish it when none is left.
    fn release(&mut self, m: u32) {
        let done = match self.msgs.get_mut(&m) {
            Some(info) => {
                info.pending = info.pending.saturating_sub(1);
                info.pending == 0
            }
            None => false,
        };
        if done {
            self.finish_msg(m);
        }
    }

    fn finish_msg(&mut self, m: u32) {
        if let Some(info) = self.msgs.remove(&m)
            && info.channel_msg
        {
            self.acc.message(MessageOutcome {
                wanted: info.wanted,
                responses: info.responses,
                ttfr_us: info.first_us.map(|f| f - info.post_us),
                starters: info.starters,
            });
        }
    }

    // ----- trace --------------------------------------------------------

    fn trace_line(&mut self, v: serde_json::Value) {
        if let Some(buf) = self.trace.as_deref_mut() {
            // Writing JSON into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *buf, &v);
            buf.push(b'\n');
        }
    }

    /// An agent state change; `extra` builds the event's own fields (only
    /// when tracing, so untraced runs allocate nothing here).
    fn trace_state(
        &mut self,
        agent: u32,
        m: Option<u32>,
        ev: &str,
        extra: impl FnOnce() -> serde_json::Value,
    ) {
        if self.trace.is_none() {
            return;
        }
        let extra = extra();
        let mut line = serde_json::json!({
            "t_us": self.eng.now(),
            "ev": ev,
            "agent": self.p.ids[agent as usize],
        });
        if let Some(m) = m {
            line["msg_id"] = serde_json::Value::String(self.id_of(m));
        }
        if let (Some(obj), serde_json::Value::Object(more)) = (line.as_object_mut(), extra) {
            obj.extend(more);
        }
        self.trace_line(line);
    }
}

/// Does `content` @mention `id` (as a whole word)?
fn mentions(content: &str, id: &str) -> bool {
    if !content.contains('@') {
        return false;
    }
    content.split_whitespace().any(|w| {
        w.strip_prefix('@').map(|rest| {
            rest.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
        }) == Some(id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mention_is_a_whole_word() {
        assert!(mentions("@agent-001 hello", "agent-001"));
        assert!(mentions("hi @agent-001, please", "agent-001"));
        assert!(!mentions("@agent-0011 hello", "agent-001"));
        assert!(!mentions("agent-001", "agent-001"));
    }
}
