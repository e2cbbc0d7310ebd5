//! herdsim's reports: a run's results as files (`summary.csv`, `runs.csv`),
//! terminal tables and figures, through one output API ([`report`]).
//!
//! On `herdsim-model`, whose modules are re-exported here under their
//! names, so that `crate::metrics`, `crate::scenario` and the like read as
//! they did when all of herdsim was one crate. No tokio, no clap.

pub use herdsim_model::{
    agent, dist, engine, error, files, floor, limits, metrics, model, names, progress, scenario,
};
pub mod report;
