//! The named arbitration policies, behind one interface: enum dispatch on
//! [`PolicyKind`].
//!
//! A policy is described by two things:
//! - [`PolicyKind::rules`]: a table of [`Rules`], one flag or enum per
//!   behaviour in which the policies differ (what the server announces, how
//!   claims are ordered, when they expire, what a MSG releases, ...). The
//!   server and the client read these flags; nothing else in the module
//!   matches on the policy name.
//! - [`PolicyKind::judge`]: the pure contest decision for one incoming claim
//!   against the current slot of its (channel, msg_id).
//!
//! The five policies:
//!
//! | behaviour | `none` | `spec` | `agentchat-0.36` | `tombstone` | `server-time` |
//! |---|---|---|---|---|---|
//! | claims tracked | no (plain relay) | yes | yes | yes | yes |
//! | order by | - | (`started_at`, id) | (`started_at`, id) | (`started_at`, id) | (server receive ms, id) |
//! | announce | raw relay | raw relay of every claim | `FLOOR_CLAIMED` on grant only | raw relay | raw relay |
//! | claimant must be a member | yes | yes | no | yes | yes |
//! | a channel exists | while it has members | same | always for the defaults; once joined, forever | same as `spec` | same as `spec` |
//! | `started_at` accepted | integer >= 0 | integer >= 0 | any number != 0 | integer >= 0 | integer >= 0 |
//! | `started_at` compared | exactly | exactly | as IEEE doubles | exactly | - |
//! | repeated claim by holder | - | ignored, nothing sent | re-judged, YIELD naming itself | ignored | ignored |
//! | expiry | - | at deadline | 5 s sweeps at a phase | at deadline | at deadline |
//! | a channel MSG releases | - | the holder's claim on `in_reply_to` (all its claims in the channel without `in_reply_to`) | all the sender's claims in the channel, if the server accepts the MSG | as `spec`, leaving an "answered" marker | as `spec` |
//! | a claim gone with its holder (disconnect, leave) announced as `FLOOR_RELEASED` | - | yes | no | yes | yes |
//! | an operator's claim | relayed | takes the floor (held, ordered first) | dropped | as `spec` | as `spec` |
//! | MSG refused (rate limit, lurk, not identified), DMs | no (DMs relayed) | no | yes (DMs disabled) | no | no |
//! | error codes | protocol (`bad_message`, ...) | same | agentchat's (`INVALID_MSG`, ...) | same as `spec` | same as `spec` |
//! | YIELD form | - | `winner` | `holder` + `holder_started_at` + `reason` | `winner` | `winner` |
//! | client aborts on a relayed earlier claim | - | yes | no | yes | no |
//! | TTL variable | `AGENTCHAT_RESPOND_TTL_MS` | same | `AGENTCHAT_CLAIM_TTL_MS` | same | same |

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use crate::wire::Stamp;

/// Which arbitration behaviour the server (and the matching client) follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum PolicyKind {
    /// No RESPONDING_TO at all: clients never claim, the server tracks
    /// nothing. A RESPONDING_TO that still reaches the server is relayed to
    /// the other channel members like any message (as with `enabled =
    /// false`), and never answered with a YIELD.
    None,
    /// The protocol as written (`spec`):
    /// claim table keyed by (channel, msg_id); earliest (`started_at`,
    /// agent id) wins; the loser (the later claimant, or the displaced
    /// holder) gets `YIELD {msg_id, winner, channel}`; every claim is
    /// relayed to the other channel members, before any YIELD; a repeated
    /// claim by the holder changes nothing and sends nothing; a claim
    /// expires exactly at grant + TTL; the holder's channel MSG in reply to
    /// the message clears it (one with no `in_reply_to` clears all of the
    /// sender's claims in that channel); only channel members may claim;
    /// `started_at` must be a non-negative integer.
    Spec,
    /// The behaviour of the public agentchat server 0.36, quirks included,
    /// as its source shows it (`FloorControl` in `lib/floor-control.ts`; the
    /// `RESPONDING_TO` case of `AgentChatServer._handleMessage` in
    /// `lib/server.ts`; `handleMsg`, `handleJoin` and `handleLeave` in
    /// `lib/server/handlers/message.ts`; `validateClientMessage` and
    /// `isValidChannel` in `lib/protocol.ts`) and as a differential test
    /// against a running instance confirmed. It differs from `spec` in that:
    /// - a granted claim (first, or a takeover) is announced as
    ///   `FLOOR_CLAIMED` to every member but the claimant, the displaced
    ///   holder included; the raw RESPONDING_TO is never relayed; a denied
    ///   claim announces nothing; the winner gets nothing back;
    /// - YIELD has the form `{msg_id, channel, holder, holder_started_at,
    ///   reason}`; reason `"Earlier started_at timestamp"` for a displaced
    ///   holder, `"Another agent claimed first"` for a denied claimant;
    /// - a repeated claim by the holder is judged like any other: with the
    ///   same or a later `started_at` it is denied with a YIELD naming the
    ///   holder itself; with an earlier one it is granted again
    ///   (`FLOOR_CLAIMED` rebroadcast, fresh deadline) and the holder, as the
    ///   "displaced" one, still gets a YIELD naming itself;
    /// - channels exist independently of members: the server's default
    ///   channels ([`AGENTCHAT_DEFAULT_CHANNELS`]) always exist, a JOIN to
    ///   another valid name creates it (herdsim's JOIN stands for
    ///   `CREATE_CHANNEL` + `JOIN` there), and no channel is ever deleted. A
    ///   claim on an existing channel is tracked whoever sends it, member or
    ///   not, even when the channel has no members; a claim on a channel
    ///   that does not exist is dropped silently;
    /// - a channel name is `#` plus 1 to 31 of `[A-Za-z0-9_-]`; a claim
    ///   whose `channel` is anything else (a DM target `@id`, a longer
    ///   name) gets `ERROR INVALID_MSG "Missing or invalid channel"`;
    /// - `started_at` may be any JSON number but 0 (floats, `1e3`, beyond
    ///   `i64`), and claims are ordered by it as IEEE doubles, so two values
    ///   above 2^53 that round to the same double tie (the smaller id wins);
    /// - errors use agentchat's codes and texts (`INVALID_MSG`,
    ///   `RATE_LIMITED`, `LURK_MODE`, `AUTH_REQUIRED`, `CHANNEL_NOT_FOUND`,
    ///   `NOT_INVITED`);
    /// - a claim from a connection that has not identified is dropped
    ///   silently (see [`crate::Input::Connect`]);
    /// - a MSG is refused with an ERROR, and releases nothing, when its
    ///   sender has not identified, is lurking, sent a MSG less than the rate
    ///   limit ago (`Config::rate_limit_ms`, default 1000), or is not a
    ///   member of the channel; every DM is refused ("Direct messages are
    ///   disabled"). An accepted channel MSG releases all of the sender's
    ///   claims in that channel, whatever its `in_reply_to`; leaving a
    ///   channel releases nothing;
    /// - expiry is a sweep every 5000 ms at a phase (and optional drift)
    ///   set in [`crate::Config`], so an expired claim keeps winning
    ///   until the next sweep; a sweep due at the same instant as a claim
    ///   runs first; nobody is told;
    /// - its TTL variable is `AGENTCHAT_CLAIM_TTL_MS`, read leniently as the
    ///   server's `parseInt` does (see [`crate::sim::agentchat_ttl`]).
    Agentchat036,
    /// Like `spec`, but a MSG from the live holder in reply to the message
    /// turns its claim into an "answered" marker that keeps the claim's
    /// deadline and denies every later claim (even one with an earlier
    /// `started_at`) with a YIELD naming the answerer, until that deadline.
    /// This closes the race where a late claim arrives just after the
    /// winner's MSG and is granted. Markers are not counted as expired
    /// claims, nor by `claim_count`.
    Tombstone,
    /// Like `spec`, but ordered by (server receive time in ms, agent id)
    /// instead of the self-reported `started_at`: immune to clock skew. The
    /// relayed RESPONDING_TO still carries the claimant's `started_at`, and
    /// clients do not abort on relayed claims (they cannot know the server
    /// order); only YIELD aborts.
    ServerTime,
}

impl PolicyKind {
    /// Every policy, in the order tables and figures list them.
    pub const ALL: [PolicyKind; 5] = [
        PolicyKind::None,
        PolicyKind::Spec,
        PolicyKind::Agentchat036,
        PolicyKind::Tombstone,
        PolicyKind::ServerTime,
    ];

    /// The policy's name in scenario files and on the command line
    /// (`none`, `spec`, `agentchat-0.36`, `tombstone`, `server-time`).
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::None => "none",
            PolicyKind::Spec => "spec",
            PolicyKind::Agentchat036 => "agentchat-0.36",
            PolicyKind::Tombstone => "tombstone",
            PolicyKind::ServerTime => "server-time",
        }
    }

    /// The behaviour table of this policy (see the module docs).
    pub const fn rules(self) -> Rules {
        const SPEC: Rules = Rules {
            tracks_claims: true,
            clients_claim: true,
            order: ClaimOrder::StartedAt,
            announce: Announce::RelayEvery,
            membership_required: true,
            started_at: StartedAtRule::NonNegative,
            repeat: RepeatClaim::Ignore,
            expiry: Expiry::AtDeadline,
            release: Release::Holder,
            tombstone: false,
            leave_releases: true,
            announce_release: true,
            operator_takes_floor: true,
            yield_form: YieldForm::Winner,
            client_aborts_on_relayed_claim: true,
            ttl_var: TTL_VAR,
            channels: Channels::Membership,
            errors: ErrorStyle::Protocol,
            msg_gate: MsgGate::Open,
        };
        match self {
            PolicyKind::None => Rules {
                tracks_claims: false,
                clients_claim: false,
                client_aborts_on_relayed_claim: false,
                ..SPEC
            },
            PolicyKind::Spec => SPEC,
            PolicyKind::Agentchat036 => Rules {
                announce: Announce::FloorClaimedOnGrant,
                membership_required: false,
                order: ClaimOrder::StartedAtDouble,
                started_at: StartedAtRule::NonZeroNumber,
                repeat: RepeatClaim::Rejudge,
                expiry: Expiry::Sweep,
                release: Release::AllInChannel,
                leave_releases: false,
                announce_release: false,
                operator_takes_floor: false,
                yield_form: YieldForm::HolderDetail,
                client_aborts_on_relayed_claim: false,
                ttl_var: AGENTCHAT_TTL_VAR,
                channels: Channels::Registry,
                errors: ErrorStyle::Agentchat,
                msg_gate: MsgGate::Agentchat,
                ..SPEC
            },
            PolicyKind::Tombstone => Rules {
                tombstone: true,
                ..SPEC
            },
            PolicyKind::ServerTime => Rules {
                order: ClaimOrder::ServerTime,
                client_aborts_on_relayed_claim: false,
                ..SPEC
            },
        }
    }

    /// Decide one incoming claim against the current slot of its
    /// (channel, msg_id). `order` is the claimant's ordering value: its
    /// `started_at` or, under `server-time`, the server receive time (see
    /// [`Rules::order`]). Only meaningful for policies that track claims.
    pub fn judge<A: ?Sized + Ord + ToOwned>(
        self,
        slot: Slot<'_, A>,
        claimant: &A,
        order: Stamp,
    ) -> Verdict<A::Owned> {
        let rules = self.rules();
        match slot {
            Slot::Free => Verdict::Grant,
            Slot::Answered { by } => Verdict::DenyAnswered {
                answered_by: by.to_owned(),
            },
            Slot::Held {
                holder,
                order: held,
            } if holder == claimant => match rules.repeat {
                RepeatClaim::Ignore => Verdict::Repeat,
                RepeatClaim::Rejudge if rules.order.cmp(order, held).is_lt() => {
                    Verdict::RegrantSelf
                }
                RepeatClaim::Rejudge => Verdict::DenySelf,
            },
            Slot::Held {
                holder,
                order: held,
            } => {
                if rules
                    .order
                    .cmp(order, held)
                    .then(claimant.cmp(holder))
                    .is_lt()
                {
                    Verdict::Displace
                } else {
                    Verdict::Deny
                }
            }
        }
    }
}

/// Default claim TTL in milliseconds.
pub const DEFAULT_TTL_MS: u64 = 45_000;
/// The TTL variable of the protocol.
pub const TTL_VAR: &str = "AGENTCHAT_RESPOND_TTL_MS";
/// The TTL variable agentchat 0.36 reads instead.
pub const AGENTCHAT_TTL_VAR: &str = "AGENTCHAT_CLAIM_TTL_MS";
/// The enable switch.
pub const ENABLED_VAR: &str = "AGENTCHAT_RESPOND_ENABLED";
/// Period of the agentchat 0.36 expiry sweep (`CLEANUP_INTERVAL_MS` in
/// `lib/floor-control.ts`).
pub const AGENTCHAT_SWEEP_MS: u64 = 5_000;
/// The agentchat 0.36 MSG rate limit: one MSG per this many ms per
/// connection (`rateLimitMs`: `options.rateLimitMs || 1000` in the
/// `AgentChatServer` constructor, `lib/server.ts`).
pub const AGENTCHAT_RATE_LIMIT_MS: u64 = 1_000;
/// agentchat 0.36.19's flood limit (`_handleMessage`, `lib/server.ts`):
/// every text frame a connection sends is counted over a sliding window of
/// this many ms, and the frame that makes the count pass the limit closes
/// the connection (close code 1008, `Rate limit exceeded`) unhandled; the
/// close is a disconnect, which releases all the connection's claims.
pub const AGENTCHAT_FRAME_WINDOW_MS: u64 = 10_000;
/// The flood limit of an identified connection: frames per window.
pub const AGENTCHAT_FRAMES_IDENTIFIED: usize = 60;
/// The flood limit of a connection that has not identified yet.
pub const AGENTCHAT_FRAMES_UNIDENTIFIED: usize = 10;

/// agentchat 0.36.19's sliding frame window (see
/// [`AGENTCHAT_FRAME_WINDOW_MS`]): the times of the frames of the last
/// window, at most one more than the limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameWindow(std::collections::VecDeque<u64>);

impl FrameWindow {
    /// A frame at `now_ms`: `true` when it takes the frames of the window
    /// (those less than [`AGENTCHAT_FRAME_WINDOW_MS`] old, it included)
    /// past `limit`, i.e. the connection is closed.
    pub fn over(&mut self, now_ms: u64, limit: usize) -> bool {
        while self
            .0
            .front()
            .is_some_and(|&t| now_ms.saturating_sub(t) >= AGENTCHAT_FRAME_WINDOW_MS)
        {
            self.0.pop_front();
        }
        self.0.push_back(now_ms);
        let over = self.0.len() > limit;
        while self.0.len() > limit.saturating_add(1) {
            self.0.pop_front();
        }
        over
    }
}

/// The channels an agentchat server creates at start (`AgentChatServer`
/// constructor, `lib/server.ts`; `#ops` is verified-only there, which
/// herdsim does not model).
pub const AGENTCHAT_DEFAULT_CHANNELS: [&str; 9] = [
    "#general",
    "#engineering",
    "#pull-requests",
    "#help",
    "#love",
    "#agents",
    "#discovery",
    "#bounties",
    "#ops",
];
/// Longest agentchat channel name after the `#` (`isValidChannel`,
/// `lib/protocol.ts`).
pub const AGENTCHAT_CHANNEL_MAX: usize = 31;

/// YIELD reason (agentchat form) sent to a displaced holder.
pub const REASON_DISPLACED: &str = "Earlier started_at timestamp";
/// YIELD reason (agentchat form) sent to a denied claimant.
pub const REASON_DENIED: &str = "Another agent claimed first";

/// The behaviours in which policies differ. Obtained from [`PolicyKind::rules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rules {
    /// The server keeps a claim table and sends YIELDs (`false` for `none`).
    pub tracks_claims: bool,
    /// Clients send RESPONDING_TO at all (`false` for `none`).
    pub clients_claim: bool,
    /// What a claim is ordered by.
    pub order: ClaimOrder,
    /// What the other members are told of a claim.
    pub announce: Announce,
    /// A claim on a channel the claimant is not in is an ERROR.
    pub membership_required: bool,
    /// Which `started_at` values are accepted.
    pub started_at: StartedAtRule,
    /// What a repeated claim by the current holder does.
    pub repeat: RepeatClaim,
    /// When claims expire.
    pub expiry: Expiry,
    /// What a channel MSG from a claimant releases.
    pub release: Release,
    /// A MSG from the live holder leaves an "answered" marker (`tombstone`).
    pub tombstone: bool,
    /// Leaving a channel releases the leaver's claims in it.
    pub leave_releases: bool,
    /// A live claim dropped because its holder disconnected or left the
    /// channel is announced to the channel as `FLOOR_RELEASED` (a herdsim
    /// extension; a real agentchat server tells nobody).
    pub announce_release: bool,
    /// An operator's RESPONDING_TO takes the floor whatever its
    /// `started_at` ("humans always get the floor"): the server holds it,
    /// yields the agent it displaces and denies later agents' claims. When
    /// `false` (agentchat 0.36) it is relayed and not tracked.
    pub operator_takes_floor: bool,
    /// The YIELD form sent.
    pub yield_form: YieldForm,
    /// A (well-behaved) client aborts its running inference on a relayed
    /// RESPONDING_TO for the same message with an earlier (`started_at`, id).
    pub client_aborts_on_relayed_claim: bool,
    /// The environment variable holding the TTL in ms.
    pub ttl_var: &'static str,
    /// When a channel exists.
    pub channels: Channels,
    /// Which error codes and texts the server sends.
    pub errors: ErrorStyle,
    /// Which MSGs the server refuses.
    pub msg_gate: MsgGate,
}

/// When a channel exists. A claim on a channel that does not exist is
/// dropped silently by the policies that let non-members claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channels {
    /// While it has members (the protocol has no channel list).
    Membership,
    /// agentchat 0.36: the default channels always exist, a JOIN creates
    /// the channel, none is ever deleted; names are at most
    /// [`AGENTCHAT_CHANNEL_MAX`] characters after the `#`.
    Registry,
}

/// Which error codes and texts the server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorStyle {
    /// herdsim's protocol codes: `bad_message`, `bad_channel`,
    /// `bad_started_at`, `not_member`.
    Protocol,
    /// agentchat 0.36's codes and texts (`ErrorCode` in `lib/protocol.ts`).
    Agentchat,
}

/// Which MSGs the server refuses (with an ERROR; a refused MSG is not
/// relayed and releases no claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgGate {
    /// Only a channel MSG from a non-member.
    Open,
    /// agentchat 0.36 (`handleMsg`, `lib/server/handlers/message.ts`): also
    /// a MSG from a connection that has not identified (`AUTH_REQUIRED`),
    /// from a lurking identity (`LURK_MODE`), within the rate limit of the
    /// sender's previous MSG that passed it (`RATE_LIMITED`), to a channel
    /// that does not exist (`CHANNEL_NOT_FOUND`), and every DM. The
    /// operator ([`crate::Role::Operator`]) is exempt from the
    /// identification, lurk and rate-limit checks.
    Agentchat,
}

/// What a claim is ordered by (ties always go to the smaller agent id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOrder {
    /// The self-reported `started_at`, compared exactly.
    StartedAt,
    /// The self-reported `started_at`, compared as IEEE doubles as
    /// JavaScript compares numbers (`FloorControl.claim`,
    /// `lib/floor-control.ts`): 9007199254740993 and 9007199254740992 tie.
    StartedAtDouble,
    /// The server time (ms) at which the claim was received.
    ServerTime,
}

impl ClaimOrder {
    /// Compare two ordering values.
    pub fn cmp(self, a: Stamp, b: Stamp) -> Ordering {
        match self {
            ClaimOrder::StartedAtDouble => a
                .as_f64()
                .partial_cmp(&b.as_f64())
                .unwrap_or(Ordering::Equal),
            ClaimOrder::StartedAt | ClaimOrder::ServerTime => a.cmp(&b),
        }
    }
}

/// What the other channel members are told of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announce {
    /// Every RESPONDING_TO is relayed (with `from`) to the other members,
    /// granted or not, before any YIELD.
    RelayEvery,
    /// Only a granted claim is announced, as FLOOR_CLAIMED, to every member
    /// but the claimant (agentchat 0.36).
    FloorClaimedOnGrant,
}

/// Which `started_at` values a claim may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartedAtRule {
    /// A non-negative integer (the protocol).
    NonNegative,
    /// Any number but 0 (agentchat 0.36: `!msg.started_at || typeof
    /// msg.started_at !== 'number'` in `validateClientMessage`,
    /// `lib/protocol.ts`, so 0 counts as missing).
    NonZeroNumber,
}

impl StartedAtRule {
    /// `Err((code, message))`, the ERROR the server answers with, if the
    /// value is not accepted.
    pub fn check(self, started_at: Stamp) -> Result<(), (&'static str, &'static str)> {
        match (self, started_at) {
            (StartedAtRule::NonNegative, Stamp::Float(_)) => {
                Err(("bad_message", "`started_at` must be an integer"))
            }
            (StartedAtRule::NonNegative, Stamp::Int(i)) if i < 0 => Err((
                "bad_started_at",
                "`started_at` must be a non-negative integer",
            )),
            (StartedAtRule::NonZeroNumber, Stamp::Int(0)) => {
                Err(("INVALID_MSG", "Missing or invalid started_at timestamp"))
            }
            _ => Ok(()),
        }
    }
}

/// What a repeated claim by the current holder does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeatClaim {
    /// Changes nothing, sends nothing.
    Ignore,
    /// Judged like any claim (agentchat 0.36): see [`Verdict::RegrantSelf`]
    /// and [`Verdict::DenySelf`].
    Rejudge,
}

/// When claims expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Exactly at the deadline (grant + TTL): expired when now >= deadline.
    AtDeadline,
    /// By a sweep every `Config::sweep_every_ms` (the real server's
    /// [`AGENTCHAT_SWEEP_MS`], + `Config::sweep_drift_us`) of server time
    /// from `Config::sweep_phase_ms`, which removes the claims whose
    /// deadline is <= the sweep time; each sweep runs once.
    Sweep,
}

/// What a channel MSG releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// With `in_reply_to = m`: the sender's claim on m in that channel, if
    /// it holds it. Without `in_reply_to`: all its claims in that channel.
    Holder,
    /// All of the sender's claims in that channel, whatever `in_reply_to`.
    AllInChannel,
}

/// The YIELD form sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YieldForm {
    /// `{msg_id, winner, channel}`.
    Winner,
    /// `{msg_id, channel, holder, holder_started_at, reason}`.
    HolderDetail,
}

/// The current state of one (channel, msg_id), as the judge sees it.
/// `A` is how agents are named (a wire id `str`, or a handle; see
/// [`crate::Naming`]).
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Slot<'a, A: ?Sized = str> {
    /// No claim (or it expired and was removed).
    Free,
    /// A live claim.
    Held {
        /// The agent holding the floor.
        holder: &'a A,
        /// The `started_at` the claim is ordered by.
        order: Stamp,
    },
    /// A tombstone marker: the holder `by` answered.
    Answered {
        /// The agent that answered.
        by: &'a A,
    },
}

impl<A: ?Sized> Clone for Slot<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A: ?Sized> Copy for Slot<'_, A> {}

/// The outcome of one claim.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict<A = String> {
    /// Free slot: the claimant becomes the holder.
    Grant,
    /// The claimant orders before the holder: it takes over, the displaced
    /// holder gets a YIELD.
    Displace,
    /// The holder orders before the claimant: the claimant gets a YIELD.
    Deny,
    /// Repeated claim by the holder, ignored (`spec` family): nothing changes,
    /// nothing is sent.
    Repeat,
    /// Repeated claim by the holder with an earlier `started_at`
    /// (agentchat 0.36): granted again with a fresh deadline, announced, and
    /// the holder gets a YIELD naming itself.
    RegrantSelf,
    /// Repeated claim by the holder with the same or a later `started_at`
    /// (agentchat 0.36): denied with a YIELD naming itself.
    DenySelf,
    /// A tombstone marker denies the claim; the YIELD names the answerer.
    DenyAnswered {
        /// The agent that answered.
        answered_by: A,
    },
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!("unknown policy `{s}` (expected one of: none, spec, agentchat-0.36, tombstone, server-time)")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_roundtrip() {
        for p in PolicyKind::ALL {
            assert_eq!(p.name().parse::<PolicyKind>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        assert!("Spec".parse::<PolicyKind>().is_err());
    }

    #[test]
    fn rules_table() {
        let r = PolicyKind::None.rules();
        assert!(!r.tracks_claims && !r.clients_claim);
        let s = PolicyKind::Spec.rules();
        assert!(s.tracks_claims && s.clients_claim && s.membership_required);
        assert_eq!(s.announce, Announce::RelayEvery);
        assert_eq!(s.expiry, Expiry::AtDeadline);
        assert_eq!(s.ttl_var, "AGENTCHAT_RESPOND_TTL_MS");
        assert!(s.client_aborts_on_relayed_claim && !s.tombstone);
        let a = PolicyKind::Agentchat036.rules();
        assert_eq!(a.announce, Announce::FloorClaimedOnGrant);
        assert_eq!(a.expiry, Expiry::Sweep);
        assert_eq!(a.release, Release::AllInChannel);
        assert_eq!(a.yield_form, YieldForm::HolderDetail);
        assert_eq!(a.ttl_var, "AGENTCHAT_CLAIM_TTL_MS");
        assert!(!a.membership_required && !a.client_aborts_on_relayed_claim);
        let t = PolicyKind::Tombstone.rules();
        assert!(t.tombstone && t.client_aborts_on_relayed_claim);
        let st = PolicyKind::ServerTime.rules();
        assert_eq!(st.order, ClaimOrder::ServerTime);
        assert!(!st.client_aborts_on_relayed_claim);
    }

    #[test]
    fn started_at_rules() {
        let i = Stamp::Int;
        assert!(StartedAtRule::NonNegative.check(i(0)).is_ok());
        assert!(StartedAtRule::NonNegative.check(i(-1)).is_err());
        assert_eq!(
            StartedAtRule::NonNegative.check(Stamp::Float(1.5)),
            Err(("bad_message", "`started_at` must be an integer"))
        );
        assert!(StartedAtRule::NonZeroNumber.check(i(0)).is_err());
        assert!(StartedAtRule::NonZeroNumber.check(i(-1)).is_ok());
        assert!(
            StartedAtRule::NonZeroNumber
                .check(Stamp::Float(0.001))
                .is_ok()
        );
        assert!(
            StartedAtRule::NonZeroNumber
                .check(Stamp::Float(-1e20))
                .is_ok()
        );
    }

    #[test]
    fn judge_spec() {
        let p = PolicyKind::Spec;
        assert_eq!(p.judge(Slot::Free, "a", Stamp::Int(5)), Verdict::Grant);
        let held = Slot::Held {
            holder: "b",
            order: Stamp::Int(5),
        };
        assert_eq!(p.judge(held, "a", Stamp::Int(4)), Verdict::Displace);
        assert_eq!(p.judge(held, "a", Stamp::Int(5)), Verdict::Displace); // tie, smaller id
        assert_eq!(p.judge(held, "c", Stamp::Int(5)), Verdict::Deny); // tie, larger id
        assert_eq!(p.judge(held, "a", Stamp::Int(6)), Verdict::Deny);
        assert_eq!(p.judge(held, "b", Stamp::Int(1)), Verdict::Repeat);
        assert_eq!(p.judge(held, "b", Stamp::Int(9)), Verdict::Repeat);
        assert_eq!(
            p.judge(Slot::Answered { by: "b" }, "a", Stamp::Int(0)),
            Verdict::DenyAnswered {
                answered_by: "b".into()
            }
        );
    }

    #[test]
    fn judge_agentchat_repeat() {
        let p = PolicyKind::Agentchat036;
        let held = Slot::Held {
            holder: "b",
            order: Stamp::Int(5),
        };
        assert_eq!(p.judge(held, "b", Stamp::Int(4)), Verdict::RegrantSelf);
        assert_eq!(p.judge(held, "b", Stamp::Int(5)), Verdict::DenySelf);
        assert_eq!(p.judge(held, "b", Stamp::Int(6)), Verdict::DenySelf);
        assert_eq!(p.judge(held, "a", Stamp::Int(5)), Verdict::Displace);
        assert_eq!(p.judge(held, "c", Stamp::Int(5)), Verdict::Deny);
    }

    #[test]
    fn the_frame_window_closes_on_the_61st_frame_of_ten_seconds() {
        let mut w = FrameWindow::default();
        // 60 frames in 9.999 s pass; the 61st within 10 s of the first closes.
        for i in 0..60 {
            assert!(!w.over(i * 169, AGENTCHAT_FRAMES_IDENTIFIED), "{i}");
        }
        assert!(w.over(9_999, AGENTCHAT_FRAMES_IDENTIFIED));
        // A frame exactly 10 s after another no longer counts it.
        let mut w = FrameWindow::default();
        for _ in 0..60 {
            assert!(!w.over(0, AGENTCHAT_FRAMES_IDENTIFIED));
        }
        assert!(!w.over(AGENTCHAT_FRAME_WINDOW_MS, AGENTCHAT_FRAMES_IDENTIFIED));
        // Before identifying: the 11th frame.
        let mut w = FrameWindow::default();
        let closed: Vec<bool> = (0..11)
            .map(|_| w.over(5, AGENTCHAT_FRAMES_UNIDENTIFIED))
            .collect();
        assert_eq!(closed.iter().filter(|c| **c).count(), 1);
        assert!(closed[10]);
        // It never holds more than the limit and one.
        for _ in 0..1000 {
            w.over(6, AGENTCHAT_FRAMES_UNIDENTIFIED);
        }
        assert_eq!(w.0.len(), AGENTCHAT_FRAMES_UNIDENTIFIED + 1);
    }
}
