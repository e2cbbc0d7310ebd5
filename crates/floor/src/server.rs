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
//!   where [`crate::policy::Rules::operator_takes_floor`] (every tracking
//!   policy but `agentchat-0.36`): held whatever its `started_at`, ordered
//!   before every agent's claim, a live holder displaced with a YIELD; a
//!   repeat changes nothing. Under `agentchat-0.36` it is not tracked and
//!   (that policy relaying no raw claims) dropped; with tracking off it is
//!   relayed as any claim.
//! - A live claim released because its holder disconnected or left is
//!   announced to the rest of its channel as
//!   [`crate::ServerMsg::FloorReleased`] where
//!   [`crate::policy::Rules::announce_release`].
//! - With `enabled = false` (and under `none`) nothing is tracked and no
//!   YIELD is ever sent: a RESPONDING_TO is relayed to the other members
//!   like any message (after the usual checks: channel name, `started_at`,
//!   membership as the policy says).
//! - Protocol errors answer the sender with `ERROR {code, message}`;
//!   processing goes on. Codes: `bad_message` (undecodable or invalid
//!   message), `bad_channel`, `bad_started_at`, `not_member`; agentchat's
//!   own under `agentchat-0.36` (see [`crate::policy::ErrorStyle`]).
//! - With [`Config::claim_guard`] on (off by default), a claim for a
//!   message the server has not relayed in that channel, or (`clock`) one
//!   dated well before that relay, is refused with an ERROR: the
//!   floor-squatting defence, see [`ClaimGuard`].
//! - `Stats::relayed` counts every send except YIELDs (ERRORs included);
//!   `Stats::refused_msgs` counts MSGs answered with an ERROR instead of
//!   being relayed.

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

/// Server configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The arbitration policy.
    pub policy: PolicyKind,
    /// Claim TTL in milliseconds (default 45000). [`NEVER`] (`u64::MAX`):
    /// claims never expire.
    pub ttl_ms: u64,
    /// `false` turns claim tracking off; messages are still relayed.
    pub enabled: bool,
    /// `agentchat-0.36` only: a MSG less than this many ms after the
    /// sender's previous one (that passed this check) is refused with
    /// `RATE_LIMITED` (default 1000, the server's `rateLimitMs`); 0 turns
    /// the limit off (the real server cannot: `options.rateLimitMs || 1000`).
    pub rate_limit_ms: u64,
    /// Sweep expiry (`agentchat-0.36`) only: sweep number k runs at server
    /// time `sweep_phase_ms + k x (5000 ms + sweep_drift_us)`, k = 0, 1, ...
    /// (the real server's `setInterval` starts with the server, at an
    /// arbitrary phase relative to anything else). Default 0.
    pub sweep_phase_ms: u64,
    /// Sweep expiry only: how much later than 5000 ms each sweep comes, in
    /// microseconds (the real timer drifts by about 300-1100 us per sweep
    /// under load). Default 0.
    pub sweep_drift_us: u64,
    /// Sweep expiry only: the sweep's period in ms (default
    /// [`AGENTCHAT_SWEEP_MS`], the real server's 5000; a driver that runs
    /// the server faster or slower than real time scales it). 0: claims
    /// expire exactly at their deadline.
    pub sweep_every_ms: u64,
    /// `agentchat-0.36` only: the operator's MSGs pass the rate limit too
    /// (the real server knows no operator: it is one connection like any
    /// other). Default false: the operator is exempt.
    pub rate_limit_operator: bool,
    /// The floor-squatting defence (see [`ClaimGuard`]). Default
    /// [`ClaimGuard::default_for`] the policy: [`ClaimGuard::Relayed`]
    /// (what `herdsim serve` runs), [`ClaimGuard::Off`] under
    /// `agentchat-0.36` (the real server has no such check). Set
    /// [`ClaimGuard::Off`] for a policy exactly as it is written.
    pub claim_guard: ClaimGuard,
    /// `agentchat-0.36` only: apply agentchat 0.36.19's flood limit to
    /// every agent's inputs (JOIN, LEAVE, MSG, RESPONDING_TO): the one that
    /// makes more than 60 in 10 s (10 before `Input::Identify`) is dropped
    /// and the agent disconnected ([`crate::policy::FrameWindow`]),
    /// counted in [`Stats::frame_closed`]. The operator is exempt. Default
    /// false (`arbitrate` and the library as before); the simulator sets
    /// it; `serve` applies the limit to the socket's frames instead.
    pub frame_limit: bool,
}

/// The floor-squatting defence: which claims the server refuses beyond
/// what the policy refuses. Applies to every agent's claim (not the
/// operator's), tracked or, with tracking off and under `none`, relayed as
/// a plain message (herdsim's clients skip a message they see claimed
/// under every policy). It comes after the policy's checks of the claim's
/// fields, membership and channel. A refused claim gets
/// an `ERROR` (`not_relayed` or `bad_started_at`; `INVALID_MSG` under
/// `agentchat-0.36`), changes no state and counts in
/// [`Stats::claims_refused`].
///
/// The server remembers the channel messages it relayed (the channel, the
/// id, the sender and the server time of the relay; a message relayed
/// again by its sender under the same id counts from its last relay) for
/// [`RELAY_MEMORY_MS`], each sender's last [`RELAY_MEMORY_PER_SENDER`] at
/// most, [`RELAY_MEMORY_MAX`] in all (when full, the sender with the most
/// remembered forgets first: see [`crate::relay_memory`]). An honest
/// agent learns of a message only from the server, so its claim never comes
/// before the relay.
///
/// A claim names (channel, id), not the message's sender, so while the
/// guard is on an id stands for one sender's message. A channel MSG whose
/// id has the form of the server's own (`s1`, `s2`, ...) is refused
/// (`id_taken`; `INVALID_MSG` under `agentchat-0.36`). A channel MSG whose
/// id the server remembers as the message of another sender still
/// connected (it has not disconnected since) in that channel is relayed
/// under the server's next id instead, and echoed to its sender (the one
/// MSG a sender is sent back, so it learns the id its message goes by):
/// a client that posts under the id another will use next, and claims it
/// in advance, holds a floor nobody else asks for, and cannot block the
/// other's message either. A MSG relayed under an id the guard does not
/// remember (a new message) drops any claim left on that id from an older
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimGuard {
    /// No check: every policy as it is written.
    Off,
    /// A claim for a message the server has not relayed in that channel
    /// (within the memory above) is refused. The default but under
    /// `agentchat-0.36` ([`ClaimGuard::default_for`]).
    Relayed,
    /// As [`ClaimGuard::Relayed`], and a claim whose `started_at` is more
    /// than `skew_ms` earlier than the claimed message's relay, read on the
    /// clients' wall clock (`epoch_ms` + server time in ms), is refused.
    Clock {
        /// Clock skew tolerated, ms.
        skew_ms: u64,
        /// The clients' wall-clock time (Unix ms) at server time 0.
        epoch_ms: i64,
    },
}

/// The default clock-skew tolerance of [`ClaimGuard::Clock`], ms (the
/// scenario key `server.claim_skew_ms`, `serve --claim-skew-ms`).
pub const DEFAULT_CLAIM_SKEW_MS: u64 = 1000;

pub use crate::relay_memory::{RELAY_MEMORY_MAX, RELAY_MEMORY_MS, RELAY_MEMORY_PER_SENDER};

impl ClaimGuard {
    /// The guard a [`Config`] gets unless told otherwise, in the library
    /// and in `herdsim serve` alike: [`ClaimGuard::Relayed`] (an honest
    /// agent never trips it, since it learns of a message only from the
    /// server; a squatter's claims for messages not yet sent are refused),
    /// except [`ClaimGuard::Off`] under `agentchat-0.36`, a faithful model
    /// of a real server that has no such check. The simulator's scenarios
    /// keep `server.claim_guard = "off"` unless they say otherwise: their
    /// agents are honest or are the squatters being measured.
    pub fn default_for(policy: PolicyKind) -> ClaimGuard {
        match policy {
            PolicyKind::Agentchat036 => ClaimGuard::Off,
            _ => ClaimGuard::Relayed,
        }
    }

    /// The name used by the scenario key and the flags: `off`, `relayed`,
    /// `clock`.
    pub fn name(self) -> &'static str {
        match self {
            ClaimGuard::Off => "off",
            ClaimGuard::Relayed => "relayed",
            ClaimGuard::Clock { .. } => "clock",
        }
    }
}

/// Whether `id` has the form of the ids the server gives MSGs sent
/// without one: `s` and decimal digits.
fn is_server_form(id: &str) -> bool {
    id.strip_prefix('s')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// A TTL that never expires (what `agentchat-0.36` does with a TTL
/// variable that is not a number).
pub const NEVER: u64 = u64::MAX;

impl Default for Config {
    /// Policy `spec`, TTL 45000 ms, tracking on, the claim guard
    /// [`ClaimGuard::Relayed`], rate limit 1000 ms (the operator exempt), a
    /// sweep every 5000 ms from phase 0, no drift: [`Config::for_policy`]
    /// of `spec`.
    fn default() -> Self {
        Config::for_policy(PolicyKind::Spec)
    }
}

impl Config {
    /// The defaults for `policy`: as [`Config::default`], with the policy's
    /// own claim guard ([`ClaimGuard::default_for`]).
    pub fn for_policy(policy: PolicyKind) -> Config {
        Config {
            policy,
            ttl_ms: DEFAULT_TTL_MS,
            enabled: true,
            rate_limit_ms: AGENTCHAT_RATE_LIMIT_MS,
            sweep_phase_ms: 0,
            sweep_drift_us: 0,
            sweep_every_ms: AGENTCHAT_SWEEP_MS,
            rate_limit_operator: false,
            claim_guard: ClaimGuard::default_for(policy),
            frame_limit: false,
        }
    }
}

/// `agentchat-0.36`'s reading of its TTL variable: JavaScript's
/// `parseInt(value || '45000', 10)` (`CLAIM_TTL_MS`, `lib/floor-control.ts`):
/// leading whitespace and a sign, then the leading digits; anything after
/// them is ignored (`"30s"` is 30, `"1e3"` is 1). A negative number counts
/// as 0 (a claim is expired as soon as it is granted, and removed at the
/// next sweep); no digits at all (`"soon"`) gives NaN on the server, whose
/// claims then never expire: [`NEVER`]. An empty value is the default.
pub fn agentchat_ttl(raw: &str) -> u64 {
    let t = raw.trim_start();
    if t.is_empty() {
        return DEFAULT_TTL_MS;
    }
    let (neg, rest) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let digits: &str = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return NEVER;
    }
    if neg {
        return 0;
    }
    // Beyond u64: far beyond any run (and beyond JavaScript's exact integers).
    digits.parse::<u64>().unwrap_or(NEVER - 1)
}

impl Config {
    /// The configuration of `policy` from variables read through `get`:
    /// the TTL from `AGENTCHAT_RESPOND_TTL_MS`, a positive integer of ms,
    /// default 45000 (`agentchat-0.36` reads `AGENTCHAT_CLAIM_TTL_MS`
    /// instead, leniently as the real server does: see [`agentchat_ttl`];
    /// no value is an error there); `AGENTCHAT_RESPOND_ENABLED`: `true`/`false` (also `1`/`0`,
    /// `yes`/`no`, `on`/`off`, any case), default true. Surrounding
    /// whitespace is ignored and an empty value counts as unset. Any other
    /// value is an error naming the variable and the value.
    pub fn from_vars(
        policy: PolicyKind,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let ttl_var = policy.rules().ttl_var;
        let mut cfg = Config::for_policy(policy);
        if let Some(raw) = get(ttl_var)
            && policy == PolicyKind::Agentchat036
        {
            cfg.ttl_ms = agentchat_ttl(&raw);
        } else if let Some(raw) = get(ttl_var) {
            let v = raw.trim();
            if !v.is_empty() {
                cfg.ttl_ms = match v.parse::<u64>() {
                    Ok(t) if t > 0 => t,
                    _ => {
                        return Err(ConfigError::BadTtl {
                            var: ttl_var,
                            value: clip(&raw),
                        });
                    }
                };
            }
        }
        if let Some(raw) = get(ENABLED_VAR) {
            let v = raw.trim();
            if !v.is_empty() {
                cfg.enabled = match v.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "on" => true,
                    "false" | "0" | "no" | "off" => false,
                    _ => {
                        return Err(ConfigError::BadEnabled {
                            var: ENABLED_VAR,
                            value: clip(&raw),
                        });
                    }
                };
            }
        }
        Ok(cfg)
    }

    /// [`Config::from_vars`] on the process environment (the only place
    /// this module reads it, and only when called). A value that is not
    /// valid Unicode is an error.
    pub fn from_env(policy: PolicyKind) -> Result<Config, ConfigError> {
        Config::from_vars(policy, |k| match std::env::var(k) {
            Ok(v) => Some(v),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(s)) => Some(s.to_string_lossy().into_owned()),
        })
    }
}

/// A [`Config`] the server refuses: which setting, and why (the text
/// names the variable and the value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The TTL variable is not a positive integer number of ms.
    #[error("{var}=`{value}` is invalid: expected a positive integer number of milliseconds")]
    BadTtl {
        /// The variable (`AGENTCHAT_RESPOND_TTL_MS`).
        var: &'static str,
        /// Its value (clipped).
        value: String,
    },
    /// The enabled variable is not true or false.
    #[error("{var}=`{value}` is invalid: expected true or false")]
    BadEnabled {
        /// The variable (`AGENTCHAT_RESPOND_ENABLED`).
        var: &'static str,
        /// Its value (clipped).
        value: String,
    },
}

/// One send in owned form: what the tests compare.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outgoing<N: Naming = Text> {
    /// The recipient.
    pub to: N::Agent,
    /// The message.
    pub msg: ServerMsg<N>,
}

#[cfg(test)]
impl<N: Naming> Server<N> {
    /// Tests: [`Server::handle`], appending the sends to `out` owned.
    pub(crate) fn run_owned(&mut self, now_ms: u64, input: Input<N>, out: &mut Vec<Outgoing<N>>) {
        let mut sends = Sends::new();
        self.handle(Millis(now_ms), input, &mut sends);
        out.extend(sends.iter().map(|(to, msg)| Outgoing {
            to: to.clone(),
            msg: msg.clone(),
        }));
    }
}

#[cfg(test)]
impl Server<Text> {
    /// Tests: a raw frame through the edge ([`crate::edge::decode_bytes`]).
    pub(crate) fn run_frame(
        &mut self,
        now_ms: u64,
        from: &str,
        role: Role,
        bytes: &[u8],
        out: &mut Vec<Outgoing>,
    ) {
        self.run_owned(now_ms, crate::edge::decode_bytes(from, role, bytes), out);
    }

    /// Tests: a JSON frame through the edge ([`crate::edge::decode`]).
    pub(crate) fn run_value(
        &mut self,
        now_ms: u64,
        from: &str,
        role: Role,
        value: &serde_json::Value,
        out: &mut Vec<Outgoing>,
    ) {
        self.run_owned(now_ms, crate::edge::decode(from, role, value), out);
    }
}

/// What [`Server::handle`] sends, the server's one way out: each payload
/// once, and each send as its recipient and the index of its payload. A
/// relay to N members is one payload and N pairs, with no copy and no
/// reference count per recipient: a server encodes each payload once and
/// writes the bytes to N sockets; the simulator routes sends by number.
/// [`Sends::iter`] walks the sends in order as (recipient, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sends<N: Naming = Text> {
    payloads: Vec<Arc<ServerMsg<N>>>,
    sends: Vec<(N::Agent, u32)>,
}

impl<N: Naming> Default for Sends<N> {
    fn default() -> Self {
        Sends {
            payloads: Vec::new(),
            sends: Vec::new(),
        }
    }
}

impl<N: Naming> Sends<N> {
    /// No sends (each call of the server appends to what is there).
    pub fn new() -> Self {
        Self::default()
    }

    /// Forget every send, keeping the room.
    pub fn clear(&mut self) {
        self.payloads.clear();
        self.sends.clear();
    }

    /// The number of sends.
    pub fn len(&self) -> usize {
        self.sends.len()
    }

    /// Whether there are no sends.
    pub fn is_empty(&self) -> bool {
        self.sends.is_empty()
    }

    /// The payloads, in the order first sent.
    pub fn payloads(&self) -> &[Arc<ServerMsg<N>>] {
        &self.payloads
    }

    /// The sends, in order: each recipient with the index of its payload
    /// in [`payloads`](Self::payloads).
    pub fn sends(&self) -> &[(N::Agent, u32)] {
        &self.sends
    }

    /// The sends in order, each as its recipient and its message.
    pub fn iter(&self) -> impl Iterator<Item = (&N::Agent, &ServerMsg<N>)> {
        self.sends
            .iter()
            .filter_map(|(to, i)| Some((to, &**self.payloads.get(*i as usize)?)))
    }

    /// Add payload `msg`; its index. (A caller that never clears would
    /// need 2^32 payloads, hundreds of GB, before it wrapped.)
    fn add_payload(&mut self, msg: ServerMsg<N>) -> u32 {
        let i = self.payloads.len() as u32;
        self.payloads.push(Arc::new(msg));
        i
    }

    /// Send `msg` to `to`.
    fn push(&mut self, to: N::Agent, msg: ServerMsg<N>) {
        let i = self.add_payload(msg);
        self.sends.push((to, i));
    }

    /// Send `msg` to every member of `parts`, in order.
    fn fan_out(&mut self, parts: [&[N::Agent]; 2], msg: ServerMsg<N>) {
        let i = self.add_payload(msg);
        self.sends.reserve(parts[0].len() + parts[1].len());
        for part in parts {
            self.sends.extend(part.iter().map(|m| (m.clone(), i)));
        }
    }
}

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

#[derive(Debug, Clone)]
struct Claim<A> {
    holder: A,
    started_at: Stamp,
    /// Ordering value: `started_at`, or the receive time under `server-time`.
    order: Stamp,
    granted_at: u64,
    deadline: u64,
    /// Key in the deadline index, with `deadline`.
    seq: u64,
    answered: bool,
}

/// A RESPONDING_TO as received: who sent it and its fields.
struct ClaimReq<N: Naming> {
    from: N::Agent,
    role: Role,
    msg_id: N::Msg,
    started_at: Stamp,
    channel: N::Dest,
}

impl<N: Naming> ClaimReq<N> {
    /// The claim as relayed to the channel.
    fn relayed(self) -> ServerMsg<N> {
        ServerMsg::RespondingTo {
            msg_id: self.msg_id,
            from: self.from,
            started_at: self.started_at,
            channel: self.channel,
        }
    }
}

/// The policy's verdict on a claim, with what a denial's YIELD names: the
/// current claim's `started_at` and (for a denial only) its holder.
struct Decision<A> {
    verdict: Verdict<A>,
    held_started_at: Stamp,
    held_by: Option<A>,
}

/// A MSG as received: who sent it and its fields.
struct MsgReq<N: Naming> {
    from: N::Agent,
    role: Role,
    id: Option<N::Msg>,
    to: N::Dest,
    content: N::Content,
    in_reply_to: Option<N::Msg>,
}

/// The members of one channel: a set kept as a sorted list, so a relay
/// walks contiguous memory and skips its sender by position. Ids join
/// mostly in order (the simulator's are numbered), so an insert is
/// usually a push.
///
/// `hint` is where the last lookup found its agent: one input looks up its
/// sender up to three times (the membership check, the claim's holder, the
/// relay), and the hint makes the second and third one comparison. It is
/// checked before use, so a stale hint costs a search, never a wrong answer.
#[derive(Debug)]
struct Members<A>(Vec<A>, AtomicUsize);

impl<A> Default for Members<A> {
    fn default() -> Self {
        Members(Vec::new(), AtomicUsize::new(0))
    }
}

impl<A: Clone> Clone for Members<A> {
    fn clone(&self) -> Self {
        Members(self.0.clone(), AtomicUsize::new(self.1.load(Relaxed)))
    }
}

impl<A: Ord> Members<A> {
    /// `Ok(position)` of `agent`, or `Err(where it would go)`.
    fn find<Q: Ord + ?Sized>(&self, agent: &Q) -> Result<usize, usize>
    where
        A: Borrow<Q>,
    {
        let hint = self.1.load(Relaxed);
        if self.0.get(hint).is_some_and(|m| m.borrow() == agent) {
            return Ok(hint);
        }
        let found = self.0.binary_search_by(|m| m.borrow().cmp(agent));
        if let Ok(i) = found {
            self.1.store(i, Relaxed);
        }
        found
    }

    fn insert(&mut self, agent: A) {
        if let Err(i) = self.find(&agent) {
            self.0.insert(i, agent);
        }
    }

    fn remove(&mut self, agent: &A) {
        if let Ok(i) = self.find(agent) {
            self.0.remove(i);
        }
    }
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
    /// [`crate::naming`]).
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

    /// What the claim guard ([`Config::claim_guard`]) would answer, at
    /// server time `now`, to a claim by `from` (in `role`) on
    /// `(channel, msg_id)` dated `started_at`: `None` when it lets the
    /// claim through (to the policy's own checks), else the typed refusal
    /// ([`Server::render`] words it as this server's ERROR). Changes
    /// nothing: a server that wants to refuse such a claim before it
    /// reaches the floor (and its log) asks this first;
    /// [`Server::handle`] applies the same check.
    pub fn claim_guard_refusal<D, M>(
        &self,
        now: Millis,
        role: Role,
        channel: &D,
        msg_id: &M,
        started_at: Stamp,
    ) -> Option<Refusal>
    where
        D: ToOwned<Owned = N::Dest> + ?Sized,
        M: ToOwned<Owned = N::Msg> + ?Sized,
    {
        let key = (channel.to_owned(), msg_id.to_owned());
        self.guard_refusal(now.0, role, &key, started_at)
    }

    /// What the claim guard ([`Config::claim_guard`]) would answer to a
    /// channel MSG from `from` to `channel`
    /// with the client's `id`: `None` when the guard lets it through (to
    /// the policy's own checks), else the typed refusal
    /// ([`Refusal::ServerFormId`]: an id of the server's form, `s1`, `s2`,
    /// ...; [`Server::render`] words it: `id_taken`, or `INVALID_MSG` under
    /// `agentchat-0.36`). An id remembered as another
    /// sender's message is not refused: [`Server::handle`] relays that MSG
    /// under the server's next id (and echoes it to its sender), so no
    /// client can block another's message by posting under its id first.
    /// Changes nothing; [`Server::handle`] applies the same check.
    pub fn msg_guard_refusal<A, D, M>(&self, from: &A, channel: &D, id: &M) -> Option<Refusal>
    where
        A: ToOwned<Owned = N::Agent> + ?Sized,
        D: ToOwned<Owned = N::Dest> + ?Sized,
        M: ToOwned<Owned = N::Msg> + ?Sized,
    {
        let channel = channel.to_owned();
        if !is_channel(&self.names, &channel) {
            return None;
        }
        self.id_refusal(&from.to_owned(), &channel, &id.to_owned())
    }

    /// [`Server::claim_guard_refusal`] for the claim on `key`.
    fn guard_refusal(
        &self,
        now_ms: u64,
        role: Role,
        key: &Key<N>,
        started_at: Stamp,
    ) -> Option<Refusal> {
        if self.cfg.claim_guard == ClaimGuard::Off || role == Role::Operator {
            return None;
        }
        let now = now_ms.max(self.now);
        let relayed_at = self.relays.get(now, key).map(|(_, at)| at);
        let (channel, msg_id) = key;
        let Some(at) = relayed_at else {
            return Some(Refusal::NotRelayed {
                msg_id: clip(&self.names.show_msg(msg_id)),
                channel: clip(&self.names.show_dest(channel)),
            });
        };
        if let ClaimGuard::Clock { skew_ms, epoch_ms } = self.cfg.claim_guard {
            // The relay on the clients' wall clock, less the tolerance.
            let floor = i128::from(epoch_ms) + i128::from(at) - i128::from(skew_ms);
            let early = match started_at {
                Stamp::Int(i) => i128::from(i) < floor,
                Stamp::Float(f) => f < floor as f64,
            };
            if early {
                return Some(Refusal::EarlyClaim {
                    started_at,
                    skew_ms,
                    msg_id: clip(&self.names.show_msg(msg_id)),
                    relayed_at: i128::from(epoch_ms) + i128::from(at),
                });
            }
        }
        None
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

    /// YIELD to `to` for `(channel, msg_id)` (counted; the caller sends it).
    fn make_yield(
        &mut self,
        to: N::Agent,
        (channel, msg_id): (&N::Dest, &N::Msg),
        winner: &N::Agent,
        holder_started_at: Stamp,
        reason: &str,
    ) -> (N::Agent, ServerMsg<N>) {
        let detail = match self.rules.yield_form {
            YieldForm::Winner => None,
            YieldForm::HolderDetail => Some(YieldDetail {
                holder_started_at,
                reason: reason.to_string(),
            }),
        };
        self.stats.yields += 1;
        (
            to,
            ServerMsg::Yield {
                msg_id: msg_id.clone(),
                winner: winner.clone(),
                channel: channel.clone(),
                detail,
            },
        )
    }

    /// `agentchat-0.36`: a valid channel name (`isValidChannel`,
    /// `lib/protocol.ts`): `#` and 1 to 31 of `[A-Za-z0-9_-]`.
    fn agentchat_channel_ok(&self, channel: &N::Dest) -> bool {
        is_channel(&self.names, channel) && self.names.name_len(channel) <= AGENTCHAT_CHANNEL_MAX
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

    /// [`Config::frame_limit`]: count a frame of `agent` at `now`; `true`
    /// when it passes agentchat's flood limit.
    fn flooded(&mut self, now: u64, agent: &N::Agent) -> bool {
        let limit = if self.unidentified.contains(agent) {
            AGENTCHAT_FRAMES_UNIDENTIFIED
        } else {
            AGENTCHAT_FRAMES_IDENTIFIED
        };
        match self.frames.get_mut(agent) {
            Some(w) => w.over(now, limit),
            None => {
                let mut w = FrameWindow::default();
                let over = w.over(now, limit);
                self.frames.insert(agent.clone(), w);
                over
            }
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

    /// RESPONDING_TO: validate the claim, look up the current one, let the
    /// policy decide, then record the verdict and send what it says.
    fn on_claim(&mut self, now: u64, mut claim: ClaimReq<N>, out: &mut Sends<N>) {
        self.stats.claims_received += 1;
        if !self.claim_well_formed(&claim, out) || !self.claim_admitted(&claim, out) {
            return;
        }
        if self.cfg.claim_guard != ClaimGuard::Off {
            let key = (claim.channel.clone(), claim.msg_id.clone());
            if let Some(refusal) = self.guard_refusal(now, claim.role, &key, claim.started_at) {
                self.stats.claims_refused += 1;
                return self.error(&claim.from, refusal, out);
            }
        }
        if self.rules.order == ClaimOrder::StartedAtDouble {
            // JavaScript holds the parsed double: it compares it, stores it
            // and echoes it (2^53 + 1 comes back as 2^53).
            claim.started_at = Stamp::from_f64(claim.started_at.as_f64());
        }
        if claim.role == Role::Operator && self.tracking() && self.rules.operator_takes_floor {
            return self.operator_claim(now, claim, out);
        }
        if !self.tracking() || claim.role == Role::Operator {
            return self.relay_untracked_claim(claim, out);
        }
        let order = self.claim_order(now, claim.started_at);
        let decision = self.judge_claim(&claim, order);
        self.apply_claim_verdict(now, claim, order, decision, out);
    }

    /// Check a claim's fields (`msg_id`, `channel`, `started_at`); `false`
    /// when it goes no further (an ERROR sent, or a DM claim dropped).
    fn claim_well_formed(&mut self, claim: &ClaimReq<N>, out: &mut Sends<N>) -> bool {
        let from = &claim.from;
        if self.names.msg_is_empty(&claim.msg_id) {
            if self.rules.errors == ErrorStyle::Agentchat {
                self.error(from, Refusal::InvalidClaimField("msg_id"), out);
            } else {
                let error = DecodeError::Empty("msg_id");
                let claim = false; // worded as any undecodable frame
                self.error(from, Refusal::Undecodable { error, claim }, out);
            }
            return false;
        }
        if !self.claim_channel_ok(claim, out) {
            return false;
        }
        if let Err((code, reason)) = self.rules.started_at.check(claim.started_at) {
            self.error(from, Refusal::BadStartedAt { code, reason }, out);
            return false;
        }
        true
    }

    /// Check a claim's `channel` field as the policy's channel model says;
    /// `false` when it goes no further (an ERROR sent, or a DM claim, to
    /// which the protocol does not apply, dropped without a word).
    fn claim_channel_ok(&mut self, claim: &ClaimReq<N>, out: &mut Sends<N>) -> bool {
        let (from, channel) = (&claim.from, &claim.channel);
        if self.rules.channels == Channels::Registry {
            // `validateClientMessage` (`lib/protocol.ts`): `isValidChannel`,
            // so a DM target or a long name is an error there.
            if !self.agentchat_channel_ok(channel) {
                self.error(from, Refusal::InvalidClaimField("channel"), out);
                return false;
            }
            return true;
        }
        match self.names.place(channel) {
            Place::Invalid => {
                let error = DecodeError::BadChannel {
                    field: "channel",
                    value: clip(&self.names.show_dest(channel)),
                    dm_allowed: true,
                };
                let claim = false; // worded as any undecodable frame
                self.error(from, Refusal::Undecodable { error, claim }, out);
                false
            }
            // The protocol does not apply to DMs: no claim, nothing sent.
            Place::Dm(_) => false,
            Place::Channel => true,
        }
    }

    /// Check that the sender may claim in the channel and that the channel
    /// exists; `false` when the claim goes no further (an ERROR sent, or
    /// the claim dropped silently as agentchat does).
    fn claim_admitted(&mut self, claim: &ClaimReq<N>, out: &mut Sends<N>) -> bool {
        let (from, channel) = (&claim.from, &claim.channel);
        if self.rules.msg_gate == MsgGate::Agentchat
            && claim.role == Role::Agent
            && self.unidentified.contains(from)
        {
            // `if (!rtAgent || ...) break;` (`lib/server.ts`): dropped silently.
            return false;
        }
        if self.rules.membership_required && !self.is_member(from, channel) {
            let channel = self.names.show_dest(channel).to_string();
            self.error(from, Refusal::NotMember { channel }, out);
            return false;
        }
        // `if (!channel) break;` (`lib/server.ts`): dropped silently.
        self.channel_exists(channel)
    }

    /// A claim that is not arbitrated (tracking off, or the operator's):
    /// relayed when tracking is off or the policy relays every claim.
    fn relay_untracked_claim(&mut self, claim: ClaimReq<N>, out: &mut Sends<N>) {
        if !self.tracking() || self.rules.announce == Announce::RelayEvery {
            self.fan_out(claim.relayed(), out);
        }
    }

    /// An operator's claim under [`Rules::operator_takes_floor`]: humans
    /// always get the floor, so it is granted whatever its `started_at`
    /// (ordered before every agent's claim), displacing a live holder (who
    /// gets a YIELD naming the operator) or an answered marker, and
    /// announced as any grant. Agents' later claims are denied until the
    /// operator answers, leaves or the claim expires.
    fn operator_claim(&mut self, now: u64, claim: ClaimReq<N>, out: &mut Sends<N>) {
        let key = (claim.channel.clone(), claim.msg_id.clone());
        let held = self
            .claims
            .get(&key)
            .map(|c| (c.answered, c.holder == claim.from));
        let verdict = match held {
            None => Verdict::Grant,
            Some((true, _)) => {
                // An answered marker: gone, nobody to yield.
                self.remove_claim(&key);
                Verdict::Grant
            }
            // A repeat: the floor is the operator's already.
            Some((false, true)) => Verdict::Repeat,
            Some((false, false)) => Verdict::Displace,
        };
        let decision = Decision {
            verdict,
            held_started_at: Stamp::Int(0),
            held_by: None,
        };
        let first = Stamp::Float(f64::NEG_INFINITY);
        self.apply_claim_verdict(now, claim, first, decision, out);
    }

    /// The value a claim is ordered by under the policy: its `started_at`,
    /// or the server's receive time.
    fn claim_order(&self, now: u64, started_at: Stamp) -> Stamp {
        match self.rules.order {
            ClaimOrder::StartedAt | ClaimOrder::StartedAtDouble => started_at,
            ClaimOrder::ServerTime => Stamp::Int(i64::try_from(now).unwrap_or(i64::MAX)),
        }
    }

    /// Look up the current claim on `(channel, msg_id)` and ask the policy
    /// for its verdict on this one.
    fn judge_claim(&self, claim: &ClaimReq<N>, order: Stamp) -> Decision<N::Agent> {
        let key = (claim.channel.clone(), claim.msg_id.clone());
        let current = self.claims.get(&key);
        let slot = match current {
            None => Slot::Free,
            Some(c) if c.answered => Slot::Answered { by: &c.holder },
            Some(c) => Slot::Held {
                holder: &c.holder,
                order: c.order,
            },
        };
        let verdict = self.cfg.policy.judge(slot, &claim.from, order);
        // The holder's name is needed (after `self` changes) only for a
        // denial's YIELD.
        let deny = matches!(verdict, Verdict::Deny | Verdict::DenySelf);
        let (held_started_at, held_by) = current.map_or((Stamp::Int(0), None), |c| {
            (c.started_at, deny.then(|| c.holder.clone()))
        });
        Decision {
            verdict,
            held_started_at,
            held_by,
        }
    }

    /// Record the policy's verdict in the claim table and send the
    /// announcement and YIELDs it calls for.
    fn apply_claim_verdict(
        &mut self,
        now: u64,
        claim: ClaimReq<N>,
        order: Stamp,
        decision: Decision<N::Agent>,
        out: &mut Sends<N>,
    ) {
        let ClaimReq {
            from,
            msg_id,
            started_at,
            channel,
            ..
        } = &claim;
        let (started_at, key) = (*started_at, (channel, msg_id));
        let held_started_at = decision.held_started_at;
        // A YIELD is built before the announcement (which takes the
        // claim's fields) and sent after it.
        match decision.verdict {
            Verdict::Repeat => {}
            Verdict::Grant => {
                self.insert_claim(channel, msg_id, from, started_at, order, now);
                self.announce_grant(claim, out);
            }
            Verdict::Displace | Verdict::RegrantSelf => {
                let owned = (channel.clone(), msg_id.clone());
                let displaced = self.remove_claim(&owned).map(|c| c.holder);
                self.insert_claim(channel, msg_id, from, started_at, order, now);
                if matches!(decision.verdict, Verdict::Displace) {
                    self.stats.overruled += 1;
                }
                let y = displaced
                    .map(|old| self.make_yield(old, key, from, started_at, REASON_DISPLACED));
                self.announce_grant(claim, out);
                if let Some((to, y)) = y {
                    out.push(to, y);
                }
            }
            Verdict::Deny | Verdict::DenySelf => {
                // A denial always comes with the current holder.
                let by = decision.held_by.as_ref().unwrap_or(from);
                let y = self.make_yield(from.clone(), key, by, held_started_at, REASON_DENIED);
                self.announce_denial(claim, out);
                out.push(y.0, y.1);
            }
            Verdict::DenyAnswered { answered_by } => {
                let to = from.clone();
                let y = self.make_yield(to, key, &answered_by, held_started_at, REASON_DENIED);
                self.announce_denial(claim, out);
                out.push(y.0, y.1);
            }
        }
    }

    /// Announce a granted claim to the channel as the policy says: the
    /// claim relayed, or a FLOOR_CLAIMED.
    fn announce_grant(&mut self, claim: ClaimReq<N>, out: &mut Sends<N>) {
        let msg = match self.rules.announce {
            Announce::RelayEvery => claim.relayed(),
            Announce::FloorClaimedOnGrant => ServerMsg::FloorClaimed {
                msg_id: claim.msg_id,
                channel: claim.channel,
                holder: claim.from,
                started_at: claim.started_at,
            },
        };
        self.fan_out(msg, out);
    }

    /// Announce a denied claim: relayed only when the policy relays every
    /// claim.
    fn announce_denial(&mut self, claim: ClaimReq<N>, out: &mut Sends<N>) {
        if self.rules.announce == Announce::RelayEvery {
            self.fan_out(claim.relayed(), out);
        }
    }

    /// MSG: validate the target and the sender, relay the message (to the
    /// channel or the DM peer), then release the sender's claims.
    fn on_msg(&mut self, now: u64, msg: MsgReq<N>, out: &mut Sends<N>) {
        let Some(dest) = self.msg_dest(&msg.from, &msg.to, out) else {
            return;
        };
        if !self.msg_admitted(now, &msg, &dest, out) {
            return;
        }
        if matches!(dest, Place::Channel)
            && let Some(id) = &msg.id
            && let Some(refusal) = self.id_refusal(&msg.from, &msg.to, id)
        {
            return self.refuse(&msg.from, refusal, out);
        }
        // Another sender's id: this message is relayed under the server's
        // next id instead, and echoed to its sender so it learns it.
        let renamed = matches!(dest, Place::Channel)
            && msg
                .id
                .as_ref()
                .is_some_and(|id| self.id_taken(now, &msg.from, &msg.to, id));
        let MsgReq {
            from,
            mut id,
            to,
            content,
            in_reply_to,
            ..
        } = msg;
        if renamed {
            id = None;
            self.stats.ids_renamed += 1;
        }
        let dm = matches!(dest, Place::Dm(_));
        // The release sends nothing and the relay reads only the
        // membership, so releasing first lets the relay take the fields.
        if !dm && self.tracking() {
            self.release_on_msg(&from, &to, in_reply_to.as_ref());
        }
        let id = self.msg_id_or_assign(id);
        if !dm && self.cfg.claim_guard != ClaimGuard::Off {
            self.remember_relay(now, &from, &to, &id);
        }
        let relayed = ServerMsg::Msg {
            id,
            from,
            to,
            content,
            in_reply_to,
        };
        if let Place::Dm(peer) = dest {
            self.stats.relayed += 1;
            out.push(peer, relayed);
            return;
        }
        if renamed {
            self.stats.relayed += 1;
            let echo = relayed.clone();
            let ServerMsg::Msg { from, .. } = &echo else {
                unreachable!("built as a Msg above")
            };
            out.push(from.clone(), echo);
        }
        self.fan_out(relayed, out);
    }

    /// Decode a MSG's `to`: a channel or a DM peer; `None` (the MSG refused
    /// with an ERROR) when it is neither.
    fn msg_dest(
        &mut self,
        from: &N::Agent,
        to: &N::Dest,
        out: &mut Sends<N>,
    ) -> Option<Place<N::Agent>> {
        let place = self.names.place(to);
        if place == Place::Invalid {
            let error = DecodeError::BadChannel {
                field: "to",
                value: clip(&self.names.show_dest(to)),
                dm_allowed: true,
            };
            let claim = false;
            self.refuse(from, Refusal::Undecodable { error, claim }, out);
            return None;
        }
        Some(place)
    }

    /// Check that the sender may send this MSG under the policy's gate;
    /// `false` when it is refused (an ERROR sent).
    fn msg_admitted(
        &mut self,
        now: u64,
        msg: &MsgReq<N>,
        dest: &Place<N::Agent>,
        out: &mut Sends<N>,
    ) -> bool {
        let (from, to) = (&msg.from, &msg.to);
        if self.rules.msg_gate == MsgGate::Agentchat {
            // `handleMsg` (`lib/server/handlers/message.ts`), in its order.
            let ok = match msg.role {
                Role::Agent => self.agentchat_sender_ok(now, from, out),
                Role::Operator if self.cfg.rate_limit_operator => {
                    self.agentchat_rate_ok(now, from, out)
                }
                Role::Operator => true,
            };
            if !ok {
                return false;
            }
            return self.agentchat_msg_target_ok(from, to, dest, out);
        }
        if matches!(dest, Place::Channel) && !self.is_member(from, to) {
            let channel = self.names.show_dest(to).to_string();
            self.refuse(from, Refusal::NotMember { channel }, out);
            return false;
        }
        true
    }

    /// `agentchat-0.36`: an agent may send once identified, out of its lurk
    /// window and within the rate limit; `false` when refused. A MSG that
    /// passes counts for the rate limit even if refused later.
    fn agentchat_sender_ok(&mut self, now: u64, from: &N::Agent, out: &mut Sends<N>) -> bool {
        if self.unidentified.contains(from) {
            self.refuse(from, Refusal::AuthRequired, out);
            return false;
        }
        if self.lurking.contains(from) {
            self.refuse(from, Refusal::LurkMode, out);
            return false;
        }
        self.agentchat_rate_ok(now, from, out)
    }

    /// `agentchat-0.36`: the MSG rate limit (one MSG per `rate_limit_ms` per
    /// sender); `false` when refused. A MSG that passes counts for the
    /// limit even if refused later.
    fn agentchat_rate_ok(&mut self, now: u64, from: &N::Agent, out: &mut Sends<N>) -> bool {
        // A limit of 0 refuses nothing (no difference is below 0).
        if let Some(&last) = self.last_msg.get(from)
            && now - last < self.cfg.rate_limit_ms
        {
            self.stats.rate_limited += 1;
            self.refuse(from, Refusal::RateLimited, out);
            return false;
        }
        // Set before the channel checks: a MSG refused below still counts
        // for the limit.
        match self.last_msg.get_mut(from) {
            Some(last) => *last = now,
            None => {
                self.last_msg.insert(from.clone(), now);
            }
        }
        true
    }

    /// `agentchat-0.36`: no DMs; the channel must exist and the sender be a
    /// member; `false` when refused.
    fn agentchat_msg_target_ok(
        &mut self,
        from: &N::Agent,
        to: &N::Dest,
        dest: &Place<N::Agent>,
        out: &mut Sends<N>,
    ) -> bool {
        if matches!(dest, Place::Dm(_)) {
            // Observed on the real server (the differential test); the
            // snapshot of `handleMsg` read for this still relays DMs.
            self.refuse(from, Refusal::DirectMessage, out);
            return false;
        }
        if !self.channels.contains(to) {
            let channel = self.names.show_dest(to).to_string();
            self.refuse(from, Refusal::ChannelNotFound { channel }, out);
            return false;
        }
        if !self.is_member(from, to) {
            let channel = self.names.show_dest(to).to_string();
            self.refuse(from, Refusal::NotMember { channel }, out);
            return false;
        }
        true
    }

    /// The MSG's own id, or a fresh server id (`s1`, `s2`, ...) when it has
    /// none.
    fn msg_id_or_assign(&mut self, id: Option<N::Msg>) -> N::Msg {
        match id.filter(|i| !self.names.msg_is_empty(i)) {
            Some(id) => id,
            None => {
                self.next_msg_id += 1;
                self.names.server_msg_id(self.next_msg_id)
            }
        }
    }

    /// A channel MSG from `from` releases its claims in `to` as the policy
    /// says: all of them, or only the one it replies to (kept as an
    /// "answered" marker under `tombstone`).
    fn release_on_msg(&mut self, from: &N::Agent, to: &N::Dest, in_reply_to: Option<&N::Msg>) {
        match (self.rules.release, in_reply_to) {
            (Release::AllInChannel, _) | (Release::Holder, None) => {
                self.release_all_in(from, to);
            }
            (Release::Holder, Some(m)) => {
                let key = (to.clone(), m.clone());
                let held = self
                    .claims
                    .get(&key)
                    .is_some_and(|c| !c.answered && c.holder == *from);
                if held && self.rules.tombstone {
                    self.mark_answered(&key);
                } else if held {
                    self.remove_claim(&key);
                }
            }
        }
    }

    /// Claim guard: remember that `from` relayed `(channel, msg_id)` at
    /// `now` (the memory forgets what its bounds say). A message new under
    /// that id (not remembered as `from`'s) drops any claim or marker left
    /// on the id by an older message.
    fn remember_relay(&mut self, now: u64, from: &N::Agent, channel: &N::Dest, msg_id: &N::Msg) {
        let key = (channel.clone(), msg_id.clone());
        let same = self.relays.get(now, &key).is_some_and(|(a, _)| a == from);
        if !same && self.claims.contains_key(&key) {
            self.remove_claim(&key);
        }
        self.relays.remember(now, from, key);
    }

    /// Claim guard: why a channel MSG from `from` with the client's `id`
    /// is refused, if it is: an id of the server's form.
    fn id_refusal(&self, _from: &N::Agent, _channel: &N::Dest, id: &N::Msg) -> Option<Refusal> {
        if self.cfg.claim_guard == ClaimGuard::Off || self.names.msg_is_empty(id) {
            return None;
        }
        let shown = self.names.show_msg(id);
        is_server_form(&shown).then(|| Refusal::ServerFormId { id: clip(&shown) })
    }

    /// Claim guard: whether the client's `id` for a channel MSG from
    /// `from` is remembered as the message of another sender still on the
    /// connection it posted it from, in `channel` (the MSG is then relayed
    /// under a server id: an id stands for one sender's message).
    fn id_taken(&self, now: u64, from: &N::Agent, channel: &N::Dest, id: &N::Msg) -> bool {
        if self.cfg.claim_guard == ClaimGuard::Off || self.names.msg_is_empty(id) {
            return false;
        }
        let key = (channel.clone(), id.clone());
        self.relays
            .owner(now.max(self.now), &key)
            .is_some_and(|sender| sender != from)
    }

    fn insert_claim(
        &mut self,
        channel: &N::Dest,
        msg_id: &N::Msg,
        holder: &N::Agent,
        started_at: Stamp,
        order: Stamp,
        now: u64,
    ) {
        let deadline = now.saturating_add(self.cfg.ttl_ms);
        let never = self.cfg.ttl_ms == NEVER;
        self.next_seq += 1;
        let seq = self.next_seq;
        let claim = Claim {
            holder: holder.clone(),
            started_at,
            order,
            granted_at: now,
            deadline,
            seq,
            answered: false,
        };
        let key = (channel.clone(), msg_id.clone());
        if !never {
            self.deadlines.insert((deadline, seq), key.clone());
        }
        let held = self.held_by.entry(holder.clone()).or_default();
        if let Err(i) = held.binary_search(&key) {
            held.insert(i, key.clone());
        }
        self.claims.insert(key, claim);
        self.live += 1;
    }

    /// Drop `key` from the live claims `holder` holds.
    fn unhold(&mut self, holder: &N::Agent, key: &Key<N>) {
        if let Some(held) = self.held_by.get_mut(holder)
            && let Ok(i) = held.binary_search(key)
        {
            held.remove(i);
        }
    }

    /// Remove an entry (live claim or marker) and every index of it.
    fn remove_claim(&mut self, key: &Key<N>) -> Option<Claim<N::Agent>> {
        let c = self.claims.remove(key)?;
        // Removed at `now` (by a release, a reply, a displacement or a
        // disconnect; an expiry has already been audited as one): any TTL
        // above its age would have kept it until now, and no longer.
        self.ttl_audit
            .live_at(self.now.saturating_sub(c.granted_at));
        self.deadlines.remove(&(c.deadline, c.seq));
        if c.answered {
            self.markers -= 1;
        } else {
            self.live -= 1;
            self.unhold(&c.holder, key);
        }
        Some(c)
    }

    /// Turn a live claim into a tombstone marker (same deadline).
    fn mark_answered(&mut self, key: &Key<N>) {
        let Some(c) = self.claims.get_mut(key) else {
            return;
        };
        if c.answered {
            return;
        }
        c.answered = true;
        let holder = c.holder.clone();
        self.live -= 1;
        self.markers += 1;
        self.unhold(&holder, key);
    }

    /// Release every live claim of `agent` in `channel` (no markers); the
    /// keys released.
    fn release_all_in(&mut self, agent: &N::Agent, channel: &N::Dest) -> Vec<Key<N>> {
        let Some(held) = self.held_by.get(agent) else {
            return Vec::new();
        };
        let keys: Vec<Key<N>> = held.iter().filter(|(c, _)| c == channel).cloned().collect();
        for key in &keys {
            self.remove_claim(key);
        }
        keys
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
