//! The named arbitration policies. TODO(helper): implement, one interface.

use std::fmt;
use std::str::FromStr;

/// Which arbitration behaviour the server (and the matching client) follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyKind {
    /// No RESPONDING_TO at all: clients never claim, the server tracks nothing.
    None,
    /// The protocol as written (`responding-to.md`, MODEL.md "policy spec").
    Spec,
    /// The observed behaviour of the public agentchat server 0.36, quirks included.
    Agentchat036,
    /// Like `spec`, but a MSG leaves an "answered" marker that denies later claims.
    Tombstone,
    /// Like `spec`, but ordered by server receive time instead of `started_at`.
    ServerTime,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 5] = [
        PolicyKind::None,
        PolicyKind::Spec,
        PolicyKind::Agentchat036,
        PolicyKind::Tombstone,
        PolicyKind::ServerTime,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::None => "none",
            PolicyKind::Spec => "spec",
            PolicyKind::Agentchat036 => "agentchat-0.36",
            PolicyKind::Tombstone => "tombstone",
            PolicyKind::ServerTime => "server-time",
        }
    }
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
