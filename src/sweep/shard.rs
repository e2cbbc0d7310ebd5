//! `--shard K/N`: split a sweep's points between N processes, and the
//! `shard.toml` file a finished shard leaves for `herdsim merge`.
//!
//! Points are numbered 0.. in grid order (row-major over the sweep axes,
//! the last axis fastest). Shard `K` of `N` (0 <= K < N, zero-based, as
//! Slurm's `SLURM_ARRAY_TASK_ID` with `--array=0-(N-1)` and Kubernetes'
//! `JOB_COMPLETION_INDEX` are) runs the points `p` with `p % N == K`, every
//! policy and replication of each. Seeds depend on the point index, not on
//! the shard, so the shards together compute exactly the single run.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Name of the metadata file a finished sharded run writes beside its CSVs.
pub const SHARD_FILE: &str = "shard.toml";

/// Version of the `shard.toml` format (2: the build, the data hash and the
/// resolved scenario, so that `merge` can check every row against the plan).
pub const SHARD_FORMAT: u32 = 2;

/// Shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Whether this shard runs point `p`.
    pub fn covers(&self, point: usize) -> bool {
        point % self.count == self.index
    }

    /// The points of a grid of `total` this shard runs, ascending.
    pub fn points(&self, total: usize) -> Vec<usize> {
        (self.index..total).step_by(self.count).collect()
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let usage = || format!("`{s}` is not K/N with 0 <= K < N (e.g. 0/4; K counts from 0)");
        let (k, n) = s.split_once('/').ok_or_else(usage)?;
        let index: usize = k.trim().parse().map_err(|_| usage())?;
        let count: usize = n.trim().parse().map_err(|_| usage())?;
        if count == 0 || index >= count {
            return Err(usage());
        }
        Ok(Shard { index, count })
    }
}

/// `shard.toml`: what `herdsim merge` needs to put a shard's rows back in
/// place and to check that all shards belong to one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardMeta {
    /// [`SHARD_FORMAT`].
    pub format: u32,
    /// herdsim version that wrote it.
    pub herdsim: String,
    /// [`crate::BUILD`] of the herdsim that ran it.
    pub build: String,
    /// Scenario name (the results folder's name; `merge` checks it with
    /// the rule for a scenario's `name` before using it as a folder).
    pub scenario: String,
    /// Fingerprint of the resolved scenario and plan; equal for all shards
    /// of one run (see [`super::journal::fingerprint`]): the one of
    /// `build`, `resolved` and `data`.
    pub fingerprint: String,
    /// Hash of the empirical data files ([`super::journal::data_hash`]).
    pub data: String,
    /// K of `--shard K/N`.
    pub shard: usize,
    /// N of `--shard K/N`.
    pub shards: usize,
    /// Points in the whole grid.
    pub points_total: usize,
    /// The points this shard ran, ascending: `summary.csv` holds one block
    /// of `policies.len()` rows per point, `runs.csv` one block of
    /// `policies.len() * reps` rows, in this order.
    pub points: Vec<usize>,
    /// Policies, in row order within a point.
    pub policies: Vec<String>,
    /// Replications per point and policy.
    pub reps: u32,
    /// Sweep keys: the parameter columns after `scenario,policy`.
    pub sweep_keys: Vec<String>,
    /// The resolved scenario (sweep included), as `herdsim validate`
    /// prints it: the plan (seed, points, policies, reps) every row is
    /// checked against.
    pub resolved: String,
}

impl ShardMeta {
    /// The file text.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(format!(
            "# Written by `herdsim run --shard {}/{}` when the shard finished; read by `herdsim merge`.\n{}",
            self.shard,
            self.shards,
            toml::to_string(self)?
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("0/4".parse::<Shard>(), Ok(Shard { index: 0, count: 4 }));
        assert_eq!("3/4".parse::<Shard>(), Ok(Shard { index: 3, count: 4 }));
        for bad in ["4/4", "1/0", "a/2", "2", "-1/3", "1/2/3", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shards_partition_the_grid() {
        let n = 3;
        let mut all: Vec<usize> = (0..n)
            .flat_map(|k| Shard { index: k, count: n }.points(10))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(Shard { index: 1, count: 3 }.points(10), vec![1, 4, 7]);
        assert!(Shard { index: 1, count: 3 }.covers(7));
        assert!(Shard { index: 5, count: 8 }.points(2).is_empty());
    }
}
