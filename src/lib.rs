//! herdsim: a deterministic discrete-event simulator of RESPONDING_TO floor
//! control among LLM agents sharing a chat channel.
//!
//! Data flows one way (see README.md for the picture):
//!
//! ```text
//! scenario -> sweep -> model -> metrics -> report
//!                        |-- agent  (Agent, Workload: sans-IO actors)
//!                        |     `-- floor::Client
//!                        |-- engine (virtual clock; knows no agents)
//!                        `-- floor::Server
//! ```
//!
//! `floor` is the real arbitration logic and depends on nothing else in the
//! crate; `agent` is everything an agent decides (inputs and the time in,
//! actions out) and depends only on `floor` and the distributions; `engine`
//! knows nothing of agents; `model`'s world only wires actors, links, the
//! server and the engine.
//! `serve` is the live side: a WebSocket chat server around `floor::Server`
//! (real time and sockets, never on the simulator's path); `arbitrate` and
//! `serve` share one event path (`serve::events`). `live` runs the agent
//! actors (`agent`) against a real server with real timers and measures the
//! same metrics from what it observes (real time and sockets too); `tls`
//! is their TLS (`live --url wss://`, `serve --tls-cert`).

/// This build's identity: a hash of the simulation source, `Cargo.lock`,
/// the compiler and the target (see `build.rs`). Journals and shard
/// results carry it; results of two builds are never mixed.
pub const BUILD: &str = env!("HERDSIM_BUILD");

pub mod agent;
pub mod calibrate;
pub mod cli;
pub mod dist;
pub mod engine;
pub mod error;
pub mod files;
pub mod floor;
pub mod limits;
pub mod live;
pub mod metrics;
pub mod model;
pub mod names;
pub mod observe;
pub mod progress;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod serve;
pub mod sweep;
pub mod term;
pub mod tls;
pub mod tune;
