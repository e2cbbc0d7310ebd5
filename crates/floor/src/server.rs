//! The server side: channel membership, the claim table, relay.
//!
//! Sans-IO: [`Server::handle`] takes one [`Input`] and the current server
//! time in ms, and appends the messages to send, in order, to `out`. It
//! first runs the timers that are due at that time (claim expiry at
//! `now >= deadline`, or the 5 s sweeps of `agentchat-0.36`), so the state
//! is always "as of the last handled time". [`Server::poll_timeout`] tells
//! the caller when the next timer is due.
//!
//! Behaviour common to all policies (documented choices), except where
//! `agentchat-0.36` follows the real server instead (its rules, with the
//! server function each comes from, are on [`PolicyKind::Agentchat036`]):
//! - Time never goes backwards: a `now` earlier than the last handled
//!   time is treated as the last handled time.
//! - `Join`/`Leave` send nothing. A `Join` to an invalid channel name gets
//!   an `ERROR` (code `bad_channel`; agentchat: `INVALID_MSG`). Under
//!   agentchat a JOIN also creates the channel, which then always exists.
//! - `Disconnect` is the end of the agent's connection: it leaves every
//!   channel (a reconnecting agent must `Join` again) and all its claims
//!   are released (tombstone markers it left stay: the message *was*
//!   answered). `Connect`/`Identify` matter only under agentchat.
//! - A channel `MSG` is relayed to every other member (never echoed to the
//!   sender); the sender must be a member (else `ERROR not_member`). A DM
//!   (`to: "@id"`) goes to that agent only, whoever it is, and releases no
//!   claim (agentchat refuses DMs, and refuses MSGs for its rate limit,
//!   lurk window and identification; a refused MSG releases nothing). A
//!   MSG without `id` gets one from the server: `s1`, `s2`, ... in order
//!   of relay.
//! - A `RESPONDING_TO` whose `channel` is a DM target (`@id`) creates no
//!   claim and nothing is sent (the protocol does not apply to DMs); it
//!   still counts in `claims_received` (agentchat: `ERROR INVALID_MSG`).
//! - The operator's ([`Role::Operator`]) RESPONDING_TO takes the floor
//!   where [`crate::sim::Rules::operator_takes_floor`] (every tracking
//!   policy but `agentchat-0.36`): held whatever its `started_at`, ordered
//!   before every agent's claim, a live holder displaced with a YIELD; a
//!   repeat changes nothing. Under `agentchat-0.36` it is not tracked and
//!   (that policy relaying no raw claims) dropped; with tracking off it is
//!   relayed as any claim.
//! - A live claim released because its holder disconnected or left is
//!   announced to the rest of its channel as
//!   [`crate::ServerMsg::FloorReleased`] where
//!   [`crate::sim::Rules::announce_release`].
//! - With `enabled = false` (and under `none`) nothing is tracked and no
//!   YIELD is ever sent: a RESPONDING_TO is relayed to the other members
//!   like any message (after the usual checks: channel name, `started_at`,
//!   membership as the policy says).
//! - Protocol errors answer the sender with `ERROR {code, message}`;
//!   processing goes on. Codes: `bad_message` (undecodable or invalid
//!   message), `bad_channel`, `bad_started_at`, `not_member`; agentchat's
//!   own under `agentchat-0.36` (see [`crate::sim::ErrorStyle`]).
//! - With [`Config::claim_guard`] on (off by default), a claim for a
//!   message the server has not relayed in that channel, or (`clock`) one
//!   dated well before that relay, is refused with an ERROR: the
//!   floor-squatting defence, see [`ClaimGuard`].
//! - `Stats::relayed` counts every send except YIELDs (ERRORs included);
//!   `Stats::refused_msgs` counts MSGs answered with an ERROR instead of
//!   being relayed.
//!
//! The server's parts, a file each (`server/`): `config` (the [`Config`],
//! the claim guard's setting, the environment variables), `sends` (the one
//! way out), `members` (a channel's member list), `claims` (the claim
//! table: judged, granted, denied, displaced, released, expired),
//! `messages` (a MSG's route, what it releases, its id), `guard` (the
//! claim guard's memory and refusals) and `agentchat` (the gates only
//! `agentchat-0.36` has). This file holds the state and the one way in.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use crate::edge::Refusal;
use crate::input::{Input, Role};
use crate::naming::{Naming, Place, Text, is_channel};
use crate::policy::{
    AGENTCHAT_CHANNEL_MAX, AGENTCHAT_DEFAULT_CHANNELS, AGENTCHAT_FRAMES_IDENTIFIED,
    AGENTCHAT_FRAMES_UNIDENTIFIED, AGENTCHAT_RATE_LIMIT_MS, AGENTCHAT_SWEEP_MS, Announce, Channels,
    ClaimOrder, DEFAULT_TTL_MS, ENABLED_VAR, ErrorStyle, Expiry, FrameWindow, MsgGate, PolicyKind,
    REASON_DENIED, REASON_DISPLACED, Release, Rules, Slot, Verdict, YieldForm,
};
use crate::relay_memory::RelayMemory;
use crate::time::Millis;
use crate::ttl_audit::TtlAudit;
use crate::wire::{ClientMsg, DecodeError, ServerMsg, Stamp, YieldDetail, clip};

mod agentchat;
mod claims;
mod config;
mod guard;
mod members;
mod messages;
mod sends;

use claims::{Claim, ClaimReq};
pub use config::{ClaimGuard, Config, ConfigError, DEFAULT_CLAIM_SKEW_MS, NEVER, agentchat_ttl};
use members::Members;
use messages::MsgReq;
#[cfg(test)]
pub(crate) use sends::Outgoing;
pub use sends::Sends;

/// Counters a production server would export too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// RESPONDING_TO messages received (valid or not).
    pub claims_received: u64,
    /// YIELD messages sent.
    pub yields: u64,
    /// Claims that reached their deadline while still held (under
    /// `agentchat-0.36`: removed by a sweep). Tombstone markers are not counted.
    pub expired: u64,
    /// Holders displaced by an earlier claim (an `agentchat-0.36` holder
    /// re-granted over itself is not counted).
    pub overruled: u64,
    /// Every server-to-agent send except YIELDs.
    pub relayed: u64,
    /// MSGs refused with an ERROR (not relayed, releasing nothing).
    pub refused_msgs: u64,
    /// Of those, refused by the `agentchat-0.36` rate limit.
    pub rate_limited: u64,
    /// Claims refused by the claim guard ([`Config::claim_guard`]).
    pub claims_refused: u64,
    /// Agents disconnected by the flood limit ([`Config::frame_limit`]).
    pub frame_closed: u64,
    /// Channel MSGs relayed under a server id because the claim guard
    /// remembers their own id as another sender's message.
    pub ids_renamed: u64,
}

/// A read-only view of one entry of the claim table. `A`: how agents are
/// named (a wire id `str`, or a handle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimInfo<'a, A: ?Sized = str> {
    /// The agent holding the claim (or, for a marker, the answerer).
    pub holder: &'a A,
    /// As sent by the holder.
    pub started_at: Stamp,
    /// Server time of the grant (the deadline is this plus the TTL).
    pub granted_at: Millis,
    /// Server time the claim expires at.
    pub deadline: Millis,
    /// A `tombstone` "answered" marker rather than a live claim.
    pub answered: bool,
}

/// A (channel, msg_id) key of the claim table.
type Key<N> = (<N as Naming>::Dest, <N as Naming>::Msg);

/// The arbitration server. See the module docs. `N`: how agents,
/// channels and messages are named ([`Text`] by default: wire text).
#[derive(Debug, Clone)]
pub struct Server<N: Naming = Text> {
    cfg: Config,
    rules: Rules,
    names: N,
    /// The last handled time.
    now: u64,
    /// What the claims' fates asked of the TTL (see [`TtlAudit`]).
    ttl_audit: TtlAudit,
    /// channel -> members.
    members: BTreeMap<N::Dest, Members<N::Agent>>,
    /// agent -> channels it is in.
    joined: BTreeMap<N::Agent, BTreeSet<N::Dest>>,
    /// (channel, msg_id) -> claim (live or tombstone marker). Flat keys: a
    /// map's nodes stay allocated while it has any entry.
    claims: BTreeMap<Key<N>, Claim<N::Agent>>,
    /// agent -> (channel, msg_id) of every live (not answered) claim it
    /// holds, in key order (a handful: a sorted list). An agent's list
    /// stays, empty, until it disconnects (so a claim's grant and release
    /// allocate nothing): at most one per connected agent that claimed.
    held_by: BTreeMap<N::Agent, Vec<Key<N>>>,
    /// (deadline, seq) -> (channel, msg_id), for every entry of `claims`.
    deadlines: BTreeMap<(u64, u64), Key<N>>,
    live: usize,
    markers: usize,
    next_seq: u64,
    next_msg_id: u64,
    stats: Stats,
    /// `Channels::Registry`: every channel that exists.
    channels: BTreeSet<N::Dest>,
    /// Connections that have not identified (`Input::Connect`).
    unidentified: BTreeSet<N::Agent>,
    /// Identities in agentchat's lurk window.
    lurking: BTreeSet<N::Agent>,
    /// agent -> server time of its last MSG that passed the rate limit.
    last_msg: BTreeMap<N::Agent, u64>,
    /// [`Config::frame_limit`]: agent -> its frames of the last window.
    frames: BTreeMap<N::Agent, FrameWindow>,
    /// Sweep expiry: the number of the last sweep that ran.
    last_sweep: Option<u128>,
    /// Claim guard: (channel, msg_id) -> the sender and server time of its
    /// last relay.
    relays: RelayMemory<N::Agent, Key<N>>,
}

impl Server<Text> {
    /// A server naming everything by its wire text.
    pub fn new(cfg: Config) -> Server {
        Server::with_naming(cfg, Text)
    }
}

impl<N: Naming> Server<N> {
    /// A server naming agents, channels and messages as `names` does (see
    /// [`crate::Naming`]).
    pub fn with_naming(cfg: Config, names: N) -> Server<N> {
        let rules = cfg.policy.rules();
        let channels = match rules.channels {
            Channels::Registry => AGENTCHAT_DEFAULT_CHANNELS
                .iter()
                .filter_map(|c| names.dest_named(c))
                .collect(),
            Channels::Membership => BTreeSet::new(),
        };
        Server {
            channels,
            unidentified: BTreeSet::new(),
            lurking: BTreeSet::new(),
            last_msg: BTreeMap::new(),
            frames: BTreeMap::new(),
            last_sweep: None,
            relays: RelayMemory::default(),
            rules,
            cfg,
            names,
            now: 0,
            members: BTreeMap::new(),
            joined: BTreeMap::new(),
            claims: BTreeMap::new(),
            held_by: BTreeMap::new(),
            deadlines: BTreeMap::new(),
            ttl_audit: TtlAudit::default(),
            live: 0,
            markers: 0,
            next_seq: 0,
            next_msg_id: 0,
            stats: Stats::default(),
        }
    }

    /// The naming this server uses.
    pub fn naming(&self) -> &N {
        &self.names
    }

    /// The one way in: handle `input` at server time `now` (due timers
    /// first), appending what to send, in order, to `out` (which it does
    /// not clear). A frame from a transport becomes an input at the edge
    /// ([`crate::edge::decode`]); [`Input::Tick`] at [`Server::poll_timeout`]
    /// runs the timers.
    pub fn handle(&mut self, now: Millis, input: Input<N>, out: &mut Sends<N>) {
        let now = self.advance(now.0);
        if self.cfg.frame_limit && self.rules.msg_gate == MsgGate::Agentchat {
            let agent = match &input {
                Input::Join { agent, .. } | Input::Leave { agent, .. } => Some(agent),
                Input::Client {
                    from,
                    role: Role::Agent,
                    ..
                } => Some(from),
                _ => None,
            };
            if let Some(agent) = agent
                && self.flooded(now, agent)
            {
                let agent = agent.clone();
                self.stats.frame_closed += 1;
                return self.disconnect(&agent, out);
            }
        }
        match input {
            Input::Tick => {}
            Input::Connect { agent } => {
                self.lurking.remove(&agent);
                self.unidentified.insert(agent);
            }
            Input::Identify { agent, lurk } => {
                self.unidentified.remove(&agent);
                if lurk {
                    self.lurking.insert(agent);
                } else {
                    self.lurking.remove(&agent);
                }
            }
            Input::Join { agent, channel } => self.join(agent, channel, out),
            Input::Leave { agent, channel } => self.leave(&agent, &channel, out),
            Input::Disconnect { agent } => self.disconnect(&agent, out),
            Input::Undecodable { from, error, claim } => {
                if claim {
                    self.stats.claims_received += 1;
                }
                self.error(&from, Refusal::Undecodable { error, claim }, out);
            }
            Input::Client { from, role, msg } => match msg {
                ClientMsg::RespondingTo {
                    msg_id,
                    started_at,
                    channel,
                } => {
                    let claim = ClaimReq {
                        from,
                        role,
                        msg_id,
                        started_at,
                        channel,
                    };
                    self.on_claim(now, claim, out)
                }
                ClientMsg::Msg {
                    id,
                    to,
                    content,
                    in_reply_to,
                } => {
                    let msg = MsgReq {
                        from,
                        role,
                        id,
                        to,
                        content,
                        in_reply_to,
                    };
                    self.on_msg(now, msg, out)
                }
            },
        }
    }

    /// The `ERROR` code and message this server answers `refusal` with
    /// (herdsim's codes, or agentchat's under `agentchat-0.36`).
    pub fn render(&self, refusal: &Refusal) -> (&'static str, String) {
        refusal.render(self.rules.errors)
    }

    /// The next server time (ms) at which `handle(_, Input::Tick, _)` would
    /// change state: the earliest claim (or marker) deadline, or under
    /// `agentchat-0.36` the first sweep at or after it. `None` when no claim
    /// is tracked.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let (&(deadline, _), _) = self.deadlines.first_key_value()?;
        let at = match self.rules.expiry {
            Expiry::Sweep if self.cfg.sweep_every_ms > 0 => {
                // The first sweep at or after the deadline, in ms (rounded up).
                // A sweep that already ran does not run again (a TTL of 0
                // granted at a sweep's instant waits for the next one).
                let (phase, period) = self.sweep_us();
                let d = u128::from(deadline) * 1000;
                let mut k = d.saturating_sub(phase).div_ceil(period);
                if let Some(last) = self.last_sweep {
                    k = k.max(last + 1);
                }
                let at = (phase + k * period).div_ceil(1000);
                u64::try_from(at).unwrap_or(u64::MAX)
            }
            _ => deadline,
        };
        Some(Millis(at))
    }

    /// Sweep phase and period in microseconds.
    fn sweep_us(&self) -> (u128, u128) {
        (
            u128::from(self.cfg.sweep_phase_ms) * 1000,
            u128::from(self.cfg.sweep_every_ms) * 1000 + u128::from(self.cfg.sweep_drift_us),
        )
    }

    /// What the server has counted so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// What the claims so far asked of the TTL: whether any claim or marker
    /// expired, and the least TTL that would have kept every removed claim
    /// until its removal (see [`TtlAudit`]). A claim still in the table is
    /// not in it: under a shorter TTL it might expire later on. Driven as
    /// `TtlAudit` says (woken only at [`Server::poll_timeout`]), a server
    /// that ends with no claim and an audit without expiry decided
    /// everything the same under any TTL from `least_ttl_ms` on.
    pub fn ttl_audit(&self) -> TtlAudit {
        let mut a = self.ttl_audit;
        if !self.claims.is_empty() {
            a.ran_out();
        }
        a
    }

    /// The configuration the server runs.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The last handled server time.
    pub fn now(&self) -> Millis {
        Millis(self.now)
    }

    /// The current holder of (channel, msg_id) and its `started_at`, if a
    /// live claim exists as of the last handled time (a tombstone marker is
    /// not a live claim; under `agentchat-0.36` an expired claim not yet
    /// swept still is, as it still wins). Names as the server's or their
    /// borrowed form (`&str` for [`Text`]).
    pub fn holder<D, M>(&self, channel: &D, msg_id: &M) -> Option<(&N::Agent, Stamp)>
    where
        D: ToOwned<Owned = N::Dest> + ?Sized,
        M: ToOwned<Owned = N::Msg> + ?Sized,
    {
        // Handling an input runs the due expiries first, so every entry
        // the table holds is live as of the last handled time (a claim
        // that never expires, too, even at `u64::MAX`).
        let c = self.claims.get(&(channel.to_owned(), msg_id.to_owned()))?;
        (!c.answered).then_some((&c.holder, c.started_at))
    }

    /// The claim table entry of (channel, msg_id), live claim or marker.
    pub fn claim_info<D, M>(&self, channel: &D, msg_id: &M) -> Option<ClaimInfo<'_, N::Agent>>
    where
        D: ToOwned<Owned = N::Dest> + ?Sized,
        M: ToOwned<Owned = N::Msg> + ?Sized,
    {
        let c = self.claims.get(&(channel.to_owned(), msg_id.to_owned()))?;
        Some(ClaimInfo {
            holder: &c.holder,
            started_at: c.started_at,
            granted_at: Millis(c.granted_at),
            deadline: Millis(c.deadline),
            answered: c.answered,
        })
    }

    /// Whether `agent` is a member of `channel`.
    pub fn is_member<A, D>(&self, agent: &A, channel: &D) -> bool
    where
        N::Agent: Borrow<A>,
        N::Dest: Borrow<D>,
        A: Ord + ?Sized,
        D: Ord + ?Sized,
    {
        self.members
            .get(channel)
            .is_some_and(|m| m.find(agent).is_ok())
    }

    /// The members of a channel, in id order.
    pub fn members<'a, D>(
        &'a self,
        channel: &D,
    ) -> impl Iterator<Item = &'a N::Agent> + use<'a, N, D>
    where
        N::Dest: Borrow<D>,
        D: Ord + ?Sized,
    {
        self.members
            .get(channel)
            .into_iter()
            .flat_map(|m| m.0.iter())
    }

    /// Live claims tracked (tombstone markers excluded).
    pub fn claim_count(&self) -> usize {
        self.live
    }

    /// Tombstone "answered" markers tracked.
    pub fn marker_count(&self) -> usize {
        self.markers
    }

    /// The number of channels `agent` is a member of.
    pub fn channels_of<A>(&self, agent: &A) -> usize
    where
        N::Agent: Borrow<A>,
        A: Ord + ?Sized,
    {
        self.joined.get(agent).map_or(0, BTreeSet::len)
    }

    /// The number of live claims `agent` holds (in every channel).
    pub fn claims_held<A>(&self, agent: &A) -> usize
    where
        N::Agent: Borrow<A>,
        A: Ord + ?Sized,
    {
        self.held_by.get(agent).map_or(0, Vec::len)
    }

    /// Whether `channel` exists: under the policies whose channels exist
    /// while they have members, whether it has one; under `agentchat-0.36`,
    /// whether it is a default channel or was ever joined.
    pub fn channel_exists<D>(&self, channel: &D) -> bool
    where
        N::Dest: Borrow<D>,
        D: Ord + ?Sized,
    {
        match self.rules.channels {
            Channels::Membership => self.members.contains_key(channel),
            Channels::Registry => self.channels.contains(channel),
        }
    }

    /// The number of channels that exist (see [`Server::channel_exists`]).
    pub fn channel_count(&self) -> usize {
        match self.rules.channels {
            Channels::Membership => self.members.len(),
            Channels::Registry => self.channels.len(),
        }
    }

    /// The relayed messages the claim guard remembers (0 when it is off).
    pub fn relays_remembered(&self) -> usize {
        self.relays.len()
    }

    // ------------------------------------------------------------ internals

    fn tracking(&self) -> bool {
        self.cfg.enabled && self.rules.tracks_claims
    }

    /// Move the clock to `now_ms` (never backwards) and run due timers.
    fn advance(&mut self, now_ms: u64) -> u64 {
        let now = now_ms.max(self.now);
        self.now = now;
        // The claims with deadline <= limit are expired as of `now`: under
        // sweeps, limit is the time of the last sweep at or before now, in us.
        let limit: Option<u128> = match self.rules.expiry {
            Expiry::AtDeadline => Some(u128::from(now) * 1000),
            Expiry::Sweep if self.cfg.sweep_every_ms > 0 => {
                let (phase, period) = self.sweep_us();
                let t = u128::from(now) * 1000;
                let k = (t >= phase).then(|| (t - phase) / period);
                // Each sweep runs once: claims granted after it ran (at its
                // very instant) wait for the next one.
                if k.is_none() || k == self.last_sweep {
                    return now;
                }
                self.last_sweep = k;
                k.map(|k| phase + k * period)
            }
            Expiry::Sweep => Some(u128::from(now) * 1000),
        };
        let Some(limit) = limit else {
            return now;
        };
        while let Some((&(deadline, _), _)) = self.deadlines.first_key_value() {
            if u128::from(deadline) * 1000 > limit {
                break;
            }
            let Some((_, key)) = self.deadlines.pop_first() else {
                break;
            };
            self.ttl_audit.ran_out();
            if let Some(c) = self.remove_claim(&key)
                && !c.answered
            {
                self.stats.expired += 1;
            }
        }
        now
    }

    /// Answer `to` with the ERROR that `refusal` is, worded at the edge.
    fn error(&mut self, to: &N::Agent, refusal: Refusal, out: &mut Sends<N>) {
        let (code, message) = refusal.render(self.rules.errors);
        self.stats.relayed += 1;
        out.push(
            to.clone(),
            ServerMsg::Error {
                code: code.to_string(),
                message,
            },
        );
    }

    /// Send `msg` (a MSG, RESPONDING_TO or FLOOR_CLAIMED) to every member
    /// of its channel but its sender, in id order.
    fn fan_out(&mut self, msg: ServerMsg<N>, out: &mut Sends<N>) {
        let (channel, except) = match &msg {
            ServerMsg::Msg { to, from, .. } => (to, from),
            ServerMsg::RespondingTo { channel, from, .. } => (channel, from),
            ServerMsg::FloorClaimed {
                channel, holder, ..
            }
            | ServerMsg::FloorReleased {
                channel, holder, ..
            } => (channel, holder),
            // Never relayed to a channel.
            ServerMsg::Yield { .. } | ServerMsg::Error { .. } => return,
        };
        let Some(members) = self.members.get(channel) else {
            return;
        };
        // The members before and after `except` (two slices of the sorted
        // list): no comparison per member.
        let (before, after) = match members.find(except) {
            Ok(i) => (&members.0[..i], &members.0[i + 1..]),
            Err(_) => (&members.0[..], &[][..]),
        };
        let n = before.len() + after.len();
        self.stats.relayed += n as u64;
        if n == 0 {
            return;
        }
        out.fan_out([before, after], msg);
    }

    /// Refuse a MSG with an ERROR.
    fn refuse(&mut self, to: &N::Agent, refusal: Refusal, out: &mut Sends<N>) {
        self.stats.refused_msgs += 1;
        self.error(to, refusal, out);
    }

    fn join(&mut self, agent: N::Agent, channel: N::Dest, out: &mut Sends<N>) {
        if self.rules.channels == Channels::Registry {
            // `handleJoin` (`lib/server/handlers/message.ts`), after
            // `validateClientMessage`. A JOIN to a channel that does not
            // exist creates it (herdsim's JOIN stands for CREATE_CHANNEL +
            // JOIN there); channels are never deleted.
            if !self.agentchat_channel_ok(&channel) {
                return self.error(&agent, Refusal::InvalidChannelName, out);
            }
            if self.unidentified.contains(&agent) {
                return self.error(&agent, Refusal::AuthRequired, out);
            }
            self.channels.insert(channel.clone());
        } else if !is_channel(&self.names, &channel) {
            let channel = clip(&self.names.show_dest(&channel));
            self.error(&agent, Refusal::BadChannel { channel }, out);
            return;
        }
        self.joined
            .entry(agent.clone())
            .or_default()
            .insert(channel.clone());
        self.members.entry(channel).or_default().insert(agent);
    }

    fn leave(&mut self, agent: &N::Agent, channel: &N::Dest, out: &mut Sends<N>) {
        if let Some(m) = self.members.get_mut(channel) {
            m.remove(agent);
            if m.0.is_empty() {
                self.members.remove(channel);
            }
        }
        if let Some(j) = self.joined.get_mut(agent) {
            j.remove(channel);
            if j.is_empty() {
                self.joined.remove(agent);
            }
        }
        if self.rules.leave_releases {
            for key in self.release_all_in(agent, channel) {
                self.announce_released(agent, key, out);
            }
        }
    }

    /// Tell the channel a live claim is gone with its holder (a disconnect,
    /// a leave), where the policy does ([`Rules::announce_release`]): the
    /// agents that skipped the message for it decide again at once rather
    /// than after their TTL.
    fn announce_released(
        &mut self,
        holder: &N::Agent,
        (channel, msg_id): Key<N>,
        out: &mut Sends<N>,
    ) {
        if self.rules.announce_release {
            let msg = ServerMsg::FloorReleased {
                msg_id,
                channel,
                holder: holder.clone(),
            };
            self.fan_out(msg, out);
        }
    }

    fn disconnect(&mut self, agent: &N::Agent, out: &mut Sends<N>) {
        self.relays.disconnect(agent);
        self.frames.remove(agent);
        // The connection's state goes with it (`_handleDisconnect`,
        // `lib/server.ts`: `lastMessageTime.delete(ws)`).
        self.unidentified.remove(agent);
        self.lurking.remove(agent);
        self.last_msg.remove(agent);
        let channels = self.joined.remove(agent).unwrap_or_default();
        for channel in &channels {
            if let Some(m) = self.members.get_mut(channel) {
                m.remove(agent);
                if m.0.is_empty() {
                    self.members.remove(channel);
                }
            }
        }
        for key in self.held_by.remove(agent).unwrap_or_default() {
            if self.remove_claim(&key).is_some() {
                self.announce_released(agent, key, out);
            }
        }
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
