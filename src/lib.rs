//! herdsim: a deterministic discrete-event simulator of RESPONDING_TO floor
//! control among LLM agents sharing a chat channel.
//!
//! Data flows one way: a scenario is planned by `sweep`, run by `model`
//! (agents, engine and floor server wired together) into `metrics`, and
//! written by `report`. The code sits in the workspace's crates, each
//! depending only on the ones below it, so Cargo keeps the layers
//! (docs/architecture.md; README.md's code map says what each module
//! holds):
//!
//! ```text
//! crate            modules
//! herdsim          cli allocator      flags to one library call; the allocator
//! herdsim-net      serve live observe tls replay ui
//!                                     real time and sockets
//! herdsim-lab      sweep tune calibrate term
//!                                     the model run many times and read back
//! herdsim-report   report             results as files, tables and figures
//! herdsim-model    model error scenario agent metrics dist
//!                  files limits names progress
//!                                     everything a simulated run needs
//! herdsim-floor    (floor)            the arbitration, both halves, sans-IO
//! herdsim-engine   (engine)           the event queue on a virtual clock
//! ```
//!
//! Every module is re-exported here under its old path (`herdsim::scenario`,
//! `herdsim::floor`, `herdsim::live`, ...), so code written against the one
//! crate herdsim used to be still compiles.

pub use herdsim_lab::{BUILD, calibrate, sweep, term, tune};
pub use herdsim_model::{
    agent, carrier, dist, engine, error, files, floor, limits, metrics, model, names, progress,
    scenario,
};
pub use herdsim_net::{live, observe, replay, serve, tls, ui};
pub use herdsim_report::report;

pub mod allocator;
pub mod cli;
