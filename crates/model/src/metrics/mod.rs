//! Metrics: per-run accumulators, statistics over replications, and one
//! replication by name and result ([`Job`], [`Row`]).

pub mod catalogue;
pub mod row;
pub mod run;
pub mod stats;

pub use catalogue::{CATALOGUE, Metric, metric};
pub use row::{Job, Row};
pub use run::{METRICS, RunAccumulator, RunResult, SCHEME_METRICS};
