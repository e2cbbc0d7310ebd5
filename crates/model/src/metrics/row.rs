//! One replication by name, and with its result: what a sweep plans
//! ([`Job`]) and collects ([`Row`]), and what `report` writes and `live`
//! compares. Plain data, kept here below all three so that none of them
//! imports another for it.

use super::RunResult;
use crate::floor::PolicyKind;

/// One simulation to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub point: usize,
    pub policy: PolicyKind,
    pub rep: u32,
    pub seed: u64,
}

/// A finished job.
#[derive(Debug, Clone)]
pub struct Row {
    pub job: Job,
    pub result: RunResult,
}
