//! Schemes: which agents may answer a channel message at all, decided by
//! each agent before any floor policy (docs/schemes.md). The floor policy
//! (`spec`, `none`, ...) still arbitrates among the agents that do.

use serde::{Deserialize, Serialize};

/// Who answers a channel message (`schemes.scheme`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Every agent decides for itself (`respond_p`): the model without a
    /// scheme, which claims (and `none`) run on.
    #[default]
    Open,
    /// One owner per message, by a hash of its id over the agents.
    Owner,
    /// Only the @mentioned agent (or `schemes.default_agent`) answers.
    Mentions,
    /// A model call (the selector, one extra actor) picks who answers each
    /// unmentioned operator post.
    Selector,
}

impl Scheme {
    /// The scheme's name in a scenario.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Open => "open",
            Scheme::Owner => "owner",
            Scheme::Mentions => "mentions",
            Scheme::Selector => "selector",
        }
    }

    /// Every scheme, in the order docs/schemes.md presents them.
    pub const ALL: [Scheme; 4] = [
        Scheme::Open,
        Scheme::Owner,
        Scheme::Mentions,
        Scheme::Selector,
    ];

    /// The scheme named `name` in a scenario, if any.
    pub fn from_name(name: &str) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// One agent's place under a scheme, and its cooldown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gate {
    pub scheme: Scheme,
    /// This agent's index among all the scenario's agents.
    pub seat: u32,
    /// The number of agents (the owner hash is over these).
    pub seats: u32,
    /// Under `mentions`: this agent answers the unmentioned operator posts.
    pub default_agent: bool,
    /// After it answers, the agent ignores channel messages this long
    /// (driver µs; 0: no cooldown).
    pub cooldown_us: u64,
    /// Under `selector`: this actor is the selector, not an answering agent.
    pub selector: bool,
    /// The selector's fallback: a new selection when no answer to the
    /// question was seen this long after the last one (driver µs; 0: none).
    pub fallback_us: u64,
    /// At most this many fallbacks per question.
    pub max_fallbacks: u32,
    /// The loop breaker: after this many agents' messages in the channel
    /// since the last operator post, answer no agent's message until the
    /// next operator post (0: off).
    pub breaker_after: u32,
}

/// The owner of the message whose wire id is `id`, as an agent index in
/// `0..seats`: FNV-1a (64 bits) of the id's bytes, modulo `seats`. Stable
/// across machines and runs; `seats = 0` owns nothing (`u32::MAX`).
pub fn owner_of(id: &str, seats: u32) -> u32 {
    if seats == 0 {
        return u32::MAX;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(seats)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_stable_and_spread() {
        // FNV-1a of "m1" mod 5, pinned: the hash is part of the model.
        assert_eq!(owner_of("m1", 5), 1);
        assert_eq!(owner_of("m1", 0), u32::MAX);
        assert_eq!(owner_of("anything", 1), 0);
        let mut seen = [0u32; 5];
        for m in 1..=5000 {
            seen[owner_of(&format!("m{m}"), 5) as usize] += 1;
        }
        // Each of 5 owners gets 1000 of 5000 ids in expectation; sd about
        // 28, so 850..1150 is over 5 sd.
        assert!(seen.iter().all(|&n| (850..=1150).contains(&n)), "{seen:?}");
    }

    #[test]
    fn every_scheme_has_its_name() {
        for s in Scheme::ALL {
            assert_eq!(Scheme::from_name(s.name()), Some(s));
        }
        assert_eq!(Scheme::from_name("nobody"), None);
    }
}
