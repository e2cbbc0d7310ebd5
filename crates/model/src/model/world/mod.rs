//! One simulated run: the world of docs/model.md driven by the event engine.
//!
//! The world only wires actors together. The server is the real
//! [`floor::Server`]; every agent is an [`Agent`] actor (which wraps the
//! real [`floor::sim::Client`]); the operator is a [`Workload`] actor. The world
//! adds the virtual clock (the [`Engine`]), the links between agents and
//! server, the scenario's script, and counts what happens (see
//! [`crate::metrics::run`]). One file per job:
//!
//! - `prepared.rs`: the scenario prepared for runs (and the actors built
//!   from it);
//! - this file: the events and the event loop;
//! - `operator.rs`: the operator's posts and the scenario's script;
//! - `server.rs`: feeding the server, its wake-ups, counting replies;
//! - `links.rs`: the up- and downlinks (delay, jitter, loss, FIFO);
//! - `agents.rs`: feeding agents and carrying out what they decide;
//! - `messages.rs`: message numbers and the holds that keep a message
//!   open until everything about it is over;
//! - `trace.rs`: the JSON Lines trace.
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

mod agents;
mod carrier;
mod links;
mod messages;
mod open;
mod operator;
mod prepared;
mod relays;
mod server;
mod trace;

pub use prepared::{Prepared, SELECTOR};

use crate::agent::{self, Agent, Workload};
use crate::dist::Stream;
use crate::engine::{Engine, EventKey};
use crate::floor::{self, PolicyKind};
use crate::limits::HORIZON_US;
use crate::metrics::run::{RunAccumulator, RunResult, ServerCounts};
use crate::model::dense::{Dense, MsgId};
use messages::MsgInfo;
use prepared::stream;
use rand::RngExt;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Name of the operator on the wire.
pub const OPERATOR: &str = "operator";

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

/// The world's messages, inputs and sends, named as the simulator names
/// things ([`Dense`]: integers; text only in the trace).
type ClientMsg = floor::ClientMsg<Dense>;
type ServerMsg = floor::ServerMsg<Dense>;
type Input = floor::Input<Dense>;

/// The events of the world.
#[derive(Debug)]
enum Ev {
    /// The operator posts its next message.
    Post,
    /// A client message reaches the server.
    ServerIn {
        agent: u32,
        /// Where the message waits in [`World::uplink`] (with, for a
        /// reply, its inference duration): the largest payload by far,
        /// kept out of the event (an event is moved into the queue and out
        /// again), in a slab that allocates nothing per message once it
        /// has grown to the messages in flight.
        msg: u32,
    },
    /// A server message reaches an agent.
    AgentIn {
        agent: u32,
        inc: u32,
        /// A relayed MSG's number is read from it on arrival
        /// ([`relay_of`]), not carried: the event stays 24 bytes.
        msg: Arc<ServerMsg>,
    },
    /// The next arrival of a large relay ([`relays`]) is due.
    Relay { id: u32 },
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
    /// A typing notice reaches agent `agent` (`carrier.kind = "typing"`).
    TypingIn {
        agent: u32,
        inc: u32,
        typer: u32,
        epoch: u32,
        on: bool,
    },
    /// The platform's expiry of `typer`'s typing indicator is due.
    TypingEnd { typer: u32, epoch: u32 },
}

// Every event is moved into the queue and out again (and, in a large
// channel, from bucket to bucket): keep it small.
const _: () = assert!(std::mem::size_of::<Ev>() <= 24);

/// The number of the message `msg` relays, if it is a MSG, or whose
/// claim it releases, if it is a FLOOR_RELEASED (the world's own messages
/// are numbered; a number the world does not know is
/// ignored where it is used).
fn relay_of(msg: &ServerMsg) -> Option<u32> {
    match msg {
        ServerMsg::Msg { id, .. } => id.number(),
        // A release keeps its question open until it arrives: an agent
        // may take the question up again then.
        ServerMsg::FloorReleased { msg_id, .. } => msg_id.number(),
        _ => None,
    }
}

/// An inference the world has scheduled the end of.
struct Inference {
    msg: u32,
    /// Its end event (`None`: hung, no end).
    key: Option<EventKey>,
    /// It counts in the metrics (its message is a channel message).
    counted: bool,
    /// A selection on a channel question: not an answer (`counted` is
    /// false, so its selection is no reply in the counts), but a crash
    /// that cuts it is wasted inference, as an agent's.
    selection: bool,
}

/// One agent as the world sees it: the actor, plus what the world keeps
/// about it (its links, whether it is up, the ends it scheduled).
struct AgentSlot {
    actor: Agent<Dense>,
    group: usize,
    /// Incarnation: bumped at a crash so stale events are ignored.
    inc: u32,
    alive: bool,
    /// Running inferences (a handful at most: a linear list).
    running: Vec<Inference>,
    /// Messages a crash let go of, held open until the server notices the
    /// disconnect: under a policy that announces a released claim, the
    /// other agents may take the question up again then.
    held_till_seen: Vec<u32>,
}

/// One direction of an agent's link: its random stream and, under FIFO,
/// the latest arrival time so far (40 bytes). Kept apart from
/// [`AgentSlot`]: a relay walks its recipients' downlinks in a row. (When
/// a stream was a 304-byte ChaCha8 buffer, two of them made every agent's
/// slot three times larger.)
struct Link {
    rng: Stream,
    last: u64,
}

/// Where trace lines go (one JSON object per line).
pub type TraceBuf = Vec<u8>;

/// The operator's posts in one replication: how many it made, and how many
/// the server refused (under `agentchat-0.36` with
/// `server.rate_limit_operator`: within the rate limit of its previous
/// post). Not a metric (not in the CSVs): `live --compare` compares them
/// with what a real server accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Posts {
    pub posted: u64,
    pub refused: u64,
}

struct World<'a> {
    p: &'a Prepared,
    policy: PolicyKind,
    eng: Engine<Ev>,
    server: floor::Server<Dense>,
    agents: Vec<AgentSlot>,
    /// Agent `i`'s uplink and downlink.
    up: Vec<Link>,
    down: Vec<Link>,
    workload: Workload,
    msgs: open::OpenMsgs,
    next_msg: u32,
    server_rng: Stream,
    wake: Option<(u64, EventKey)>,
    acc: RunAccumulator,
    /// What the server sends in one step (room kept between steps).
    out: floor::Sends<Dense>,
    /// Client messages on their way up, each with its inference time if
    /// it is a reply (see [`Ev::ServerIn`]), and the free entries.
    uplink: Vec<Option<(ClientMsg, Option<u64>)>>,
    uplink_free: Vec<u32>,
    outputs: Vec<agent::Output<Dense>>,
    trace: Option<&'a mut TraceBuf>,
    /// Scripted message ids and their numbers.
    labels: BTreeMap<String, u32>,
    /// Scripted inferences still to come, per scripted message: each keeps
    /// the message open until it has fired.
    script_holds: BTreeMap<u32, u32>,
    /// Set when a limit is hit inside an event; the run stops after it.
    halt: Option<RunLimit>,
    /// Whether the reply being sent counts its inference time (set by
    /// `infer_done` for the outputs of that one call).
    reply_counted: bool,
    posts: Posts,
    /// Prefetch agents' state ahead of events (see [`prefetch`]): only
    /// when it is too large for the caches to hold anyway.
    prefetch: bool,
    /// Large relays in flight, one event each ([`relays`]).
    relays: relays::Relays,
    /// Whether the deliveries of the server step being sent are collected
    /// in `batch` for a cursor, rather than scheduled one by one.
    batching: bool,
    /// Those deliveries (empty between steps; its room is kept).
    batch: relays::Batch,
    /// Each agent's send limits on the platform (empty: none).
    limits: Vec<carrier::Limits>,
    /// Under `typing`: what each agent has told the room, and the typers
    /// each agent sees (typer, epoch, on); empty otherwise.
    typing_out: Vec<carrier::TypingOut>,
    typing_in: Vec<Vec<(u32, u32, bool)>>,
}

/// Simulate one replication of `p` under `policy` with `seed`.
pub fn simulate(
    p: &Prepared,
    policy: PolicyKind,
    seed: u64,
    trace: Option<&mut TraceBuf>,
) -> Result<RunResult, RunLimit> {
    simulate_posts(p, policy, seed, trace).map(|(r, _)| r)
}

/// [`simulate`], with the operator's posts counted.
pub fn simulate_posts(
    p: &Prepared,
    policy: PolicyKind,
    seed: u64,
    trace: Option<&mut TraceBuf>,
) -> Result<(RunResult, Posts), RunLimit> {
    simulate_audited(p, policy, seed, trace).map(|(r, posts, _)| (r, posts))
}

/// [`simulate`], and the least claim TTL (ms) from which the replication
/// is the same replication, event for event: `None` when a claim or
/// marker expired, or an agent's decision turned on a claim's TTL running
/// out (it then depends on the TTL's exact value).
///
/// Why this holds: the TTL reaches a run only through the floor's
/// comparisons with it, which [`floor::sim::TtlAudit`] records (the server's
/// expiries, the clients' belief in a claim they saw), and through the
/// times of the server's wake-ups, which sit exactly at its next deadline
/// (`schedule_wake`): in a run without expiries none fires. Every agent's
/// clock in a simulation is an offset clock, so the agents' TTL is the
/// server's, in the same milliseconds. `herdsim tune` takes a candidate's
/// replication from another candidate's that differs only in the TTL when
/// the TTL is at least this; `tests/invariants.rs` checks it.
pub fn simulate_ttl(
    p: &Prepared,
    policy: PolicyKind,
    seed: u64,
) -> Result<(RunResult, Option<u64>), RunLimit> {
    simulate_audited(p, policy, seed, None).map(|(r, _, audit)| (r, audit.same_from()))
}

fn simulate_audited(
    p: &Prepared,
    policy: PolicyKind,
    seed: u64,
    trace: Option<&mut TraceBuf>,
) -> Result<(RunResult, Posts, floor::sim::TtlAudit), RunLimit> {
    // The agentchat sweep phase comes from a stream of its own (3), so
    // drawing it changes no other draw of the run.
    let sweep_phase_ms = p
        .sweep_phase_ms
        .unwrap_or_else(|| stream(seed, 3).random_range(0..p.sweep_every_ms.max(1)));
    // The carrier decides what the server and the agents run (default: the
    // policy itself for both).
    let (policy, client_policy) = p.carrier_policies(policy);
    let mut config = floor::Config::for_policy(policy);
    config.ttl_ms = p.ttl_ms;
    config.enabled = p.enabled;
    config.rate_limit_ms = p.rate_limit_ms;
    config.sweep_phase_ms = sweep_phase_ms;
    config.sweep_drift_us = p.sweep_drift_us;
    config.sweep_every_ms = p.sweep_every_ms;
    config.rate_limit_operator = p.rate_limit_operator;
    config.claim_guard = p.claim_guard;
    // agentchat 0.36.19's flood limit (docs/agentchat.md).
    config.frame_limit = true;
    let server = floor::Server::with_naming(config, p.names.clone());
    let agents = (0..p.agents())
        .map(|i| AgentSlot {
            actor: p.new_sim_agent(i, client_policy, seed),
            group: usize::from(p.agent_group[i]),
            inc: 0,
            alive: true,
            running: Vec::new(),
            held_till_seen: Vec::new(),
        })
        .collect();
    let link = |i: usize, k: u64| Link {
        rng: stream(seed, p.stream_of(i) + k),
        last: 0,
    };
    let up = (0..p.agents()).map(|i| link(i, 1)).collect();
    let down = (0..p.agents()).map(|i| link(i, 2)).collect();
    let mut w = World {
        p,
        policy,
        eng: Engine::with_capacity(1024),
        server,
        agents,
        up,
        down,
        workload: p.new_workload(seed),
        msgs: open::OpenMsgs::default(),
        next_msg: 0,
        server_rng: stream(seed, 2),
        wake: None,
        acc: RunAccumulator::new(),
        out: floor::Sends::new(),
        uplink: Vec::new(),
        uplink_free: Vec::new(),
        outputs: Vec::new(),
        trace,
        labels: BTreeMap::new(),
        script_holds: BTreeMap::new(),
        halt: None,
        reply_counted: false,
        posts: Posts::default(),
        prefetch: p.agents() * AGENT_BYTES > PREFETCH_ABOVE_BYTES,
        relays: relays::Relays::default(),
        batching: false,
        batch: relays::Batch::default(),
        limits: Vec::new(),
        typing_out: Vec::new(),
        typing_in: Vec::new(),
    };
    w.limits = w.new_limits();
    if p.carrier == crate::carrier::CarrierKind::Typing && p.profile.typing.is_some() {
        w.typing_out = vec![carrier::TypingOut::default(); p.agents()];
        w.typing_in = vec![Vec::new(); p.agents()];
    }
    let r = w.run()?;
    let mut audit = w.server.ttl_audit();
    for a in &w.agents {
        audit.merge(&a.actor.ttl_audit());
    }
    Ok((r, w.posts, audit))
}

impl World<'_> {
    fn run(&mut self) -> Result<RunResult, RunLimit> {
        self.trace_sweep_phase();
        // Everybody joins at t = 0; the operator joins the workload channel.
        for i in 0..self.agents.len() {
            self.join(i as u32);
        }
        self.server_input(Input::Join {
            agent: self.p.operator,
            channel: self.p.channel_dest,
        });
        self.schedule_script();
        self.schedule_next_post();
        let (max_events, max_pending) = (self.p.max_events, self.p.max_pending);
        loop {
            // The next event: from the queue, or the next arrival of a large
            // relay (kept apart, [`relays`]), which comes after the queue's
            // events due in the same microsecond.
            let next = match self.relays.next_due() {
                Some(t) => match self.eng.pop_due_by(t) {
                    Some(x) => Some(x),
                    None => self.relays.take_due().map(|(t, id)| (t, Ev::Relay { id })),
                },
                None => self.eng.pop(),
            };
            let Some((now, ev)) = next else {
                break;
            };
            // One branch per event; which limit it was is sorted out after.
            if (now > HORIZON_US) | (self.events() > max_events) {
                return Err(if now > HORIZON_US {
                    RunLimit::Horizon
                } else {
                    RunLimit::Events(max_events)
                });
            }
            // The next event's agent, fetched from memory while this one
            // runs (in a large channel, the agents' state is far larger
            // than the caches).
            if self.prefetch
                && let Some(agent) = match self.eng.hint(EVENT_PREFETCH_AHEAD) {
                    Some(
                        Ev::AgentIn { agent, .. }
                        | Ev::Timer { agent, .. }
                        | Ev::InferDone { agent, .. },
                    ) => Some(*agent),
                    Some(Ev::Relay { id }) => self.relays.agent_ahead(*id, 0, false),
                    _ => None,
                }
                && let Some(slot) = self.agents.get(agent as usize)
            {
                prefetch(slot);
            }
            self.dispatch(now, ev);
            let pending = self.eng.len() + self.relays.waiting();
            if (pending > max_pending) | self.halt.is_some() {
                return Err(match self.halt.take() {
                    Some(limit) => limit,
                    None => RunLimit::Pending(max_pending),
                });
            }
        }
        // Hung inferences keep messages open: close them now.
        let open = self.msgs.numbers();
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
        Ok(self.acc.finish(counts, self.events()))
    }

    /// Events so far: the queue's, and the arrivals of large relays.
    fn events(&self) -> u64 {
        self.eng.popped() + self.relays.taken()
    }

    /// Inlined into the event loop, its one caller.
    #[inline(always)]
    fn dispatch(&mut self, now: u64, ev: Ev) {
        // A delivery, whether scheduled on its own or the next arrival of
        // a large relay, goes through one call of `agent_in` (one call
        // site keeps it inlined into the loop).
        let arrival = match ev {
            Ev::AgentIn { agent, inc, msg } => {
                // Its own hold on the message it relays, which keeps the
                // message (and its depth) known until now.
                let relay = relay_of(&msg);
                let depth = relay.and_then(|m| self.msgs.get(&m)).map(|i| i.depth);
                let hold = agents::Hold {
                    relay,
                    depth,
                    release: true,
                };
                Some((agent, inc, msg, hold))
            }
            Ev::Relay { id } => self.next_arrival(id),
            ev => {
                self.dispatch_other(now, ev);
                None
            }
        };
        if let Some((agent, inc, msg, hold)) = arrival {
            self.agent_in(now, agent, inc, msg, hold);
        }
    }

    /// The next arrival of large relay `id`, its own next one made due.
    fn next_arrival(&mut self, id: u32) -> Option<(u32, u32, Arc<ServerMsg>, agents::Hold)> {
        // The cursor's next arrival was made due when this one was taken
        // ([`relays::Relays::take_due`]): before whatever this one causes.
        let (t, _) = self.relays.next(id)?;
        if self.prefetch
            && let Some(b) = self.relays.agent_ahead(id, 1, true)
            && let Some(slot) = self.agents.get(b as usize)
        {
            prefetch(slot);
        }
        Some((t.arrival.agent, t.arrival.inc, t.msg, t.hold))
    }

    /// Every event but a delivery.
    fn dispatch_other(&mut self, now: u64, ev: Ev) {
        match ev {
            // Deliveries: `dispatch`.
            Ev::AgentIn { .. } | Ev::Relay { .. } => {}
            Ev::Post => self.post(now),
            Ev::ServerIn { agent, msg } => {
                let slot = self.uplink.get_mut(msg as usize).and_then(Option::take);
                self.uplink_free.push(msg);
                if let Some((m, infer_us)) = slot {
                    self.server_in(now, agent, m, infer_us);
                }
            }
            Ev::Timer { agent, inc, msg } => {
                if self.agents[agent as usize].inc == inc {
                    self.typing_check(agent, msg);
                    let id = MsgId::of(msg);
                    self.feed(agent, agent::Input::Timer { msg_id: &id });
                }
            }
            Ev::InferDone { agent, msg } => self.infer_done(agent, msg),
            Ev::Crash { agent } => {
                let d = self.p.detect.sample_us(&mut self.server_rng);
                self.crash(agent, d);
            }
            Ev::DisconnectSeen { agent } => {
                let name = self.p.handles[agent as usize];
                self.server_input(Input::Disconnect { agent: name });
                for m in std::mem::take(&mut self.agents[agent as usize].held_till_seen) {
                    self.release(m);
                }
                let d = self.p.restart.sample_us(&mut self.server_rng);
                self.eng.post_in(d, Ev::Reconnect { agent });
            }
            Ev::Reconnect { agent } => {
                self.agents[agent as usize].alive = true;
                self.trace_state(agent, None, "reconnect", || serde_json::json!({}));
                self.join(agent);
            }
            Ev::Script { i } => self.script(now, i),
            Ev::TypingIn {
                agent,
                inc,
                typer,
                epoch,
                on,
            } => self.typing_in(agent, inc, typer, epoch, on),
            Ev::TypingEnd { typer, epoch } => self.typing_end(typer, epoch),
            Ev::ServerWake => {
                self.wake = None;
                self.server_input(Input::Tick);
            }
        }
    }
}

/// How many events ahead the event loop prefetches an agent's state.
/// Measured (10 000 agents x 100 messages, `spec`): 1 ahead 2.05 s, 2
/// ahead 1.8 s, 4 ahead no better.
const EVENT_PREFETCH_AHEAD: usize = 2;

/// Prefetching pays only when the agents' state outgrows the caches
/// (a few hundred agents and more); below, it is instructions for
/// nothing (+3% on the default scenario).
const PREFETCH_ABOVE_BYTES: usize = 1 << 20;

/// An agent's state in the world: its slot and its two links.
const AGENT_BYTES: usize = std::mem::size_of::<AgentSlot>() + 2 * std::mem::size_of::<Link>();

/// Ask the CPU to bring every cache line of `*x` into its caches, without
/// waiting for them: the next event's state arrives while the current one
/// runs. No effect on any result; a no-op off x86-64.
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = (x as *const T).cast::<i8>();
        for off in (0..std::mem::size_of::<T>()).step_by(64) {
            // SAFETY: a prefetch is a hint that never faults and reads
            // nothing the program sees; `p + off` lies inside `*x`. SSE is
            // part of every x86-64 target.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
