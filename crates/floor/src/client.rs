//! The agent side, sans-IO: one [`Client`] per agent. It follows each
//! message the agent wants to answer independently (wait, look, claim,
//! infer, abort or reply) and tells the caller
//! what to do through [`Action`]s; the caller owns the clock, the timers,
//! the randomness and the network. The client owns the CSMA wait: it knows
//! the window ([`ClientConfig::csma`]) and says how long to wait
//! ([`Action::Wait`]); the one random number that takes comes from the
//! caller, through a [`CsmaDraw`] passed to the calls that may start a wait
//! ([`Client::on_message`], [`Client::on_timer`]) and asked only when one
//! starts, once per wait. A closure returning uniform draws in `[0, 1)` is
//! a [`CsmaDraw`] (a delay uniform over the window); an embedder with
//! another distribution implements the trait. The inference (its duration,
//! its faults) stays the caller's.
//!
//! For one message `m`:
//! 1. [`Client::on_message`]: an exempt message (DM, @mention, `@server`;
//!    and any `reply_to` that is a DM peer `@id`) starts inference at once,
//!    with no CSMA and no claim, and is never aborted. Otherwise
//!    [`Action::Wait`] for a CSMA delay drawn in the window.
//! 2. Meanwhile [`Client::on_server_msg`] records every claim seen for `m`
//!    from another agent (relayed RESPONDING_TO or FLOOR_CLAIMED, granted
//!    or not) with the local time it was seen, and any response to `m`
//!    (a MSG with `in_reply_to = m` from another agent).
//! 3. [`Client::on_timer`] (CSMA fired): skip if a response was seen, or if a
//!    claim is still believed live (seen + TTL > now); otherwise send
//!    `RESPONDING_TO {msg_id, started_at: now, channel}` (not under `none`)
//!    and start inference: the actions are `Send` then `StartInference`.
//!    With `recheck_on_expiry`, a skip because of a claim (no response
//!    seen) is followed by `WakeAt {at: latest claim seen + TTL}` if fewer
//!    than `max_rechecks` rechecks were made; at that wake, if a newer claim
//!    is still believed live another `WakeAt` follows, if a response was
//!    seen the message is dropped silently, else a new CSMA wait starts and
//!    step 3 runs again.
//! 4. While inferring: a YIELD for `m` naming another agent aborts it;
//!    under the policies that relay raw claims (`spec`, `tombstone`; see
//!    [`Rules::client_aborts_on_relayed_claim`]) so does a relayed
//!    RESPONDING_TO for `m` with (`started_at`, from) earlier than its own
//!    (`started_at`, id). [`Client::set_ignore_yield`] disables both.
//! 5. [`Client::on_inference_done`]: post the reply MSG ([`Action::Post`]).
//!
//! A message is dropped from the client's state when it is finished: done,
//! aborted, or skipped with no recheck pending. Calls about a message that is
//! not tracked (stale timers, late server messages) do nothing.

use litemap::LiteMap;
use std::borrow::Borrow;

use crate::naming::{Naming, Text};
use crate::policy::{DEFAULT_TTL_MS, PolicyKind, Rules};
use crate::ttl_audit::TtlAudit;
use crate::wire::{ClientMsg, ServerMsg, Stamp};

/// Per-agent client configuration. [`Default`] (and [`ClientConfig::new`],
/// which names the agent) is the protocol's: policy `spec`, claims
/// believed live for 45 s (the server's default TTL), CSMA 2-8 s
/// ([`CsmaWindow::default`]), no recheck.
///
/// The protocol as written has no recheck: an agent that skipped for a
/// claim never looks at the message again, so `recheck_on_expiry: false`
/// (and `max_rechecks` then unread, 0 by default) is the protocol.
/// `recheck_on_expiry: true` with `max_rechecks: n` is a deviation an
/// embedder may choose: up to `n` more decisions, each once the latest
/// claim seen is believed expired with no answer seen, which answers a
/// question whose claimant crashed or hung after the TTL.
///
/// Start from [`ClientConfig::new`] (the protocol's defaults) and set the
/// fields to change: the struct is `#[non_exhaustive]`, so a field added
/// in a minor release breaks no embedder.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientConfig<N: Naming = Text> {
    /// This agent's id (as the server knows it).
    pub id: N::Agent,
    /// The arbitration policy the server runs (decides, among others,
    /// whether a relayed earlier claim aborts this agent's inference).
    pub policy: PolicyKind,
    /// How long a seen claim is believed live (ms, local clock).
    pub ttl_ms: u64,
    /// After skipping because of a claim, decide again once it is believed
    /// expired, if no response was seen.
    pub recheck_on_expiry: bool,
    /// At most this many rechecks per message.
    pub max_rechecks: u32,
    /// The CSMA window: how long to wait before claiming (handed to the
    /// [`CsmaDraw`] at each wait).
    pub csma: CsmaWindow,
}

impl<N: Naming> Default for ClientConfig<N>
where
    N::Agent: Default,
{
    /// The protocol's defaults, for an agent whose id is `N::Agent`'s
    /// default (empty text): set [`ClientConfig::id`], or use
    /// [`ClientConfig::new`].
    fn default() -> Self {
        ClientConfig::new(N::Agent::default())
    }
}

impl<N: Naming> ClientConfig<N> {
    /// The protocol's defaults (see [`ClientConfig`]) for agent `id`.
    pub fn new(id: impl Into<N::Agent>) -> Self {
        ClientConfig {
            id: id.into(),
            policy: PolicyKind::Spec,
            ttl_ms: DEFAULT_TTL_MS,
            recheck_on_expiry: false,
            max_rechecks: 0,
            csma: CsmaWindow::default(),
        }
    }
}

/// The protocol's CSMA window, shortest wait (ms).
pub const DEFAULT_CSMA_MIN_MS: u64 = 2_000;
/// The protocol's CSMA window, longest wait (ms).
pub const DEFAULT_CSMA_MAX_MS: u64 = 8_000;

/// The CSMA window: a wait before claiming of `min_ms` to `max_ms` (ms),
/// agentchat's `AGENTCHAT_CSMA_MIN_MS` and `AGENTCHAT_CSMA_MAX_MS` (what
/// `herdsim tune` recommends). [`Default`]: the protocol's 2-8 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsmaWindow {
    /// The shortest wait (ms).
    pub min_ms: u64,
    /// The longest wait (ms).
    pub max_ms: u64,
}

impl Default for CsmaWindow {
    /// 2000 to 8000 ms ([`DEFAULT_CSMA_MIN_MS`], [`DEFAULT_CSMA_MAX_MS`]).
    fn default() -> Self {
        CsmaWindow {
            min_ms: DEFAULT_CSMA_MIN_MS,
            max_ms: DEFAULT_CSMA_MAX_MS,
        }
    }
}

impl CsmaWindow {
    /// The wait (µs) at the uniform draw `u` in `[0, 1)`: `min + u * (max -
    /// min)`, rounded to the µs (a `u` outside `[0, 1]`, or a window with
    /// `max_ms < min_ms`, gives a wait within the window's two ends).
    pub fn delay_us(self, u: f64) -> u64 {
        let (lo, hi) = (self.min_ms.min(self.max_ms), self.min_ms.max(self.max_ms));
        let (lo_us, hi_us) = (lo.saturating_mul(1000), hi.saturating_mul(1000));
        let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
        let span = (hi_us - lo_us) as f64 * u;
        lo_us.saturating_add(span.round() as u64).min(hi_us)
    }
}

/// The randomness of the CSMA wait, which stays the caller's (the floor has
/// none). The client asks for one delay each time a wait starts, and only
/// then, so a caller drawing everything from one stream keeps its order.
pub trait CsmaDraw {
    /// One CSMA delay (µs) for a wait in `window`.
    fn csma_delay_us(&mut self, window: CsmaWindow) -> u64;
}

/// A closure returning uniform draws in `[0, 1)` (`|| rng.random()`): the
/// delay is uniform over the window ([`CsmaWindow::delay_us`]).
impl<F: FnMut() -> f64> CsmaDraw for F {
    fn csma_delay_us(&mut self, window: CsmaWindow) -> u64 {
        window.delay_us(self())
    }
}

/// Why the client decided not to infer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// A claim from another agent is believed live.
    SeenClaim,
    /// Another agent already answered.
    SeenResponse,
    /// The message @mentions other agents and not this one: it is theirs
    /// (decided by [`crate::Agent`]; the [`Client`] is told exemptions by
    /// its caller).
    AddressedToOthers,
}

impl SkipReason {
    /// `seen_claim`, `seen_response` or `addressed_to_others`: the reason's
    /// name in a trace line or a log.
    pub const fn as_str(self) -> &'static str {
        match self {
            SkipReason::SeenClaim => "seen_claim",
            SkipReason::SeenResponse => "seen_response",
            SkipReason::AddressedToOthers => "addressed_to_others",
        }
    }
}

/// What the caller must do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action<N: Naming = Text> {
    /// Wait `delay_us` (the CSMA delay, drawn through the [`CsmaDraw`]),
    /// then call `on_timer`. A delay, not a time: µs from now, so that a
    /// caller's finer clock keeps its precision.
    Wait {
        /// The message waited on.
        msg_id: N::Msg,
        /// How long to wait (µs).
        delay_us: u64,
    },
    /// Call `on_timer` when the LOCAL clock reaches `at_ms` (recheck: seen + TTL).
    WakeAt {
        /// The message to decide on again.
        msg_id: N::Msg,
        /// The local time (ms) to call `on_timer` at.
        at_ms: i64,
    },
    /// Send this claim (RESPONDING_TO) to the server.
    Send(ClientMsg<N>),
    /// Post this reply (a MSG answering the message, `in_reply_to` set):
    /// the inference completed.
    Post(ClientMsg<N>),
    /// Start inference (the caller samples its duration), later call
    /// `on_inference_done`.
    StartInference {
        /// The message answered.
        msg_id: N::Msg,
        /// The local time (ms) the inference starts: the claim's `started_at`.
        started_at: i64,
    },
    /// Abort the running inference (YIELD, or an earlier relayed claim
    /// under `spec`/`tombstone`); `winner` is the agent that has the floor.
    Abort {
        /// The message whose inference stops.
        msg_id: N::Msg,
        /// The agent that holds the floor.
        winner: N::Agent,
    },
    /// Decided not to infer.
    Skip {
        /// The message not answered.
        msg_id: N::Msg,
        /// Why not.
        reason: SkipReason,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the CSMA timer.
    Csma,
    /// Skipped because of a claim; waiting until it is believed expired.
    Recheck,
    /// Skipped because of a claim, with no recheck: listening, until the
    /// claim is believed expired, for a FLOOR_RELEASED that frees the
    /// floor (then a new CSMA wait). Not "tracking": a caller sees the
    /// message finished.
    Watching,
    /// Inference running.
    Inferring {
        started_at: i64,
        exempt: bool,
        ignore_yield: bool,
    },
}

#[derive(Debug, Clone)]
struct Track<N: Naming> {
    /// The message's id.
    id: N::Msg,
    reply_to: N::Dest,
    phase: Phase,
    /// Local time the latest claim for this message was seen.
    last_claim_seen: Option<i64>,
    response_seen: bool,
    rechecks: u32,
}

/// The agent-side state machine. See the module docs. `N`: how agents,
/// channels and messages are named ([`Text`] by default: wire text).
#[derive(Debug, Clone)]
pub struct Client<N: Naming = Text> {
    cfg: ClientConfig<N>,
    names: N,
    rules: Rules,
    ttl: i64,
    /// What this client's decisions asked of the TTL (see [`TtlAudit`]);
    /// kept across [`Client::reset`].
    ttl_audit: TtlAudit,
    /// The messages being handled, by id: a handful at a time, so a flat
    /// sorted vector (no tree node allocated per message).
    msgs: LiteMap<N::Msg, Track<N>>,
    /// How many of `msgs` are [`Phase::Watching`].
    watching: usize,
}

impl Client<Text> {
    /// A client naming everything by its wire text.
    pub fn new(cfg: ClientConfig) -> Client {
        Client::with_naming(cfg, Text)
    }
}

impl<N: Naming> Client<N> {
    /// A client naming agents, channels and messages as `names` does (see
    /// [`crate::Naming`]).
    pub fn with_naming(cfg: ClientConfig<N>, names: N) -> Client<N> {
        Client {
            rules: cfg.policy.rules(),
            ttl: i64::try_from(cfg.ttl_ms).unwrap_or(i64::MAX),
            ttl_audit: TtlAudit::default(),
            cfg,
            names,
            msgs: LiteMap::new(),
            watching: 0,
        }
    }

    /// The configuration this client was made with.
    pub fn config(&self) -> &ClientConfig<N> {
        &self.cfg
    }

    /// A message this agent wants to answer (the caller already drew
    /// `respond_p`). `reply_to` is the channel (`#general`) or the DM peer
    /// (`@operator`) the reply goes to. `exempt` (DM, @mention, `@server`):
    /// inference starts at once, no CSMA, no claim; a `reply_to` starting
    /// with `@` is always exempt (the protocol does not apply to DMs). A
    /// message already tracked is ignored.
    pub fn on_message(
        &mut self,
        now_ms: i64,
        msg_id: impl Into<N::Msg>,
        reply_to: impl Into<N::Dest>,
        exempt: bool,
        draw: &mut (impl CsmaDraw + ?Sized),
        out: &mut Vec<Action<N>>,
    ) {
        let msg_id = msg_id.into();
        if self.watching > 0 {
            self.stop_watching_expired(now_ms);
        }
        if self
            .msgs
            .get(&msg_id)
            .is_some_and(|t| t.phase != Phase::Watching)
        {
            return;
        }
        let reply_to = reply_to.into();
        let exempt = exempt || self.names.starts_dm(&reply_to);
        let phase = if exempt {
            out.push(Action::StartInference {
                msg_id: msg_id.clone(),
                started_at: now_ms,
            });
            Phase::Inferring {
                started_at: now_ms,
                exempt: true,
                ignore_yield: false,
            }
        } else {
            out.push(Action::Wait {
                msg_id: msg_id.clone(),
                delay_us: draw.csma_delay_us(self.cfg.csma),
            });
            Phase::Csma
        };
        let old = self.msgs.insert(
            msg_id.clone(),
            Track {
                id: msg_id,
                reply_to,
                phase,
                last_claim_seen: None,
                response_seen: false,
                rechecks: 0,
            },
        );
        if old.is_some() {
            self.watching = self.watching.saturating_sub(1);
        }
    }

    /// Drop the watched messages whose claim is believed expired at `now_ms`
    /// (no release can matter to them any more).
    fn stop_watching_expired(&mut self, now_ms: i64) {
        let ttl = self.ttl;
        let before = self.msgs.len();
        self.msgs.retain(|_, t| {
            t.phase != Phase::Watching
                || t.last_claim_seen
                    .is_some_and(|s| s.saturating_add(ttl) > now_ms)
        });
        self.watching -= before - self.msgs.len();
    }

    /// The CSMA timer fired, or a `WakeAt` was reached (`now_ms >= at_ms`
    /// expected; an earlier call re-arms the same wake).
    pub fn on_timer<Q>(
        &mut self,
        now_ms: i64,
        msg_id: &Q,
        draw: &mut (impl CsmaDraw + ?Sized),
        out: &mut Vec<Action<N>>,
    ) where
        Q: Ord + ?Sized,
        N::Msg: Borrow<Q>,
    {
        let ttl = self.ttl;
        let Some(t) = self.msgs.get_mut(msg_id) else {
            return;
        };
        let believed_until = t.last_claim_seen.map(|s| s.saturating_add(ttl));
        let claim_live = believed_until.is_some_and(|until| until > now_ms);
        match t.phase {
            Phase::Inferring { .. } | Phase::Watching => {}
            // No response was seen: one seen while waiting already finished
            // the message (`on_reply_seen`), and a message seen answered
            // never starts waiting. A recheck is left: a message waits only
            // with `rechecks < max_rechecks`, and waiting counts none.
            Phase::Recheck => {
                // The wait itself lasted the TTL.
                self.ttl_audit.ran_out();
                if let (true, Some(at_ms)) = (claim_live, believed_until) {
                    out.push(Action::WakeAt {
                        msg_id: t.id.clone(),
                        at_ms,
                    });
                } else {
                    t.rechecks += 1;
                    t.phase = Phase::Csma;
                    out.push(Action::Wait {
                        msg_id: t.id.clone(),
                        delay_us: draw.csma_delay_us(self.cfg.csma),
                    });
                }
            }
            Phase::Csma => {
                if t.response_seen {
                    out.push(Action::Skip {
                        msg_id: t.id.clone(),
                        reason: SkipReason::SeenResponse,
                    });
                    self.msgs.remove(msg_id);
                } else if let (true, Some(at_ms)) = (claim_live, believed_until) {
                    if let Some(seen) = t.last_claim_seen {
                        self.ttl_audit
                            .live_at(u64::try_from(now_ms.saturating_sub(seen)).unwrap_or(0));
                    }
                    out.push(Action::Skip {
                        msg_id: t.id.clone(),
                        reason: SkipReason::SeenClaim,
                    });
                    if self.cfg.recheck_on_expiry && t.rechecks < self.cfg.max_rechecks {
                        // It wakes when the TTL runs out.
                        self.ttl_audit.ran_out();
                        t.phase = Phase::Recheck;
                        out.push(Action::WakeAt {
                            msg_id: t.id.clone(),
                            at_ms,
                        });
                    } else if self.rules.announce_release {
                        // Listen for a release until the claim is believed over.
                        t.phase = Phase::Watching;
                        self.watching += 1;
                    } else {
                        self.msgs.remove(msg_id);
                    }
                } else {
                    if believed_until.is_some() {
                        // A claim was seen and is believed over.
                        self.ttl_audit.ran_out();
                    }
                    t.phase = Phase::Inferring {
                        started_at: now_ms,
                        exempt: false,
                        ignore_yield: false,
                    };
                    if self.rules.clients_claim {
                        out.push(Action::Send(ClientMsg::RespondingTo {
                            msg_id: t.id.clone(),
                            started_at: now_ms.into(),
                            channel: t.reply_to.clone(),
                        }));
                    }
                    out.push(Action::StartInference {
                        msg_id: t.id.clone(),
                        started_at: now_ms,
                    });
                }
            }
        }
    }

    /// Start inference on `msg_id` now, whatever the agent has seen: the
    /// claim (`RESPONDING_TO` with `started_at`, unless the policy sends no
    /// claims, or `reply_to` is a DM peer) and `StartInference`. For
    /// replaying an incident in which this agent is known to have started.
    /// A message already tracked switches to inferring (a pending CSMA
    /// timer then does nothing); one already inferring is left alone.
    pub fn start_now(
        &mut self,
        msg_id: impl Into<N::Msg>,
        reply_to: impl Into<N::Dest>,
        started_at: i64,
        out: &mut Vec<Action<N>>,
    ) {
        let id = msg_id.into();
        if self.is_inferring(&id) {
            return;
        }
        if self
            .msgs
            .get(&id)
            .is_some_and(|t| t.phase == Phase::Watching)
        {
            self.watching -= 1;
        }
        let reply_to = reply_to.into();
        let exempt = self.names.starts_dm(&reply_to);
        if self.rules.clients_claim && !exempt {
            out.push(Action::Send(ClientMsg::RespondingTo {
                msg_id: id.clone(),
                started_at: started_at.into(),
                channel: reply_to.clone(),
            }));
        }
        out.push(Action::StartInference {
            msg_id: id.clone(),
            started_at,
        });
        let track = self.msgs.entry(id.clone()).or_insert_with(|| Track {
            id,
            reply_to,
            phase: Phase::Csma,
            last_claim_seen: None,
            response_seen: false,
            rechecks: 0,
        });
        track.phase = Phase::Inferring {
            started_at,
            exempt,
            ignore_yield: false,
        };
    }

    /// Any server message delivered to this agent. A FLOOR_RELEASED may
    /// start a new CSMA wait: the call takes the draw.
    pub fn on_server_msg(
        &mut self,
        now_ms: i64,
        msg: &ServerMsg<N>,
        draw: &mut (impl CsmaDraw + ?Sized),
        out: &mut Vec<Action<N>>,
    ) {
        // Every message below only matters for a tracked message.
        if self.msgs.is_empty() {
            return;
        }
        match msg {
            ServerMsg::RespondingTo {
                msg_id,
                from,
                started_at,
                channel,
            } => self.on_relayed_claim(now_ms, msg_id, from, *started_at, channel, out),
            ServerMsg::FloorClaimed {
                msg_id,
                channel,
                holder,
                ..
            } => self.on_floor_claimed(now_ms, msg_id, channel, holder),
            ServerMsg::FloorReleased {
                msg_id, channel, ..
            } => self.on_released(msg_id, channel, draw, out),
            ServerMsg::Msg {
                from,
                in_reply_to: Some(m),
                ..
            } => self.on_reply_seen(from, m),
            ServerMsg::Yield {
                msg_id,
                winner,
                channel,
                ..
            } => self.on_yield(msg_id, winner, channel, out),
            ServerMsg::Msg {
                in_reply_to: None, ..
            }
            | ServerMsg::Error { .. } => {}
        }
    }

    /// Another agent's RESPONDING_TO, relayed: note the claim seen and,
    /// where the policy has clients abort on a relayed claim that orders
    /// before their own inference, abort.
    fn on_relayed_claim(
        &mut self,
        now_ms: i64,
        msg_id: &N::Msg,
        from: &N::Agent,
        started_at: Stamp,
        channel: &N::Dest,
        out: &mut Vec<Action<N>>,
    ) {
        if *from == self.cfg.id {
            return;
        }
        let Some(t) = self.msgs.get_mut(msg_id) else {
            return;
        };
        if t.reply_to != *channel {
            return;
        }
        t.last_claim_seen = Some(t.last_claim_seen.map_or(now_ms, |s| s.max(now_ms)));
        if let Phase::Inferring {
            started_at: own,
            exempt: false,
            ignore_yield: false,
        } = t.phase
            && self.rules.client_aborts_on_relayed_claim
            && (started_at, from) < (Stamp::Int(own), &self.cfg.id)
        {
            out.push(Action::Abort {
                msg_id: t.id.clone(),
                winner: from.clone(),
            });
            self.msgs.remove(msg_id);
        }
    }

    /// Another agent's FLOOR_CLAIMED: note the claim seen.
    fn on_floor_claimed(
        &mut self,
        now_ms: i64,
        msg_id: &N::Msg,
        channel: &N::Dest,
        holder: &N::Agent,
    ) {
        if *holder == self.cfg.id {
            return;
        }
        if let Some(t) = self.msgs.get_mut(msg_id)
            && t.reply_to == *channel
        {
            t.last_claim_seen = Some(t.last_claim_seen.map_or(now_ms, |s| s.max(now_ms)));
        }
    }

    /// FLOOR_RELEASED: the claim on `msg_id` is gone with its holder (a
    /// disconnect, a leave), so no claim seen for it is live any more. A
    /// message skipped for it and watched starts a new CSMA wait at once; one
    /// still waiting will claim when its wait ends; one waiting for a
    /// recheck rechecks at its wake (its `WakeAt` stands: the caller's timer
    /// is not withdrawn) and then finds no live claim. Nothing once an
    /// answer was seen.
    fn on_released(
        &mut self,
        msg_id: &N::Msg,
        channel: &N::Dest,
        draw: &mut (impl CsmaDraw + ?Sized),
        out: &mut Vec<Action<N>>,
    ) {
        let Some(t) = self.msgs.get_mut(msg_id) else {
            return;
        };
        if t.reply_to != *channel || t.response_seen {
            return;
        }
        match t.phase {
            Phase::Inferring { .. } => {}
            Phase::Csma | Phase::Recheck => t.last_claim_seen = None,
            Phase::Watching => {
                t.last_claim_seen = None;
                t.phase = Phase::Csma;
                self.watching -= 1;
                out.push(Action::Wait {
                    msg_id: t.id.clone(),
                    delay_us: draw.csma_delay_us(self.cfg.csma),
                });
            }
        }
    }

    /// Another agent's reply to `msg_id`: note it seen; a message waiting
    /// for its recheck is finished (no recheck will happen).
    fn on_reply_seen(&mut self, from: &N::Agent, msg_id: &N::Msg) {
        if *from == self.cfg.id {
            return;
        }
        if let Some(t) = self.msgs.get_mut(msg_id) {
            t.response_seen = true;
            match t.phase {
                Phase::Recheck => {
                    self.msgs.remove(msg_id);
                }
                Phase::Watching => {
                    self.msgs.remove(msg_id);
                    self.watching -= 1;
                }
                Phase::Csma | Phase::Inferring { .. } => {}
            }
        }
    }

    /// A YIELD naming another winner: abort the inference for `msg_id`
    /// unless it is exempt or told to ignore YIELDs.
    fn on_yield(
        &mut self,
        msg_id: &N::Msg,
        winner: &N::Agent,
        channel: &N::Dest,
        out: &mut Vec<Action<N>>,
    ) {
        // A YIELD answers a claim: a client that sends none (`none`) was
        // yielded nothing, whatever a server says.
        if *winner == self.cfg.id || !self.rules.clients_claim {
            return;
        }
        if let Some(t) = self.msgs.get(msg_id)
            && t.reply_to == *channel
            && matches!(
                t.phase,
                Phase::Inferring {
                    exempt: false,
                    ignore_yield: false,
                    ..
                }
            )
        {
            out.push(Action::Abort {
                msg_id: t.id.clone(),
                winner: winner.clone(),
            });
            self.msgs.remove(msg_id);
        }
    }

    /// The inference for `msg_id` completed: post the reply (`Post(Msg {id:
    /// reply_id, to: reply_to, content, in_reply_to: msg_id})`) and forget
    /// the message. Nothing if it is not inferring (aborted, unknown).
    pub fn on_inference_done<Q>(
        &mut self,
        _now_ms: i64,
        msg_id: &Q,
        reply_id: Option<N::Msg>,
        content: N::Content,
        out: &mut Vec<Action<N>>,
    ) where
        Q: Ord + ?Sized,
        N::Msg: Borrow<Q>,
    {
        let inferring = self
            .msgs
            .get(msg_id)
            .is_some_and(|t| matches!(t.phase, Phase::Inferring { .. }));
        if !inferring {
            return;
        }
        if let Some(t) = self.msgs.remove(msg_id) {
            out.push(Action::Post(ClientMsg::Msg {
                id: reply_id,
                to: t.reply_to,
                content,
                in_reply_to: Some(t.id),
            }));
        }
    }

    /// Ignore YIELDs and relayed claims for the running inference of
    /// `msg_id` (drawn per (agent, message) when inference starts; also for
    /// hung inferences). Nothing if it is not inferring.
    pub fn set_ignore_yield<Q>(&mut self, msg_id: &Q, ignore: bool)
    where
        Q: Ord + ?Sized,
        N::Msg: Borrow<Q>,
    {
        if let Some(Track {
            phase: Phase::Inferring { ignore_yield, .. },
            ..
        }) = self.msgs.get_mut(msg_id)
        {
            *ignore_yield = ignore;
        }
    }

    /// Forget a message (e.g. the agent crashed while handling it). Later
    /// calls about it do nothing.
    pub fn forget<Q>(&mut self, msg_id: &Q)
    where
        Q: Ord + ?Sized,
        N::Msg: Borrow<Q>,
    {
        if self
            .msgs
            .remove(msg_id)
            .is_some_and(|t| t.phase == Phase::Watching)
        {
            self.watching -= 1;
        }
    }

    /// Forget every message (e.g. the agent restarted).
    pub fn reset(&mut self) {
        self.msgs.clear();
        self.watching = 0;
    }

    /// What this client's decisions so far asked of the TTL: a CSMA timer
    /// that skipped for a claim seen `age` ms before needs a TTL above
    /// `age`; a claim believed over, or a recheck (which waits for the
    /// TTL), makes the run depend on its exact value. See [`TtlAudit`].
    pub fn ttl_audit(&self) -> TtlAudit {
        self.ttl_audit
    }

    /// Messages currently tracked (waiting, rechecking or inferring; not
    /// the ones only listened to for a release).
    pub fn tracked(&self) -> usize {
        self.msgs.len() - self.watching
    }

    /// Whether `msg_id` is still being handled (waiting, rechecking or
    /// inferring). A finished message is forgotten.
    pub fn is_tracking<Q>(&self, msg_id: &Q) -> bool
    where
        Q: Ord + ?Sized,
        N::Msg: Borrow<Q>,
    {
        self.msgs
            .get(msg_id)
            .is_some_and(|t| t.phase != Phase::Watching)
    }

    /// Whether an inference is running for `msg_id`.
    pub fn is_inferring<Q>(&self, msg_id: &Q) -> bool
    where
        Q: Ord + ?Sized,
        N::Msg: Borrow<Q>,
    {
        self.msgs
            .get(msg_id)
            .is_some_and(|t| matches!(t.phase, Phase::Inferring { .. }))
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
