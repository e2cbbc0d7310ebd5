//! The server side: channel membership, the claim table, relay.
//!
//! Sans-IO: [`Server::handle`] takes one [`Input`] and the current server
//! time in ms, and appends the messages to send, in order, to `out`. It
//! first runs the timers that are due at that time (claim expiry at
//! `now >= deadline`, or the 5 s sweeps of `agentchat-0.36`), so the state
//! is always "as of the last handled time". [`Server::poll_timeout`] tells
//! the caller when the next timer is due.
//!
//! Behaviour common to all policies (documented choices):
//! - Time never goes backwards: a `now_ms` earlier than the last handled
//!   time is treated as the last handled time.
//! - `Join`/`Leave` send nothing. A `Join` to an invalid channel name gets
//!   an `ERROR` (code `bad_channel`).
//! - `Disconnect` is the end of the agent's connection: it leaves every
//!   channel (a reconnecting agent must `Join` again) and all its claims
//!   are released (tombstone markers it left stay: the message *was*
//!   answered).
//! - A channel `MSG` is relayed to every other member (never echoed to the
//!   sender); the sender must be a member (else `ERROR not_member`). A DM
//!   (`to: "@id"`) goes to that agent only, whoever it is, and releases no
//!   claim. A MSG without `id` gets one from the server: `s1`, `s2`, ...
//!   in order of relay.
//! - A `RESPONDING_TO` whose `channel` is a DM target (`@id`) creates no
//!   claim and nothing is sent (the protocol does not apply to DMs); it
//!   still counts in `claims_received`.
//! - The operator ([`Role::Operator`]) never claims: its RESPONDING_TO is
//!   never tracked (so it never gets a YIELD), and is relayed as is to the
//!   other members only under the policies that relay raw claims (or with
//!   tracking off).
//! - With `enabled = false` (and under `none`) nothing is tracked and no
//!   YIELD is ever sent: a RESPONDING_TO is relayed to the other members
//!   like any message (after the usual checks: channel name, `started_at`,
//!   membership as the policy says).
//! - Protocol errors answer the sender with `ERROR {code, message}`;
//!   processing goes on. Codes: `bad_message` (undecodable or invalid
//!   message), `bad_channel`, `bad_started_at`, `not_member`.
//! - `Stats::relayed` counts every send except YIELDs (ERRORs included).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::floor::policy::{
    Announce, ClaimOrder, DEFAULT_TTL_MS, ENABLED_VAR, Expiry, PolicyKind, REASON_DENIED,
    REASON_DISPLACED, Release, Rules, Slot, Verdict, YieldForm,
};
use crate::floor::wire::{
    ClientMsg, DecodeError, ServerMsg, Target, YieldDetail, clip, is_channel_name, parse_target,
};

/// Server configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub policy: PolicyKind,
    /// Claim TTL in milliseconds (default 45000).
    pub ttl_ms: u64,
    /// `false` turns claim tracking off; messages are still relayed.
    pub enabled: bool,
}

impl Default for Config {
    /// Policy `spec`, TTL 45000 ms, tracking on.
    fn default() -> Self {
        Config {
            policy: PolicyKind::Spec,
            ttl_ms: DEFAULT_TTL_MS,
            enabled: true,
        }
    }
}

impl Config {
    /// The configuration of `policy` from variables read through `get`:
    /// the TTL from `AGENTCHAT_RESPOND_TTL_MS` (`agentchat-0.36` reads
    /// `AGENTCHAT_CLAIM_TTL_MS` instead), a positive integer of ms, default
    /// 45000; `AGENTCHAT_RESPOND_ENABLED`: `true`/`false` (also `1`/`0`,
    /// `yes`/`no`, `on`/`off`, any case), default true. Surrounding
    /// whitespace is ignored and an empty value counts as unset. Any other
    /// value is an error naming the variable and the value.
    pub fn from_vars(
        policy: PolicyKind,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let ttl_var = policy.rules().ttl_var;
        let mut cfg = Config {
            policy,
            ..Config::default()
        };
        if let Some(raw) = get(ttl_var) {
            let v = raw.trim();
            if !v.is_empty() {
                cfg.ttl_ms = match v.parse::<u64>() {
                    Ok(t) if t > 0 => t,
                    _ => {
                        return Err(ConfigError(format!(
                            "{ttl_var}=`{}` is invalid: expected a positive integer number of milliseconds",
                            clip(&raw)
                        )));
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
                        return Err(ConfigError(format!(
                            "{ENABLED_VAR}=`{}` is invalid: expected true or false",
                            clip(&raw)
                        )));
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Who sent a client message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Agent,
    /// The human operator: never claims, is never yielded.
    Operator,
}

/// One input to the server, handled at a given server time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Client {
        from: String,
        role: Role,
        msg: ClientMsg,
    },
    /// The agent joins a channel (nothing is sent).
    Join { agent: String, channel: String },
    /// The agent leaves a channel (nothing is sent). Under the policies with
    /// [`Rules::leave_releases`] its claims in that channel are released.
    Leave { agent: String, channel: String },
    /// The agent's connection is gone: it leaves every channel and all its
    /// claims are released.
    Disconnect { agent: String },
    /// Only "time is now T": run due timers (expiry, sweeps).
    Tick,
}

/// One message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub to: String,
    pub msg: ServerMsg,
}

/// Counters a production server would export too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
}

/// A read-only view of one entry of the claim table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimInfo<'a> {
    pub holder: &'a str,
    /// As sent by the holder.
    pub started_at: i64,
    /// Server time of the grant (the deadline is this plus the TTL).
    pub granted_at: u64,
    pub deadline: u64,
    /// A `tombstone` "answered" marker rather than a live claim.
    pub answered: bool,
}

#[derive(Debug, Clone)]
struct Claim {
    holder: String,
    started_at: i64,
    /// Ordering value: `started_at`, or the receive time under `server-time`.
    order: i64,
    granted_at: u64,
    deadline: u64,
    /// Key in the deadline index, with `deadline`.
    seq: u64,
    answered: bool,
}

/// The arbitration server. See the module docs.
#[derive(Debug, Clone)]
pub struct Server {
    cfg: Config,
    rules: Rules,
    /// The last handled time.
    now: u64,
    /// channel -> members.
    members: BTreeMap<String, BTreeSet<String>>,
    /// agent -> channels it is in.
    joined: BTreeMap<String, BTreeSet<String>>,
    /// channel -> msg_id -> claim (live or tombstone marker).
    claims: BTreeMap<String, BTreeMap<String, Claim>>,
    /// agent -> channel -> msg_ids of its live (not answered) claims.
    held_by: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// (deadline, seq) -> (channel, msg_id), for every entry of `claims`.
    deadlines: BTreeMap<(u64, u64), (String, String)>,
    live: usize,
    markers: usize,
    next_seq: u64,
    next_msg_id: u64,
    stats: Stats,
}

impl Server {
    pub fn new(cfg: Config) -> Server {
        Server {
            rules: cfg.policy.rules(),
            cfg,
            now: 0,
            members: BTreeMap::new(),
            joined: BTreeMap::new(),
            claims: BTreeMap::new(),
            held_by: BTreeMap::new(),
            deadlines: BTreeMap::new(),
            live: 0,
            markers: 0,
            next_seq: 0,
            next_msg_id: 0,
            stats: Stats::default(),
        }
    }

    /// Handle one input at server time `now_ms`, appending the messages to
    /// send, in order, to `out`. Due timers run first.
    pub fn handle(&mut self, now_ms: u64, input: Input, out: &mut Vec<Outgoing>) {
        let now = self.advance(now_ms);
        match input {
            Input::Tick => {}
            Input::Join { agent, channel } => self.join(agent, channel, out),
            Input::Leave { agent, channel } => self.leave(&agent, &channel),
            Input::Disconnect { agent } => self.disconnect(&agent),
            Input::Client { from, role, msg } => match msg {
                ClientMsg::RespondingTo {
                    msg_id,
                    started_at,
                    channel,
                } => self.on_claim(now, from, role, msg_id, started_at, channel, out),
                ClientMsg::Msg {
                    id,
                    to,
                    content,
                    in_reply_to,
                } => self.on_msg(from, id, to, content, in_reply_to, out),
            },
        }
    }

    /// Handle a raw client message (what a production server reads from a
    /// socket): decoded strictly; an undecodable one is answered with
    /// `ERROR {code: "bad_message", message: <reason>}`.
    pub fn handle_bytes(
        &mut self,
        now_ms: u64,
        from: &str,
        role: Role,
        bytes: &[u8],
        out: &mut Vec<Outgoing>,
    ) {
        match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(v) => self.handle_value(now_ms, from, role, &v, out),
            Err(e) => self.reject(
                now_ms,
                from,
                &DecodeError::NotJson(e.to_string()),
                false,
                out,
            ),
        }
    }

    /// Like [`Server::handle_bytes`], for an already parsed JSON value.
    pub fn handle_value(
        &mut self,
        now_ms: u64,
        from: &str,
        role: Role,
        value: &serde_json::Value,
        out: &mut Vec<Outgoing>,
    ) {
        match ClientMsg::from_value(value) {
            Ok(msg) => self.handle(
                now_ms,
                Input::Client {
                    from: from.to_string(),
                    role,
                    msg,
                },
                out,
            ),
            Err(e) => {
                let claim = value.get("type").and_then(|t| t.as_str()) == Some("RESPONDING_TO");
                self.reject(now_ms, from, &e, claim, out)
            }
        }
    }

    /// Answer an undecodable message from `from` with an ERROR
    /// (`bad_message`), after running due timers. `was_claim`: it was meant
    /// as a RESPONDING_TO (counted in `claims_received`).
    pub fn reject(
        &mut self,
        now_ms: u64,
        from: &str,
        reason: &DecodeError,
        was_claim: bool,
        out: &mut Vec<Outgoing>,
    ) {
        self.advance(now_ms);
        if was_claim {
            self.stats.claims_received += 1;
        }
        self.error(from, "bad_message", reason.to_string(), out);
    }

    /// The next server time (ms) at which `handle(_, Input::Tick, _)` would
    /// change state: the earliest claim (or marker) deadline, or under
    /// `agentchat-0.36` the first sweep at or after it. `None` when no claim
    /// is tracked.
    pub fn poll_timeout(&self) -> Option<u64> {
        let (&(deadline, _), _) = self.deadlines.first_key_value()?;
        match self.rules.expiry {
            Expiry::Sweep { every_ms } if every_ms > 0 => {
                Some(deadline.div_ceil(every_ms).saturating_mul(every_ms))
            }
            _ => Some(deadline),
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The last handled server time.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The current holder of (channel, msg_id) and its `started_at`, if a
    /// live claim exists as of the last handled time (a tombstone marker is
    /// not a live claim; under `agentchat-0.36` an expired claim not yet
    /// swept still is, as it still wins).
    pub fn holder(&self, channel: &str, msg_id: &str) -> Option<(&str, i64)> {
        let c = self.claims.get(channel)?.get(msg_id)?;
        let live = !c.answered
            && (matches!(self.rules.expiry, Expiry::Sweep { .. }) || c.deadline > self.now);
        live.then_some((c.holder.as_str(), c.started_at))
    }

    /// The claim table entry of (channel, msg_id), live claim or marker.
    pub fn claim_info(&self, channel: &str, msg_id: &str) -> Option<ClaimInfo<'_>> {
        let c = self.claims.get(channel)?.get(msg_id)?;
        Some(ClaimInfo {
            holder: &c.holder,
            started_at: c.started_at,
            granted_at: c.granted_at,
            deadline: c.deadline,
            answered: c.answered,
        })
    }

    pub fn is_member(&self, agent: &str, channel: &str) -> bool {
        self.members.get(channel).is_some_and(|m| m.contains(agent))
    }

    /// The members of a channel, in id order.
    pub fn members(&self, channel: &str) -> impl Iterator<Item = &str> {
        self.members
            .get(channel)
            .into_iter()
            .flat_map(|m| m.iter().map(String::as_str))
    }

    /// Live claims tracked (tombstone markers excluded).
    pub fn claim_count(&self) -> usize {
        self.live
    }

    /// Tombstone "answered" markers tracked.
    pub fn marker_count(&self) -> usize {
        self.markers
    }

    // ------------------------------------------------------------ internals

    fn tracking(&self) -> bool {
        self.cfg.enabled && self.rules.tracks_claims
    }

    /// Move the clock to `now_ms` (never backwards) and run due timers.
    fn advance(&mut self, now_ms: u64) -> u64 {
        let now = now_ms.max(self.now);
        self.now = now;
        let limit = match self.rules.expiry {
            Expiry::AtDeadline => now,
            Expiry::Sweep { every_ms } if every_ms > 0 => now - now % every_ms,
            Expiry::Sweep { .. } => now,
        };
        while let Some((&(deadline, _), _)) = self.deadlines.first_key_value() {
            if deadline > limit {
                break;
            }
            let Some((_, (channel, msg_id))) = self.deadlines.pop_first() else {
                break;
            };
            if let Some(c) = self.remove_claim(&channel, &msg_id)
                && !c.answered
            {
                self.stats.expired += 1;
            }
        }
        now
    }

    fn error(&mut self, to: &str, code: &str, message: String, out: &mut Vec<Outgoing>) {
        self.stats.relayed += 1;
        out.push(Outgoing {
            to: to.to_string(),
            msg: ServerMsg::Error {
                code: code.to_string(),
                message,
            },
        });
    }

    /// Send `msg` to every member of `channel` but `except`.
    fn fan_out(&mut self, channel: &str, except: &str, msg: &ServerMsg, out: &mut Vec<Outgoing>) {
        let Some(members) = self.members.get(channel) else {
            return;
        };
        let before = out.len();
        out.extend(
            members
                .iter()
                .filter(|m| m.as_str() != except)
                .map(|m| Outgoing {
                    to: m.clone(),
                    msg: msg.clone(),
                }),
        );
        self.stats.relayed += (out.len() - before) as u64;
    }

    /// YIELD to `to` for `(channel, msg_id)`.
    fn send_yield(
        &mut self,
        to: &str,
        (channel, msg_id): (&str, &str),
        winner: &str,
        holder_started_at: i64,
        reason: &str,
        out: &mut Vec<Outgoing>,
    ) {
        let detail = match self.rules.yield_form {
            YieldForm::Winner => None,
            YieldForm::HolderDetail => Some(YieldDetail {
                holder_started_at,
                reason: reason.to_string(),
            }),
        };
        self.stats.yields += 1;
        out.push(Outgoing {
            to: to.to_string(),
            msg: ServerMsg::Yield {
                msg_id: msg_id.to_string(),
                winner: winner.to_string(),
                channel: channel.to_string(),
                detail,
            },
        });
    }

    fn join(&mut self, agent: String, channel: String, out: &mut Vec<Outgoing>) {
        if !is_channel_name(&channel) {
            let message = format!("bad channel name `{}`", clip(&channel));
            self.error(&agent, "bad_channel", message, out);
            return;
        }
        self.joined
            .entry(agent.clone())
            .or_default()
            .insert(channel.clone());
        self.members.entry(channel).or_default().insert(agent);
    }

    fn leave(&mut self, agent: &str, channel: &str) {
        if let Some(m) = self.members.get_mut(channel) {
            m.remove(agent);
            if m.is_empty() {
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
            self.release_all_in(agent, channel);
        }
    }

    fn disconnect(&mut self, agent: &str) {
        let channels = self.joined.remove(agent).unwrap_or_default();
        for channel in &channels {
            if let Some(m) = self.members.get_mut(channel) {
                m.remove(agent);
                if m.is_empty() {
                    self.members.remove(channel);
                }
            }
        }
        if let Some(per_channel) = self.held_by.remove(agent) {
            for (channel, ids) in per_channel {
                for id in ids {
                    self.remove_claim(&channel, &id);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_claim(
        &mut self,
        now: u64,
        from: String,
        role: Role,
        msg_id: String,
        started_at: i64,
        channel: String,
        out: &mut Vec<Outgoing>,
    ) {
        self.stats.claims_received += 1;
        match parse_target(&channel) {
            None => {
                let e = DecodeError::BadChannel {
                    field: "channel",
                    value: clip(&channel),
                    dm_allowed: true,
                };
                return self.error(&from, "bad_message", e.to_string(), out);
            }
            // The protocol does not apply to DMs: no claim, nothing sent.
            Some(Target::Dm(_)) => return,
            Some(Target::Channel(_)) => {}
        }
        if msg_id.is_empty() {
            let e = DecodeError::Empty("msg_id");
            return self.error(&from, "bad_message", e.to_string(), out);
        }
        if let Err(reason) = self.rules.started_at.check(started_at) {
            return self.error(&from, "bad_started_at", reason.to_string(), out);
        }
        if !self.is_member(&from, &channel) {
            if self.rules.membership_required {
                let message = format!("not a member of {channel}");
                return self.error(&from, "not_member", message, out);
            }
            if !self.members.contains_key(&channel) {
                // agentchat 0.36 drops claims on channels that do not exist.
                return;
            }
        }
        let raw = ServerMsg::RespondingTo {
            msg_id: msg_id.clone(),
            from: from.clone(),
            started_at,
            channel: channel.clone(),
        };
        if !self.tracking() || role == Role::Operator {
            if !self.tracking() || self.rules.announce == Announce::RelayEvery {
                self.fan_out(&channel, &from, &raw, out);
            }
            return;
        }
        let order = match self.rules.order {
            ClaimOrder::StartedAt => started_at,
            ClaimOrder::ServerTime => i64::try_from(now).unwrap_or(i64::MAX),
        };
        let (verdict, held_started_at, held_by) = {
            let current = self.claims.get(&channel).and_then(|m| m.get(&msg_id));
            let slot = match current {
                None => Slot::Free,
                Some(c) if c.answered => Slot::Answered { by: &c.holder },
                Some(c) => Slot::Held {
                    holder: &c.holder,
                    order: c.order,
                },
            };
            let verdict = self.cfg.policy.judge(slot, &from, order);
            let (s, h) = current.map_or((0, String::new()), |c| (c.started_at, c.holder.clone()));
            (verdict, s, h)
        };
        let announce_grant =
            |server: &mut Server, out: &mut Vec<Outgoing>| match server.rules.announce {
                Announce::RelayEvery => server.fan_out(&channel, &from, &raw, out),
                Announce::FloorClaimedOnGrant => {
                    let fc = ServerMsg::FloorClaimed {
                        msg_id: msg_id.clone(),
                        channel: channel.clone(),
                        holder: from.clone(),
                        started_at,
                    };
                    server.fan_out(&channel, &from, &fc, out)
                }
            };
        let announce_denial = |server: &mut Server, out: &mut Vec<Outgoing>| {
            if server.rules.announce == Announce::RelayEvery {
                server.fan_out(&channel, &from, &raw, out);
            }
        };
        let key = (channel.as_str(), msg_id.as_str());
        match verdict {
            Verdict::Repeat => {}
            Verdict::Grant => {
                self.insert_claim(&channel, &msg_id, &from, started_at, order, now);
                announce_grant(self, out);
            }
            Verdict::Displace | Verdict::RegrantSelf => {
                let displaced = self.remove_claim(&channel, &msg_id).map(|c| c.holder);
                self.insert_claim(&channel, &msg_id, &from, started_at, order, now);
                if matches!(verdict, Verdict::Displace) {
                    self.stats.overruled += 1;
                }
                announce_grant(self, out);
                if let Some(old) = displaced {
                    self.send_yield(&old, key, &from, started_at, REASON_DISPLACED, out);
                }
            }
            Verdict::Deny | Verdict::DenySelf => {
                announce_denial(self, out);
                self.send_yield(&from, key, &held_by, held_started_at, REASON_DENIED, out);
            }
            Verdict::DenyAnswered { answered_by } => {
                announce_denial(self, out);
                let by = &answered_by;
                self.send_yield(&from, key, by, held_started_at, REASON_DENIED, out);
            }
        }
    }

    fn on_msg(
        &mut self,
        from: String,
        id: Option<String>,
        to: String,
        content: String,
        in_reply_to: Option<String>,
        out: &mut Vec<Outgoing>,
    ) {
        let dm_target = match parse_target(&to) {
            None => {
                let e = DecodeError::BadChannel {
                    field: "to",
                    value: clip(&to),
                    dm_allowed: true,
                };
                return self.error(&from, "bad_message", e.to_string(), out);
            }
            Some(Target::Dm(peer)) => Some(peer.to_string()),
            Some(Target::Channel(_)) => None,
        };
        if dm_target.is_none() && !self.is_member(&from, &to) {
            let message = format!("not a member of {to}");
            return self.error(&from, "not_member", message, out);
        }
        let id = match id.filter(|i| !i.is_empty()) {
            Some(id) => id,
            None => {
                self.next_msg_id += 1;
                format!("s{}", self.next_msg_id)
            }
        };
        let msg = ServerMsg::Msg {
            id,
            from: from.clone(),
            to: to.clone(),
            content,
            in_reply_to: in_reply_to.clone(),
        };
        if let Some(peer) = dm_target {
            self.stats.relayed += 1;
            out.push(Outgoing { to: peer, msg });
            return;
        }
        self.fan_out(&to, &from, &msg, out);
        if !self.tracking() {
            return;
        }
        match (self.rules.release, in_reply_to) {
            (Release::AllInChannel, _) | (Release::Holder, None) => self.release_all_in(&from, &to),
            (Release::Holder, Some(m)) => {
                let held = self
                    .claims
                    .get(&to)
                    .and_then(|c| c.get(&m))
                    .is_some_and(|c| !c.answered && c.holder == from);
                if held && self.rules.tombstone {
                    self.mark_answered(&to, &m);
                } else if held {
                    self.remove_claim(&to, &m);
                }
            }
        }
    }

    fn insert_claim(
        &mut self,
        channel: &str,
        msg_id: &str,
        holder: &str,
        started_at: i64,
        order: i64,
        now: u64,
    ) {
        let deadline = now.saturating_add(self.cfg.ttl_ms);
        self.next_seq += 1;
        let seq = self.next_seq;
        let claim = Claim {
            holder: holder.to_string(),
            started_at,
            order,
            granted_at: now,
            deadline,
            seq,
            answered: false,
        };
        self.claims
            .entry(channel.to_string())
            .or_default()
            .insert(msg_id.to_string(), claim);
        self.deadlines
            .insert((deadline, seq), (channel.to_string(), msg_id.to_string()));
        self.held_by
            .entry(holder.to_string())
            .or_default()
            .entry(channel.to_string())
            .or_default()
            .insert(msg_id.to_string());
        self.live += 1;
    }

    /// Remove an entry (live claim or marker) and every index of it.
    fn remove_claim(&mut self, channel: &str, msg_id: &str) -> Option<Claim> {
        let per_channel = self.claims.get_mut(channel)?;
        let c = per_channel.remove(msg_id)?;
        if per_channel.is_empty() {
            self.claims.remove(channel);
        }
        self.deadlines.remove(&(c.deadline, c.seq));
        if c.answered {
            self.markers -= 1;
        } else {
            self.live -= 1;
            self.unindex(&c.holder, channel, msg_id);
        }
        Some(c)
    }

    fn unindex(&mut self, holder: &str, channel: &str, msg_id: &str) {
        if let Some(per_channel) = self.held_by.get_mut(holder) {
            if let Some(ids) = per_channel.get_mut(channel) {
                ids.remove(msg_id);
                if ids.is_empty() {
                    per_channel.remove(channel);
                }
            }
            if per_channel.is_empty() {
                self.held_by.remove(holder);
            }
        }
    }

    /// Turn a live claim into a tombstone marker (same deadline).
    fn mark_answered(&mut self, channel: &str, msg_id: &str) {
        let Some(c) = self.claims.get_mut(channel).and_then(|m| m.get_mut(msg_id)) else {
            return;
        };
        if c.answered {
            return;
        }
        c.answered = true;
        let holder = c.holder.clone();
        self.live -= 1;
        self.markers += 1;
        self.unindex(&holder, channel, msg_id);
    }

    /// Release every live claim of `agent` in `channel` (no markers).
    fn release_all_in(&mut self, agent: &str, channel: &str) {
        let ids = match self.held_by.get_mut(agent) {
            Some(per_channel) => {
                let ids = per_channel.remove(channel).unwrap_or_default();
                if per_channel.is_empty() {
                    self.held_by.remove(agent);
                }
                ids
            }
            None => return,
        };
        for id in ids {
            self.remove_claim(channel, &id);
        }
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
