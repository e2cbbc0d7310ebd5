//! The agent and the operator as sans-IO actors.
//!
//! An [`Agent`] is everything one agent decides: whether it answers a
//! message (`respond_p`, DMs, @mentions), the distribution of its CSMA
//! wait (the client draws each wait from it and times it), the duration of
//! an inference, its faults (hang, crash, ignore-yield) and the
//! RESPONDING_TO client rules of [`floor::sim::Client`], which it wraps. It has no clock, no
//! socket and no event queue: the driver feeds it [`Input`]s with the time
//! ([`Agent::handle`]) and carries out the [`Output`]s it returns (send
//! this, call me back at, an inference runs until, cancel that). Its
//! randomness comes from the one stream it is given, drawn in a fixed
//! order, so under the simulator's virtual clock the same inputs give the
//! same outputs, and a driver with real time and real sockets
//! (`herdsim live`) runs the very same code.
//!
//! The operator's side, the [`Workload`], is a sans-IO actor of the same
//! kind: when the next post is due and what it says.
//!
//! Time: the driver's clock is monotonic microseconds of scenario time
//! (`now_us`). The agent's local wall clock, which stamps its claims
//! (`started_at`), is a [`Clock`]: `now_us + offset` under the simulator
//! (the scenario epoch plus the agent's clock skew), or, in a live run whose
//! scenario time runs `speed` times faster than real time, the real wall
//! clock plus the skew scaled by the speed, so that herdsim's agents race
//! real agents on a shared server fairly.

mod gate;
mod selector;
mod workload;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use gate::{Gate, Scheme, owner_of};
pub use workload::{Pick, Post, PostKind, Workload, WorkloadParams};

use crate::dist::Dist;
use crate::dist::Stream;
use crate::floor::sim::Action;
use crate::floor::{
    self, ClientConfig, ClientMsg, CsmaDraw, CsmaWindow, Naming, PolicyKind, ServerMsg, SkipReason,
    Text,
};
use litemap::LiteMap;
use rand::RngExt;
use std::borrow::Borrow;
use std::sync::Arc;

/// What an agent needs of a [`Naming`] beyond what the floor asks: its
/// answers' text, @mentions, DMs and (for squatters) the ids that follow
/// a message's. Under [`Text`] these are the wire strings' own rules.
pub trait AgentNaming: Naming {
    /// Whether `content` @mentions `me` (a word `@me`, trailing
    /// punctuation ignored).
    fn mentions(&self, content: &Self::Content, me: &Self::Agent) -> bool;
    /// Whether `content` @mentions anybody (a word starting with `@`
    /// followed by a name).
    fn mentions_anyone(&self, content: &Self::Content) -> bool;
    /// The content of `me`'s answer to `msg`: `answer to <msg> from <me>`.
    fn answer(&self, msg: &Self::Msg, me: &Self::Agent) -> Self::Content;
    /// Whether `from` is the server itself (`@server`: its notices are
    /// always answered).
    fn is_server(&self, from: &Self::Agent) -> bool;
    /// The DM target of `peer` (`@peer`).
    fn dm_to(&self, peer: &Self::Agent) -> Self::Dest;
    /// Whether `to` is a DM to `me` (`@me`).
    fn is_dm_to(&self, to: &Self::Dest, me: &Self::Agent) -> bool;
    /// The id `k` after `m`: an id ending in a number `n` is followed by
    /// the same prefix with `n + k`; `None` if `m` ends in no number.
    fn msg_after(&self, m: &Self::Msg, k: u64) -> Option<Self::Msg>;
    /// The content of the selector's selection of `chosen` to answer
    /// `msg`: `@<chosen> please answer <msg>`.
    fn select(&self, msg: &Self::Msg, chosen: &Self::Agent) -> Self::Content;
}

impl AgentNaming for Text {
    fn mentions(&self, content: &String, me: &String) -> bool {
        mentions(content, me)
    }

    fn mentions_anyone(&self, content: &String) -> bool {
        mentions_anyone(content)
    }

    fn answer(&self, msg: &String, me: &String) -> String {
        let mut content = String::with_capacity(20 + msg.len() + me.len());
        content.push_str("answer to ");
        content.push_str(msg);
        content.push_str(" from ");
        content.push_str(me);
        content
    }

    fn is_server(&self, from: &String) -> bool {
        from == "@server"
    }

    fn dm_to(&self, peer: &String) -> String {
        format!("@{peer}")
    }

    fn is_dm_to(&self, to: &String, me: &String) -> bool {
        to.strip_prefix('@') == Some(me.as_str())
    }

    fn msg_after(&self, m: &String, k: u64) -> Option<String> {
        let digits = m.bytes().rev().take_while(u8::is_ascii_digit).count();
        let (prefix, number) = m.split_at(m.len() - digits);
        let n = number.parse::<u64>().ok()?;
        Some(format!("{prefix}{}", n.saturating_add(k)))
    }

    fn select(&self, msg: &String, chosen: &String) -> String {
        format!("@{chosen} please answer {msg}")
    }
}

/// What an agent is like: one per scenario agent group, shared by its
/// agents.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// How long a seen claim is believed live (ms of the local clock).
    pub ttl_ms: u64,
    /// After skipping for a claim, decide again once it is believed expired.
    pub recheck: bool,
    /// At most this many rechecks per message.
    pub max_rechecks: u32,
    /// Probability of answering a root message (one from the operator).
    pub respond_p: f64,
    /// Probability of answering a reply of depth below `max_depth`.
    pub reply_p: f64,
    /// Replies at this depth or deeper are never answered.
    pub max_depth: u32,
    /// The CSMA wait before claiming.
    pub csma: Dist,
    /// CSMA timers fire on multiples of this (driver time; 0: exact).
    pub tick_us: u64,
    /// Inference duration.
    pub inference: Dist,
    /// Probability that an inference ignores YIELD (per inference).
    pub ignore_yield_p: f64,
    /// Probability that the process crashes during an inference.
    pub crash_p: f64,
    /// Probability that an inference hangs (never ends, obeys nothing).
    pub hang_p: f64,
    /// A floor squatter (a fault): `None` for an honest agent.
    pub squat: Option<Squat>,
}

/// A floor squatter: it never answers anything. On every channel message
/// it sees it claims that message at once (if `react`) and pre-claims the
/// next `ahead` message ids (as [`AgentNaming::msg_after`] says: as text,
/// an id ending in a number `n` is followed by the same prefix with
/// `n + 1`, `n + 2`, ...), dating each claim
/// `lead_ms` before its clock (`started_at` at least 1: `agentchat-0.36`
/// drops 0). It draws nothing at random and ignores whatever the server
/// answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Squat {
    pub ahead: u32,
    pub react: bool,
    pub lead_ms: i64,
}

/// Which timer an [`Output::SetTimer`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    /// The CSMA wait before claiming.
    Csma,
    /// A recheck once a seen claim is believed expired.
    Recheck,
    /// The selector's fallback: select again if no answer was seen.
    Fallback,
}

/// How a started inference ends, if nothing stops it first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InferenceEnd {
    /// Feed [`Input::InferenceDone`] at this driver time.
    DoneAt(u64),
    /// The process crashes at this driver time: feed [`Input::Crash`].
    CrashAt(u64),
    /// It never ends and obeys nothing: feed nothing.
    Hang,
}

/// Something that happened to the agent.
#[derive(Debug, Clone)]
pub enum Input<'a, N: Naming = Text> {
    /// A server message arrived. `depth`: for a relayed MSG the agent may
    /// answer, its depth (0: a root message from the operator, 1: a reply
    /// to a root, ...); `None`: do not consider answering it (not a MSG, or
    /// a message the driver does not know).
    Server {
        msg: &'a ServerMsg<N>,
        depth: Option<u32>,
    },
    /// A timer set by [`Output::SetTimer`] is due.
    Timer { msg_id: &'a N::Msg },
    /// The inference of `msg_id` finished ([`InferenceEnd::DoneAt`] came).
    /// `reply_id`: the id of the reply (`None`: the server assigns).
    InferenceDone {
        msg_id: &'a N::Msg,
        reply_id: Option<N::Msg>,
    },
    /// The process dies now ([`InferenceEnd::CrashAt`] came, or a scripted
    /// disconnect). Everything in flight is forgotten.
    Crash,
    /// A scripted inference (replaying an incident): start inferring on
    /// `msg_id` now, whatever the agent has seen, for `duration_us`, never
    /// faulting, ignoring YIELD if `ignore_yield`.
    StartNow {
        msg_id: &'a N::Msg,
        reply_to: &'a N::Dest,
        started_at: i64,
        duration_us: u64,
        ignore_yield: bool,
    },
}

/// Something the driver must do, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum Output<N: Naming = Text> {
    /// Send this to the server (a claim, RESPONDING_TO).
    Send(ClientMsg<N>),
    /// Send this reply, a MSG answering `parent`, the result of an
    /// inference of `infer_us`.
    Reply {
        msg: ClientMsg<N>,
        parent: N::Msg,
        infer_us: u64,
    },
    /// The agent decided to answer `msg_id` (its `respond_p` drew yes, it
    /// was a DM or an @mention, or a scripted inference started).
    Wants { msg_id: N::Msg },
    /// The agent takes up `msg_id` again after it had let it go: the claim
    /// it skipped for was released (FLOOR_RELEASED, its holder gone), so it
    /// starts a new CSMA wait. Not a second "wants": it holds the message
    /// open again.
    Again { msg_id: N::Msg },
    /// Feed [`Input::Timer`] for `msg_id` at driver time `at_us`.
    SetTimer {
        msg_id: N::Msg,
        at_us: u64,
        kind: TimerKind,
    },
    /// An inference started; `end` says what to feed later.
    Infer {
        msg_id: N::Msg,
        started_at: i64,
        duration_us: u64,
        end: InferenceEnd,
        ignore_yield: bool,
    },
    /// The running inference of `msg_id` stops (YIELD, or an earlier
    /// claim): cancel its end. It ran `ran_us`.
    Abort {
        msg_id: N::Msg,
        winner: N::Agent,
        ran_us: u64,
    },
    /// The inference of `msg_id` finished (before its [`Output::Reply`]).
    Done { msg_id: N::Msg },
    /// Decided not to infer.
    Skip { msg_id: N::Msg, reason: SkipReason },
    /// The agent is no longer busy with `msg_id`: not waiting, not
    /// inferring, not rechecking.
    Idle { msg_id: N::Msg },
    /// At a crash: the inference of `msg_id`, running for `ran_us` (hung
    /// if `hung`), is lost; cancel its end.
    Lost {
        msg_id: N::Msg,
        ran_us: u64,
        hung: bool,
    },
    /// The crash is complete: drop the connection. The agent starts again
    /// with nothing tracked; the driver reconnects it after the restart
    /// delay and re-joins its channels.
    Crashed,
}

/// One running inference.
#[derive(Debug, Clone, Copy)]
struct Running {
    start_us: u64,
    dur_us: u64,
    hung: bool,
}

/// What the agent holds for one message.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The agent decided to answer and has not settled it yet.
    busy: bool,
    running: Option<Running>,
}

/// An agent's local wall clock as a function of the driver's time (µs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Clock {
    /// `now_us + offset_us`: the simulator's clocks (offset = the scenario
    /// epoch plus the agent's skew), in scenario time.
    Offset(i64),
    /// `origin_us + (now_us + skew_us) / speed`: a live driver whose time
    /// runs `speed` times faster than the wall clock (`origin_us`: the Unix
    /// time of driver time 0). Stamps and the TTL belief are in real ms.
    Scaled {
        origin_us: i64,
        skew_us: i64,
        speed: f64,
    },
}

impl Clock {
    /// The local time (µs) at driver time `now_us`.
    fn local_us(self, now_us: u64) -> i64 {
        match self {
            Clock::Offset(o) => o + now_us as i64,
            Clock::Scaled {
                origin_us,
                skew_us,
                speed,
            } => origin_us.saturating_add(((now_us as f64 + skew_us as f64) / speed) as i64),
        }
    }

    /// The driver time (µs) at which the local clock reads `local_us`
    /// (0 if that is before driver time 0).
    fn driver_us(self, local_us: i64) -> u64 {
        match self {
            Clock::Offset(o) => u64::try_from(local_us.saturating_sub(o)).unwrap_or(0),
            Clock::Scaled {
                origin_us,
                skew_us,
                speed,
            } => {
                let t = local_us.saturating_sub(origin_us) as f64 * speed - skew_us as f64;
                if t <= 0.0 {
                    0
                } else {
                    t.min(u64::MAX as f64) as u64
                }
            }
        }
    }

    /// A duration of the scenario (ms) in local ms: a live clock runs
    /// `speed` times slower than scenario time.
    fn local_ms_of(self, scenario_ms: u64) -> u64 {
        match self {
            Clock::Offset(_) => scenario_ms,
            Clock::Scaled { speed, .. } => {
                let ms = (scenario_ms as f64 / speed).round();
                if ms >= u64::MAX as f64 {
                    u64::MAX
                } else {
                    ms as u64
                }
            }
        }
    }
}

/// One agent. See the module docs. `N`: how agents, channels and
/// messages are named ([`Text`] by default: wire text).
#[derive(Debug, Clone)]
pub struct Agent<N: AgentNaming = Text> {
    behaviour: Arc<Behaviour>,
    client: floor::sim::Client<N>,
    names: N,
    rng: Stream,
    clock: Clock,
    /// The messages the agent is busy with, by id: a handful at a time, so
    /// a flat sorted vector (no tree node allocated per message; iterated
    /// in id order like a `BTreeMap`). Hung inferences stay for the run:
    /// even a few thousand cost one move of some tens of KB per change.
    slots: LiteMap<N::Msg, Slot>,
    /// Duration and ignore-yield of the inference being started by
    /// [`Input::StartNow`].
    forced: Option<(u64, bool)>,
    /// Reused buffer for the client's actions.
    actions: Vec<Action<N>>,
    /// The scheme's gate and the cooldown (default: open, none).
    gate: Gate,
    /// Under a cooldown: channel messages are ignored until this time.
    cool_until_us: u64,
    /// The selector's state (`None` for every answering agent).
    sel: Option<Box<selector::SelectorState<N>>>,
    /// The loop breaker's count: agents' messages seen in the channel
    /// since the last operator post.
    agent_msgs: u32,
    /// Under `owner` with a fallback: the questions this agent is a
    /// fallback for, until it takes one or sees an answer to it.
    owed: Vec<Owed<N>>,
}

/// A question an agent is the fallback for (under `owner`).
#[derive(Debug, Clone)]
struct Owed<N: AgentNaming> {
    q: N::Msg,
    /// Where the answer goes.
    to: N::Dest,
    /// The local time (ms) it last saw another agent's claim on the
    /// question: a claim still believed live at the fallback time makes
    /// the fallback skip, as a claim seen during a CSMA wait does.
    claim_seen: Option<i64>,
}

impl Agent<Text> {
    /// Agent `id` following `policy` and behaving as `behaviour`, drawing
    /// from `rng`; its local wall clock is `clock`. Names are wire text.
    pub fn new(
        id: String,
        policy: PolicyKind,
        behaviour: Arc<Behaviour>,
        rng: Stream,
        clock: Clock,
    ) -> Agent {
        Agent::with_naming(id, Text, policy, behaviour, rng, clock)
    }
}

impl<N: AgentNaming> Agent<N> {
    /// [`Agent::new`] for agent `id` as `names` names it.
    pub fn with_naming(
        id: N::Agent,
        names: N,
        policy: PolicyKind,
        behaviour: Arc<Behaviour>,
        rng: Stream,
        clock: Clock,
    ) -> Agent<N> {
        let mut cfg = ClientConfig::new(id);
        cfg.policy = policy;
        cfg.ttl_ms = clock.local_ms_of(behaviour.ttl_ms);
        cfg.recheck_on_expiry = behaviour.recheck;
        cfg.max_rechecks = behaviour.max_rechecks;
        // The agent's draw ([`ScenarioCsma`]) is the scenario's
        // distribution, which need not be a window: it reads none.
        cfg.csma = CsmaWindow::default();
        let client = floor::sim::Client::with_naming(cfg, names.clone());
        Agent {
            behaviour,
            client,
            names,
            rng,
            clock,
            slots: LiteMap::new(),
            forced: None,
            actions: Vec::new(),
            gate: Gate::default(),
            cool_until_us: 0,
            sel: None,
            agent_msgs: 0,
            owed: Vec::new(),
        }
    }

    /// Put the agent under a scheme's gate (and cooldown).
    pub fn set_gate(&mut self, gate: Gate) {
        self.gate = gate;
    }

    /// The agent's id.
    pub fn id(&self) -> &N::Agent {
        &self.client.config().id
    }

    /// Whether an inference is running for `msg_id`.
    pub fn is_running<Q>(&self, msg_id: &Q) -> bool
    where
        Q: Ord + ?Sized,
        N::Msg: Borrow<Q>,
    {
        self.slots.get(msg_id).is_some_and(|s| s.running.is_some())
    }

    /// Whether the agent is busy with `msg_id` (waiting, inferring,
    /// rechecking).
    pub fn is_busy<Q>(&self, msg_id: &Q) -> bool
    where
        Q: Ord + ?Sized,
        N::Msg: Borrow<Q>,
    {
        self.slots.get(msg_id).is_some_and(|s| s.busy)
    }

    /// The local wall clock (ms) at driver time `now_us`.
    pub fn local_ms(&self, now_us: u64) -> i64 {
        self.clock.local_us(now_us).div_euclid(1000)
    }

    /// Feed one input at driver time `now_us`; what to do is appended to
    /// `out`, in order.
    pub fn handle(&mut self, now_us: u64, input: Input<'_, N>, out: &mut Vec<Output<N>>) {
        if let Some(squat) = self.behaviour.squat {
            if let Input::Server { msg, .. } = input {
                self.squat(now_us, squat, msg, out);
            }
            return;
        }
        if self.sel.is_some() {
            self.selector_handle(now_us, input, out);
            return;
        }
        match input {
            Input::Server { msg, depth } => self.on_server(now_us, msg, depth, out),
            Input::Timer { msg_id } => {
                if let Some(i) = self.owed.iter().position(|o| o.q == *msg_id) {
                    // Its fallback time: no answer seen. A claim it saw
                    // that is still believed live (the owner's, or an
                    // earlier fallback's, within the TTL): skip, as a
                    // CSMA wait that saw it does. Otherwise take the
                    // question as the owner does (CSMA wait, then claim or
                    // infer).
                    let Owed { q, to, claim_seen } = self.owed.swap_remove(i);
                    let ttl = i64::try_from(self.client.config().ttl_ms).unwrap_or(i64::MAX);
                    let now_ms = self.local_ms(now_us);
                    if claim_seen.is_some_and(|s| s.saturating_add(ttl) > now_ms) {
                        out.push(Output::Skip {
                            msg_id: q,
                            reason: SkipReason::SeenClaim,
                        });
                    } else {
                        self.call_client_drawing(now_us, out, |c, t, d, a| {
                            c.on_message(t, q, to, false, d, a)
                        });
                    }
                } else {
                    self.call_client_drawing(now_us, out, |c, t, d, a| c.on_timer(t, msg_id, d, a));
                }
                self.settle(msg_id, out);
            }
            Input::InferenceDone { msg_id, reply_id } => {
                self.inference_done(now_us, msg_id, reply_id, out);
            }
            Input::Crash => self.crash(now_us, out),
            Input::StartNow {
                msg_id,
                reply_to,
                started_at,
                duration_us,
                ignore_yield,
            } => {
                let slot = self.slots.entry(msg_id.clone()).or_default();
                if !slot.busy {
                    slot.busy = true;
                    out.push(Output::Wants {
                        msg_id: msg_id.clone(),
                    });
                }
                self.forced = Some((duration_us, ignore_yield));
                self.call_client(now_us, out, |c, _, a| {
                    c.start_now(msg_id.clone(), reply_to.clone(), started_at, a)
                });
                self.forced = None;
                self.settle(msg_id, out);
            }
        }
    }

    /// A squatter sees `msg`: claim it and pre-claim the next ids if it is
    /// a channel message.
    fn squat(&self, now: u64, squat: Squat, msg: &ServerMsg<N>, out: &mut Vec<Output<N>>) {
        let ServerMsg::Msg { id, to, .. } = msg else {
            return;
        };
        if !self.names.show_dest(to).starts_with('#') {
            return;
        }
        let started_at = self.local_ms(now).saturating_sub(squat.lead_ms).max(1);
        let claim = |msg_id: N::Msg| {
            Output::Send(ClientMsg::RespondingTo {
                msg_id,
                started_at: started_at.into(),
                channel: to.clone(),
            })
        };
        if squat.react {
            out.push(claim(id.clone()));
        }
        for k in 1..=u64::from(squat.ahead) {
            let Some(next) = self.names.msg_after(id, k) else {
                return;
            };
            out.push(claim(next));
        }
    }

    fn take_actions(&mut self) -> Vec<Action<N>> {
        let mut actions = std::mem::take(&mut self.actions);
        actions.clear();
        actions
    }

    /// One call of the client at the local time of `now`, its actions
    /// carried out at once (the reused action buffer put back after).
    fn call_client(
        &mut self,
        now: u64,
        out: &mut Vec<Output<N>>,
        f: impl FnOnce(&mut floor::sim::Client<N>, i64, &mut Vec<Action<N>>),
    ) {
        let t = self.local_ms(now);
        f(&mut self.client, t, &mut self.actions);
        self.carry_out_actions(now, out);
    }

    /// [`Agent::call_client`] for a call that may start a CSMA wait: it
    /// gets the agent's draw.
    fn call_client_drawing(
        &mut self,
        now: u64,
        out: &mut Vec<Output<N>>,
        f: impl FnOnce(&mut floor::sim::Client<N>, i64, &mut ScenarioCsma<'_>, &mut Vec<Action<N>>),
    ) {
        let t = self.local_ms(now);
        let mut draw = ScenarioCsma {
            dist: &self.behaviour.csma,
            rng: &mut self.rng,
        };
        f(&mut self.client, t, &mut draw, &mut self.actions);
        self.carry_out_actions(now, out);
    }

    /// Carry out the client's actions of the last call.
    #[inline(always)]
    fn carry_out_actions(&mut self, now: u64, out: &mut Vec<Output<N>>) {
        // Most server messages change nothing: skip the empty carry-out.
        if !self.actions.is_empty() {
            let mut actions = std::mem::take(&mut self.actions);
            self.apply(now, &mut actions, out);
            self.actions = actions; // drained, its room kept
        }
    }

    /// A server message: the client records claims, responses and YIELDs
    /// first; then a relayed MSG may be answered.
    fn on_server(
        &mut self,
        now: u64,
        msg: &ServerMsg<N>,
        depth: Option<u32>,
        out: &mut Vec<Output<N>>,
    ) {
        self.call_client_drawing(now, out, |c, t, d, a| c.on_server_msg(t, msg, d, a));
        // Only the message this one is about can have changed state.
        let subject = match msg {
            ServerMsg::RespondingTo { msg_id, .. }
            | ServerMsg::Yield { msg_id, .. }
            | ServerMsg::FloorClaimed { msg_id, .. } => Some(msg_id),
            ServerMsg::FloorReleased { msg_id, .. } => {
                self.taken_up_again(msg_id, out);
                Some(msg_id)
            }
            ServerMsg::Msg { in_reply_to, .. } => in_reply_to.as_ref(),
            _ => None,
        };
        if let Some(id) = subject {
            if !self.owed.is_empty() {
                self.owed_sees(now, msg, id);
            }
            self.settle(id, out);
        }
        if let (
            Some(depth),
            ServerMsg::Msg {
                id,
                from,
                to,
                content,
                in_reply_to,
                ..
            },
        ) = (depth, msg)
        {
            // The loop breaker: count the agents' channel messages since
            // the last operator post; from `breaker_after` on, answer none.
            let breaker = self.gate.breaker_after;
            if breaker > 0 && !self.names.is_dm_to(to, self.id()) {
                if depth == 0 {
                    self.agent_msgs = 0;
                } else {
                    self.agent_msgs = self.agent_msgs.saturating_add(1);
                    let selection = self.gate.scheme == Scheme::Selector && in_reply_to.is_some();
                    if self.agent_msgs >= breaker && !selection {
                        return;
                    }
                }
            }
            // Under `selector`, a selection (a message in reply to a
            // question that @mentions this agent) is about the question.
            let (id, depth) = match in_reply_to {
                Some(q)
                    if self.gate.scheme == Scheme::Selector
                        && self.names.mentions(content, self.id()) =>
                {
                    (q, 0)
                }
                _ => (id, depth),
            };
            self.consider(now, id, from, to, content, depth, out);
        }
    }

    /// After a FLOOR_RELEASED: a message the client let go (skipped for the
    /// released claim) and took up again holds the agent busy again.
    fn taken_up_again(&mut self, msg_id: &N::Msg, out: &mut Vec<Output<N>>) {
        if !self.client.is_tracking(msg_id) {
            return;
        }
        let slot = self.slots.entry(msg_id.clone()).or_default();
        if !slot.busy {
            slot.busy = true;
            out.push(Output::Again {
                msg_id: msg_id.clone(),
            });
        }
    }

    /// A relayed MSG: does the agent want to answer it?
    #[allow(clippy::too_many_arguments)]
    fn consider(
        &mut self,
        now: u64,
        msg_id: &N::Msg,
        from: &N::Agent,
        to: &N::Dest,
        content: &N::Content,
        depth: u32,
        out: &mut Vec<Output<N>>,
    ) {
        let me = self.id();
        if from == me {
            return; // its own message
        }
        let dm = self.names.is_dm_to(to, me);
        let mention = !dm && self.names.mentions(content, me);
        let exempt = dm || mention || self.names.is_server(from);
        let b = &self.behaviour;
        let p = if depth == 0 {
            b.respond_p
        } else if depth < b.max_depth {
            b.reply_p
        } else {
            0.0
        };
        // A cooldown ignores every channel message (DMs still answered).
        if !dm && now < self.cool_until_us {
            return;
        }
        let mut exempt = exempt;
        let wants = match self.gate.scheme {
            Scheme::Open => exempt || (p > 0.0 && self.rng.random_bool(p)),
            // The owner answers every operator post (no `respond_p`), and
            // an agent's reply with `reply_to_agent_p`; a post that
            // @mentions an agent is that agent's.
            Scheme::Owner => {
                let unmentioned = !self.names.mentions_anyone(content);
                let owner = owner_of(&self.names.show_msg(msg_id), self.gate.seats);
                if !exempt
                    && unmentioned
                    && depth == 0
                    && owner != self.gate.seat
                    && self.gate.fallback_us > 0
                    && !self.names.is_dm_to(to, me)
                {
                    self.owe(now, msg_id, to, owner, out);
                }
                exempt
                    || (unmentioned
                        && owner == self.gate.seat
                        && (depth == 0 || (p > 0.0 && self.rng.random_bool(p))))
            }
            // Only @mentions; an unmentioned operator post goes to the
            // default agent, which answers it as if mentioned.
            Scheme::Mentions => {
                if !exempt
                    && depth == 0
                    && self.gate.default_agent
                    && !self.names.mentions_anyone(content)
                {
                    exempt = true;
                }
                exempt
            }
            // Only the selected (or @mentioned) agent answers: nobody
            // answers an unmentioned post or an agent's reply on its own.
            Scheme::Selector => exempt,
        };
        if !wants {
            return;
        }
        // A second selection of an agent already answering the question
        // changes nothing.
        if self.gate.scheme == Scheme::Selector && self.is_busy(msg_id) {
            return;
        }
        // The reply goes to the channel, or back to the DM's sender.
        let reply_to = if dm {
            self.names.dm_to(from)
        } else {
            to.clone()
        };
        out.push(Output::Wants {
            msg_id: msg_id.clone(),
        });
        self.slots.entry(msg_id.clone()).or_default().busy = true;
        self.call_client_drawing(now, out, |c, t, d, a| {
            c.on_message(t, msg_id.clone(), reply_to, exempt, d, a)
        });
        self.settle(msg_id, out);
    }

    /// A server message about `id`, a question this agent may be the
    /// fallback for: an answer to it ends the debt; another agent's claim
    /// on it (relayed, or the server's FLOOR_CLAIMED) in the question's
    /// channel is noted with the local time it was seen.
    fn owed_sees(&mut self, now: u64, msg: &ServerMsg<N>, id: &N::Msg) {
        let Some(i) = self.owed.iter().position(|o| o.q == *id) else {
            return;
        };
        let claim = match msg {
            ServerMsg::Msg { .. } => {
                self.owed.swap_remove(i);
                return;
            }
            ServerMsg::RespondingTo { from, channel, .. } => Some((from, channel)),
            ServerMsg::FloorClaimed {
                holder, channel, ..
            } => Some((holder, channel)),
            ServerMsg::FloorReleased { channel, .. } => {
                // The claim it saw is gone with its holder: at its fallback
                // time it takes the question.
                if *channel == self.owed[i].to {
                    self.owed[i].claim_seen = None;
                }
                return;
            }
            _ => None,
        };
        let t = self.local_ms(now);
        if let Some((from, channel)) = claim
            && from != self.id()
            && *channel == self.owed[i].to
        {
            let o = &mut self.owed[i];
            o.claim_seen = Some(o.claim_seen.map_or(t, |s| s.max(t)));
        }
    }

    /// Under `owner` with a fallback: seat (owner + k) mod n is the k-th
    /// fallback of the question (k = 1 .. at most `max_fallbacks`): it
    /// holds the question and looks again k * `fallback_us` from now.
    fn owe(&mut self, now: u64, q: &N::Msg, to: &N::Dest, owner: u32, out: &mut Vec<Output<N>>) {
        let n = self.gate.seats;
        let k = (self.gate.seat + n - owner) % n;
        if k == 0 || k > self.gate.max_fallbacks || self.is_busy(q) {
            return;
        }
        self.owed.push(Owed {
            q: q.clone(),
            to: to.clone(),
            claim_seen: None,
        });
        out.push(Output::Wants { msg_id: q.clone() });
        self.slots.entry(q.clone()).or_default().busy = true;
        out.push(Output::SetTimer {
            msg_id: q.clone(),
            at_us: now.saturating_add(u64::from(k).saturating_mul(self.gate.fallback_us)),
            kind: TimerKind::Fallback,
        });
    }

    /// Carry out the client's actions: sample what it leaves to the caller
    /// (the inference), time its waits on the driver's clock.
    fn apply(&mut self, now: u64, actions: &mut Vec<Action<N>>, out: &mut Vec<Output<N>>) {
        // Taken from the back of the reversed list: in order, without a
        // `Drain` to drop (these lists hold one or two actions).
        if actions.len() > 1 {
            actions.reverse();
        }
        while let Some(action) = actions.pop() {
            match action {
                Action::Wait { msg_id, delay_us } => {
                    // The CSMA timer fires on the driver's tick.
                    let tick = self.behaviour.tick_us;
                    let mut due = now + delay_us;
                    if tick > 0 {
                        due = due.div_ceil(tick) * tick;
                    }
                    out.push(Output::SetTimer {
                        msg_id,
                        at_us: due,
                        kind: TimerKind::Csma,
                    });
                }
                Action::WakeAt { msg_id, at_ms } => {
                    // Back from the local clock to the driver's.
                    let at_us = self.clock.driver_us(at_ms.saturating_mul(1000)).max(now);
                    out.push(Output::SetTimer {
                        msg_id,
                        at_us,
                        kind: TimerKind::Recheck,
                    });
                }
                Action::Send(msg) => out.push(Output::Send(msg)),
                // Posted only by `on_inference_done`, which
                // `inference_done` carries out itself.
                Action::Post(msg) => out.push(Output::Send(msg)),
                Action::StartInference { msg_id, started_at } => {
                    self.start_inference(now, msg_id, started_at, out);
                }
                Action::Abort { msg_id, winner } => {
                    let Some(slot) = self.slots.get_mut(&msg_id) else {
                        continue;
                    };
                    match slot.running {
                        // A hung inference obeys nothing.
                        Some(r) if !r.hung => {
                            slot.running = None;
                            if !slot.busy {
                                self.slots.remove(&msg_id);
                            }
                            out.push(Output::Abort {
                                msg_id,
                                winner,
                                ran_us: now - r.start_us,
                            });
                        }
                        _ => {}
                    }
                }
                Action::Skip { msg_id, reason } => out.push(Output::Skip { msg_id, reason }),
                // The floor's actions today are all above.
                _ => {}
            }
        }
    }

    /// Draw the inference: fixed order duration, fault, ignore-yield. A
    /// scripted inference draws nothing: its duration is given, it never
    /// faults.
    fn start_inference(
        &mut self,
        now: u64,
        msg_id: N::Msg,
        started_at: i64,
        out: &mut Vec<Output<N>>,
    ) {
        let b = &self.behaviour;
        let (dur, ignore, hung, crash) = match self.forced.take() {
            Some((dur, ignore)) => (dur, ignore, false, false),
            None => {
                let dur = b.inference.sample_us(&mut self.rng);
                let fault: f64 = self.rng.random();
                let ignore = b.ignore_yield_p > 0.0 && self.rng.random_bool(b.ignore_yield_p);
                let hung = fault < b.hang_p;
                (dur, ignore, hung, !hung && fault < b.hang_p + b.crash_p)
            }
        };
        let end = if hung {
            InferenceEnd::Hang
        } else if crash {
            // The crash instant is uniform over the drawn duration.
            InferenceEnd::CrashAt(now + (dur as f64 * self.rng.random::<f64>()).round() as u64)
        } else {
            InferenceEnd::DoneAt(now + dur)
        };
        if ignore || hung {
            self.client.set_ignore_yield(&msg_id, true);
        }
        let running = Running {
            start_us: now,
            dur_us: dur,
            hung,
        };
        match self.slots.get_mut(&msg_id) {
            Some(slot) => slot.running = Some(running),
            None => {
                let slot = Slot {
                    busy: false,
                    running: Some(running),
                };
                self.slots.insert(msg_id.clone(), slot);
            }
        }
        out.push(Output::Infer {
            msg_id,
            started_at,
            duration_us: dur,
            end,
            ignore_yield: ignore,
        });
    }

    fn inference_done(
        &mut self,
        now: u64,
        msg_id: &N::Msg,
        reply_id: Option<N::Msg>,
        out: &mut Vec<Output<N>>,
    ) {
        let Some(slot) = self.slots.get_mut(msg_id) else {
            return;
        };
        let Some(r) = slot.running.take() else {
            return;
        };
        if !slot.busy {
            self.slots.remove(msg_id);
        }
        out.push(Output::Done {
            msg_id: msg_id.clone(),
        });
        let content = self.names.answer(msg_id, self.id());
        let t = self.local_ms(now);
        let mut actions = self.take_actions();
        self.client
            .on_inference_done(t, msg_id, reply_id, content, &mut actions);
        // The one action: the reply to post.
        while let Some(action) = actions.pop() {
            if let Action::Post(msg) = action {
                // The loop breaker counts its own channel messages too (the
                // server does not send them back).
                if self.gate.breaker_after > 0
                    && let ClientMsg::Msg { to, .. } = &msg
                    && !self.names.starts_dm(to)
                {
                    self.agent_msgs = self.agent_msgs.saturating_add(1);
                }
                if self.gate.cooldown_us > 0 {
                    self.cool_until_us = now.saturating_add(self.gate.cooldown_us);
                }
                out.push(Output::Reply {
                    msg,
                    parent: msg_id.clone(),
                    infer_us: r.dur_us,
                });
            }
        }
        self.actions = actions;
        self.settle(msg_id, out);
    }

    /// What this agent's decisions asked of the claim TTL, over its whole
    /// life (crashes included): see [`crate::floor::sim::TtlAudit`].
    pub fn ttl_audit(&self) -> crate::floor::sim::TtlAudit {
        self.client.ttl_audit()
    }

    /// The process dies: every inference is lost, every wait forgotten.
    fn crash(&mut self, now: u64, out: &mut Vec<Output<N>>) {
        self.owed.clear();
        let slots = std::mem::take(&mut self.slots);
        self.client.reset();
        for (msg_id, slot) in &slots {
            if let Some(r) = slot.running {
                out.push(Output::Lost {
                    msg_id: msg_id.clone(),
                    ran_us: now - r.start_us,
                    hung: r.hung,
                });
            }
        }
        for (msg_id, slot) in slots {
            if slot.busy {
                out.push(Output::Idle { msg_id });
            }
        }
        out.push(Output::Crashed);
    }

    /// If the agent is no longer busy with `msg_id`, say so.
    #[inline]
    fn settle(&mut self, msg_id: &N::Msg, out: &mut Vec<Output<N>>) {
        // Most agents hold no slot for most messages they see: that test
        // inline, at every call, and the rest in a call of its own.
        if !self.slots.is_empty() {
            self.settle_slot(msg_id, out);
        }
    }

    #[inline(never)]
    fn settle_slot(&mut self, msg_id: &N::Msg, out: &mut Vec<Output<N>>) {
        let Some(slot) = self.slots.get(msg_id) else {
            return;
        };
        if !slot.busy || slot.running.is_some() || self.client.is_tracking(msg_id) {
            return;
        }
        if !self.owed.is_empty() && self.owed.iter().any(|o| o.q == *msg_id) {
            return;
        }
        self.slots.remove(msg_id);
        out.push(Output::Idle {
            msg_id: msg_id.clone(),
        });
    }
}

/// The agent's CSMA draw: the scenario's distribution (any kind, in driver
/// µs), from the agent's one stream, asked by the client once per wait.
struct ScenarioCsma<'a> {
    dist: &'a Dist,
    rng: &'a mut Stream,
}

impl CsmaDraw for ScenarioCsma<'_> {
    #[inline]
    fn csma_delay_us(&mut self, _window: CsmaWindow) -> u64 {
        self.dist.sample_us(self.rng)
    }
}

pub use crate::floor::address::{mentions, mentions_anyone};
