//! herdsim: a deterministic discrete-event simulator of RESPONDING_TO floor
//! control among LLM agents sharing a chat channel.
//!
//! Data flows one way (see README.md for the picture):
//! `scenario` -> `sweep` -> `model` (drives `engine` and `floor`) ->
//! `metrics` -> `report`. `floor` is the real arbitration logic and depends
//! on nothing else in the crate; `engine` knows nothing of agents.
//! `serve` is the live side: a WebSocket chat server around `floor::Server`
//! (real time and sockets, never on the simulator's path); `arbitrate` and
//! `serve` share one event path (`serve::events`).

/// This build's identity: a hash of the simulation source, `Cargo.lock`,
/// the compiler and the target (see `build.rs`). Journals and shard
/// results carry it; results of two builds are never mixed.
pub const BUILD: &str = env!("HERDSIM_BUILD");

pub mod agent;
pub mod cli;
pub mod engine;
pub mod floor;
pub mod metrics;
pub mod model;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod serve;
pub mod sweep;
pub mod tune;
