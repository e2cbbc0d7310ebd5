//! herdsim's lab: the model run many times and read back.
//!
//! - [`sweep`]: points x policies x replications, planned, run (rayon),
//!   journalled, sharded and merged; results through `report`;
//! - [`tune`]: the search for the CSMA window and TTL a channel needs;
//! - [`calibrate`]: a scenario fitted to what a channel member recorded;
//! - [`term`]: the terminal side of the front ends (progress bars, Ctrl-C).
//!
//! On `herdsim-model` and `herdsim-report`, whose modules are re-exported
//! here under their names. No tokio, rustls or clap: the network face
//! (`herdsim-net`) sits above this crate and may use it, never the other
//! way round.

/// This build's identity: a hash of the simulation source, `Cargo.lock`,
/// the compiler and the target (see this crate's `build.rs`). Journals and
/// shard results carry it; results of two builds are never mixed.
pub const BUILD: &str = env!("HERDSIM_BUILD");

/// `herdsim --version`: the version (the workspace's crates share one) and
/// [`BUILD`].
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (build ",
    env!("HERDSIM_BUILD"),
    ")"
);

pub use herdsim_model::{
    agent, dist, engine, error, files, floor, limits, metrics, model, names, progress, scenario,
};
pub use herdsim_report::report;

pub mod calibrate;
pub mod sweep;
pub mod term;
pub mod tune;
