//! The server side. TODO(helper): implement.

use crate::floor::policy::PolicyKind;
use crate::floor::wire::{ClientMsg, ServerMsg};

/// Server configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub policy: PolicyKind,
    /// Claim TTL in milliseconds (default 45000).
    pub ttl_ms: u64,
    /// `false` turns claim tracking off; messages are still relayed.
    pub enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

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
    Client { from: String, role: Role, msg: ClientMsg },
    Join { agent: String, channel: String },
    Leave { agent: String, channel: String },
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
    /// Claims that reached their deadline while still held.
    pub expired: u64,
    /// Holders displaced by an earlier claim.
    pub overruled: u64,
    /// Every server-to-agent send except YIELDs.
    pub relayed: u64,
}

pub struct Server {}
