//! Metrics: per-run accumulators and statistics over replications.

#[cfg(feature = "wip")]
pub mod run;
pub mod stats;

#[cfg(feature = "wip")]
pub use run::{METRICS, RunAccumulator, RunResult};
