//! `floor`: the RESPONDING_TO / YIELD floor-control logic, sans-IO.
//!
//! This module is the *real* arbitration logic a production chat server (and
//! a real agent) could embed. It knows nothing of the simulator: it takes
//! messages plus the current time and returns the messages to send. No
//! clocks, no sockets, no threads, no randomness. It depends on nothing else
//! in this crate.
//!
//! - [`naming`]: how agents, channels and messages are named: wire text
//!   ([`Text`], the default) or the embedder's own handles (small integers
//!   in the simulator); the state machines are generic over it.
//! - [`wire`]: the JSON wire protocol (RESPONDING_TO, YIELD, MSG,
//!   FLOOR_CLAIMED, ERROR) with strict, panic-free decoding.
//! - [`policy`]: the named arbitration policies (`none`, `spec`,
//!   `agentchat-0.36`, `tombstone`, `server-time`).
//! - [`server`]: the server side: channel membership, the claim table, relay.
//! - [`relay_memory`]: what the claim guard remembers of the relays.
//! - [`client`]: the agent side: CSMA wait, claim, infer, abort, reply.
//! - [`ttl_audit`]: what a run's decisions asked of the claim TTL.

pub mod client;
pub mod naming;
pub mod policy;
pub mod relay_memory;
pub mod server;
pub mod ttl_audit;
pub mod wire;

pub use client::{Action, Client, ClientConfig, SkipReason};
pub use naming::{Naming, Place, Text};
pub use policy::PolicyKind;
pub use server::{
    ClaimGuard, ClaimInfo, Config, ConfigError, Delivery, Input, Outgoing, Role, Sends, Server,
    Stats,
};
pub use ttl_audit::TtlAudit;
pub use wire::{ClientMsg, DecodeError, ServerMsg, YieldDetail};

#[cfg(test)]
pub(crate) mod proptests;
