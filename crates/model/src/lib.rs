//! herdsim's model: everything a simulated run needs, and nothing of the
//! runtime, the network, the plots or the command line (no tokio, rustls,
//! plotters or clap: `tests/workspace.rs` checks it with `cargo tree`).
//!
//! Inside the crate the modules still sit on layers, each using only the
//! ones below (docs/architecture.md):
//!
//! ```text
//!  4    model error        the world (actors, links, server, engine); the two errors
//!  3    scenario           scenario files: parse, defaults, --set, sweep grid, validate
//!  2    agent carrier      the agent and the operator as sans-IO actors; claim
//!                          carriers and platform profiles
//!  1    metrics dist       per-run measures and statistics; distributions
//!  0    files limits names progress
//!                          file access; bounds; agent and message ids; the
//!                          progress Observer
//! ```
//!
//! Below them, two crates re-exported under their module names: [`floor`]
//! (`herdsim-floor`, the arbitration, both halves, sans-IO) and [`engine`]
//! (`herdsim-engine`, the event queue on a virtual clock).

pub mod agent;
pub mod carrier;
pub mod dist;
/// The event queue on a virtual clock: the `herdsim-engine` crate.
pub use herdsim_engine as engine;
pub mod error;
pub mod files;
/// The floor-control logic, both halves, sans-IO: the `herdsim-floor` crate.
pub use herdsim_floor as floor;
pub mod limits;
pub mod metrics;
pub mod model;
pub mod names;
pub mod progress;
pub mod scenario;
