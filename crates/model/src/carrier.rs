//! How a claim travels, and the platform it travels on (`[carrier]`,
//! docs/carriers.md).
//!
//! A *carrier* is what an agent uses to tell the others "I am answering
//! this message": a floor server (`server`, the protocol as written), room
//! events every agent arbitrates itself (`replica`), a reaction on the
//! question (`reaction`), a typing indicator (`typing`), or nothing
//! (`none`). A *platform* is where the agents' messages and that signal
//! live: `agentchat` (a floor server is the room: today's model), or one of
//! the four chat platforms, each with the properties that bend a claim
//! ([`Profile`]): who sees what, how a typing indicator expires, what the
//! send limits are. Every number comes from the platform's documentation
//! or a measurement named beside it; where a platform documents none,
//! the choice is said.
//!
//! Only the kinds and the profiles live here (plain data and a rate
//! limiter); the world ([`crate::model`]) carries them out.

use serde::{Deserialize, Serialize};

/// How a claim travels (`carrier.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CarrierKind {
    /// Through a floor server that arbitrates (agentchat, `herdsim
    /// serve`): the claim, its relay and the YIELD are the server's. On a
    /// chat platform the floor server runs beside it (the agents' answers
    /// go to the platform).
    #[default]
    Server,
    /// As room events that every agent arbitrates itself with the floor's
    /// server half, fed the room's order (docs/matrix.md). On one
    /// homeserver every replica sees the same events in the same order with
    /// the same server timestamps and so computes the same verdicts as one
    /// floor server placed there would: the simulator runs that one server
    /// (the real floor) and delivers each verdict with the event that
    /// causes it.
    Replica,
    /// As a reaction on the question ("on it"): an agent whose CSMA wait
    /// ends skips if it has seen another agent's reaction on the question
    /// (believed for `server.ttl_ms`); nobody arbitrates, so two agents
    /// that react within each other's delivery time both answer.
    Reaction,
    /// As a typing indicator: shown from the start of an agent's inference
    /// to its answer, for the whole room (it names no message), expiring
    /// by the platform's rule when its sender stops refreshing it (a crash,
    /// a hang). An agent whose CSMA wait ends skips if anyone else is shown
    /// typing; nothing arbitrates.
    Typing,
    /// No claim at all: agents see only each other's answers (the policy
    /// `none`, whatever `policies` says).
    None,
}

impl CarrierKind {
    /// Every kind, in the order tables list them.
    pub const ALL: [CarrierKind; 5] = [
        CarrierKind::Server,
        CarrierKind::Replica,
        CarrierKind::Reaction,
        CarrierKind::Typing,
        CarrierKind::None,
    ];

    /// The kind's name in a scenario.
    pub fn name(self) -> &'static str {
        match self {
            CarrierKind::Server => "server",
            CarrierKind::Replica => "replica",
            CarrierKind::Reaction => "reaction",
            CarrierKind::Typing => "typing",
            CarrierKind::None => "none",
        }
    }

    /// Whether a floor arbitrates (a server, or the replicas): the
    /// scenario's policies apply. Under the others every policy gives the
    /// same run.
    pub fn arbitrates(self) -> bool {
        matches!(self, CarrierKind::Server | CarrierKind::Replica)
    }
}

/// Where the agents live (`carrier.platform`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// A floor server is the room (agentchat, `herdsim serve`): no
    /// platform limits, everybody sees everything. Only `server` and
    /// `none` carriers exist there.
    #[default]
    Agentchat,
    /// Matrix on a Synapse homeserver.
    Matrix,
    /// Slack (Events API apps).
    Slack,
    /// Discord (bots on the Gateway).
    Discord,
    /// Telegram (Bot API, bot-to-bot mode on).
    Telegram,
}

impl Platform {
    /// Every platform, in the order tables list them.
    pub const ALL: [Platform; 5] = [
        Platform::Agentchat,
        Platform::Matrix,
        Platform::Slack,
        Platform::Discord,
        Platform::Telegram,
    ];

    /// The platform's name in a scenario.
    pub fn name(self) -> &'static str {
        match self {
            Platform::Agentchat => "agentchat",
            Platform::Matrix => "matrix",
            Platform::Slack => "slack",
            Platform::Discord => "discord",
            Platform::Telegram => "telegram",
        }
    }

    /// The platform's properties (docs/carriers.md, "The platforms").
    pub fn profile(self) -> Profile {
        match self {
            Platform::Agentchat => Profile {
                bots_see_bots: true,
                typing: None,
                reactions_visible: false,
                message_limit: None,
                reaction_limit: None,
                reactions_share_message_limit: false,
            },
            // rc_message: 0.2 events/s, burst 10, per user, every event
            // (custom events and reactions too); typing is not charged.
            // Typing: the sender's timeout, expired in 5 s buckets.
            Platform::Matrix => Profile {
                bots_see_bots: true,
                typing: Some(TypingExpiry::Buckets { bucket_ms: 5_000 }),
                reactions_visible: true,
                message_limit: Some(Limit {
                    per_s: 0.2,
                    burst: 10,
                }),
                reaction_limit: None,
                reactions_share_message_limit: true,
            },
            // chat.postMessage about 1/s per channel (bursts allowed but
            // not sized: herdsim takes 1); reactions.add Tier 3, 50 a
            // minute; an Events-API app can send no typing indicator.
            Platform::Slack => Profile {
                bots_see_bots: true,
                typing: None,
                reactions_visible: true,
                message_limit: Some(Limit {
                    per_s: 1.0,
                    burst: 1,
                }),
                reaction_limit: Some(Limit {
                    per_s: 50.0 / 60.0,
                    burst: 1,
                }),
                reactions_share_message_limit: false,
            },
            // Messages 5 per 5 s per channel; the reaction route's headers
            // say 1 per s (its measured limit was near 4 per s; Discord
            // asks bots to honour the headers); typing lasts 10 s after
            // the last trigger.
            Platform::Discord => Profile {
                bots_see_bots: true,
                typing: Some(TypingExpiry::After { ms: 10_000 }),
                reactions_visible: true,
                message_limit: Some(Limit {
                    per_s: 1.0,
                    burst: 5,
                }),
                reaction_limit: Some(Limit {
                    per_s: 1.0,
                    burst: 1,
                }),
                reactions_share_message_limit: false,
            },
            // At most 20 messages a minute in one group (about 1 per s):
            // herdsim takes 20 per 60 s with a burst of 3. Bots never get
            // other bots' chat actions or reactions, and, even in
            // bot-to-bot mode, another bot's message only when it is
            // addressed to them.
            Platform::Telegram => Profile {
                bots_see_bots: false,
                typing: None,
                reactions_visible: false,
                message_limit: Some(Limit {
                    per_s: 20.0 / 60.0,
                    burst: 3,
                }),
                reaction_limit: None,
                reactions_share_message_limit: false,
            },
        }
    }
}

/// What a platform does to a claim.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    /// A bot receives other bots' messages (its answers, and claims sent
    /// as room events or visible messages). Telegram: only those that
    /// @mention it.
    pub bots_see_bots: bool,
    /// A typing indicator other bots see, and how it expires (`None`: a
    /// bot cannot send one, or others cannot see it).
    pub typing: Option<TypingExpiry>,
    /// Other bots see a bot's reactions.
    pub reactions_visible: bool,
    /// The send limit on a bot's messages in the room (`None`: none).
    pub message_limit: Option<Limit>,
    /// The send limit on its reactions, when it is not the message limit.
    pub reaction_limit: Option<Limit>,
    /// Reactions draw on the message limit (Matrix's `rc_message`).
    pub reactions_share_message_limit: bool,
}

/// How long a typing indicator shows after its sender's last refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypingExpiry {
    /// Synapse: the sender's timeout (`carrier.typing_timeout_ms`), checked
    /// in buckets: it ends at the first multiple of `bucket_ms` of server
    /// time at or after refresh + timeout.
    Buckets { bucket_ms: u64 },
    /// A fixed time after the last refresh (Discord: 10 s).
    After { ms: u64 },
}

impl TypingExpiry {
    /// When an indicator last refreshed at `at_us` (server time, µs) stops
    /// showing, for a sender's timeout of `timeout_us`.
    pub fn ends_at_us(self, at_us: u64, timeout_us: u64) -> u64 {
        match self {
            TypingExpiry::Buckets { bucket_ms } => {
                let b = bucket_ms.max(1).saturating_mul(1000);
                at_us
                    .saturating_add(timeout_us)
                    .div_ceil(b)
                    .saturating_mul(b)
            }
            TypingExpiry::After { ms } => at_us.saturating_add(ms.saturating_mul(1000)),
        }
    }
}

/// A send limit: `burst` sends at once, then `per_s` a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub per_s: f64,
    pub burst: u32,
}

/// A per-sender rate limiter (the generic cell rate algorithm: a token
/// bucket kept as one time). A send over the limit waits until the limit
/// allows it, as a client that honours `retry_after` does (the 0.5 s that
/// Synapse holds a refused request is not added).
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    /// µs between sends at the steady rate.
    interval_us: u64,
    /// How far ahead of now the theoretical time may run (burst - 1 sends).
    slack_us: u64,
    /// The theoretical time of the next conforming send.
    tat_us: u64,
}

impl Bucket {
    /// A bucket for `limit` (`None` if it limits nothing: a rate that is
    /// not positive and finite).
    pub fn new(limit: Limit) -> Option<Bucket> {
        if !(limit.per_s.is_finite() && limit.per_s > 0.0) {
            return None;
        }
        let interval_us = (1e6 / limit.per_s).round().clamp(1.0, 1e15) as u64;
        let slack_us = interval_us.saturating_mul(u64::from(limit.burst.max(1) - 1));
        Some(Bucket {
            interval_us,
            slack_us,
            tat_us: 0,
        })
    }

    /// The send wanted at `now_us` goes at the returned time (`>= now_us`).
    pub fn take(&mut self, now_us: u64) -> u64 {
        let at = now_us.max(self.tat_us.saturating_sub(self.slack_us));
        self.tat_us = self.tat_us.max(at).saturating_add(self.interval_us);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_lets_a_burst_through_then_the_rate() {
        // Synapse's rc_message: 10 at once, then one every 5 s.
        let mut b = Bucket::new(Limit {
            per_s: 0.2,
            burst: 10,
        })
        .unwrap();
        let at: Vec<u64> = (0..12).map(|_| b.take(0)).collect();
        assert_eq!(&at[..10], &[0; 10]);
        assert_eq!(at[10], 5_000_000);
        assert_eq!(at[11], 10_000_000);
        // After a long pause the burst is back.
        let later = 100_000_000;
        assert!((0..10).all(|_| b.take(later) == later));
        assert_eq!(b.take(later), later + 5_000_000);
    }

    #[test]
    fn a_rate_that_limits_nothing_is_no_bucket() {
        for per_s in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Bucket::new(Limit { per_s, burst: 1 }).is_none(), "{per_s}");
        }
    }

    #[test]
    fn synapse_typing_ends_on_a_five_second_bucket() {
        let e = TypingExpiry::Buckets { bucket_ms: 5_000 };
        // A 1 s timeout sent at 3.2 s shows until 5 s; one at 4.5 s until 10 s.
        assert_eq!(e.ends_at_us(3_200_000, 1_000_000), 5_000_000);
        assert_eq!(e.ends_at_us(4_500_000, 1_000_000), 10_000_000);
        // A 10 s timeout: between 10 and 15 s after the refresh.
        let end = e.ends_at_us(1_000, 10_000_000);
        assert_eq!(end, 15_000_000);
        assert_eq!(
            TypingExpiry::After { ms: 10_000 }.ends_at_us(7, 0),
            10_000_007
        );
    }

    #[test]
    fn every_profile_has_the_documented_limits() {
        let m = Platform::Matrix.profile();
        assert_eq!(
            m.message_limit,
            Some(Limit {
                per_s: 0.2,
                burst: 10
            })
        );
        assert!(m.reactions_share_message_limit);
        assert!(Platform::Slack.profile().typing.is_none());
        assert!(!Platform::Telegram.profile().bots_see_bots);
        assert_eq!(
            Platform::Discord.profile().typing,
            Some(TypingExpiry::After { ms: 10_000 })
        );
        assert!(Platform::Agentchat.profile().message_limit.is_none());
    }
}
