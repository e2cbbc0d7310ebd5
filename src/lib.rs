//! herdsim: a deterministic discrete-event simulator of RESPONDING_TO floor
//! control among LLM agents sharing a chat channel.
//!
//! Data flows one way: a scenario is planned by `sweep`, run by `model`
//! (agents, engine and floor server wired together) into `metrics`, and
//! written by `report`. Imports run down: the modules sit on layers, and
//! each uses only modules on layers below its own, never its own layer or
//! one above (`tests/layers.rs` declares the layers, checks every
//! `crate::` path against them and this picture against its list; README.md's
//! code map says what each module holds):
//!
//! ```text
//! layer  modules            what they are
//!  13    cli                flags to one library call; results to an exit status
//!  12    observe            a passive channel member, then calibrate on what it saw
//!  11    calibrate          a scenario fitted to what a member saw
//!  10    live               the agents against a real server, in real time; --compare
//!   9    serve              a WebSocket chat server around floor::Server
//!   8    tls replay         TLS for live and serve; a server log through any policy
//!   7    term tune          the terminal side of the front ends; the CSMA/TTL search
//!   6    sweep              points x policies x reps: plan, run, journal, shard, merge
//!   5    report             results as files, tables and figures (one output API)
//!   4    model error        the world (actors, links, server, engine); the two errors
//!   3    scenario           scenario files: parse, defaults, --set, sweep grid, validate
//!   2    agent              the agent and the operator as sans-IO actors
//!   1    metrics dist       per-run measures and statistics; distributions
//!   0    files limits names progress allocator
//!                           file access; bounds; agent and message ids; the
//!                           progress Observer; the allocator the binaries install
//! ```
//!
//! Below every layer, two crates of the workspace (`crates/`) that know
//! nothing of herdsim, re-exported here under their old module names:
//! [`floor`] (`herdsim-floor`, the real arbitration logic, both halves,
//! sans-IO) and [`engine`] (`herdsim-engine`, the event queue on a virtual
//! clock). Cargo keeps them below: neither depends on this crate. `agent` is everything an agent decides (inputs and the time in,
//! actions out) and depends only on `floor` and `dist`; `engine` knows
//! nothing of agents; `model`'s world only wires actors, links, the server
//! and the engine.
//! `serve` is the live side: a WebSocket chat server around `floor::Server`
//! (real time and sockets, never on the simulator's path); `arbitrate` and
//! `serve` share one event path (`replay::events`). `live` runs the agent
//! actors (`agent`) against a real server with real timers and measures the
//! same metrics from what it observes (real time and sockets too); `tls`
//! is their TLS (`live --url wss://`, `serve --tls-cert`).

/// This build's identity: a hash of the simulation source, `Cargo.lock`,
/// the compiler and the target (see `build.rs`). Journals and shard
/// results carry it; results of two builds are never mixed.
pub const BUILD: &str = env!("HERDSIM_BUILD");

pub mod agent;
pub mod allocator;
pub mod calibrate;
pub mod cli;
pub mod dist;
/// The event queue on a virtual clock: the `herdsim-engine` crate.
pub use herdsim_engine as engine;
pub mod error;
pub mod files;
/// The floor-control logic, both halves, sans-IO: the `herdsim-floor` crate.
pub use herdsim_floor as floor;
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
