//! Metrics: per-run accumulators and statistics over replications.

pub mod run;
pub mod stats;

pub use run::{METRICS, RunAccumulator, RunResult};
