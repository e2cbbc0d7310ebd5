//! Merging the results of `herdsim run --shard K/N` into the single-run
//! result: the library side of `herdsim merge`.
//!
//! Each shard's folder holds `summary.csv`, `runs.csv` and `shard.toml`
//! ([`ShardMeta`](super::shard::ShardMeta)); [`read::read_shard`] checks
//! all three. A point's rows depend only on that point (its seeds come from
//! the master seed and the point index), so the merged files are the
//! shards' rows put back in point order: byte for byte what one
//! uninterrupted run writes.

pub mod read;

use super::outputs::{self, Tables};
use super::shard::SHARD_FILE;
use super::{Error, Row};
use crate::progress::Observer;
use crate::report::SummaryRow;
use read::{ShardData, read_shard};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A finished merge.
#[derive(Debug)]
pub struct Merged {
    /// Where the merged files are: `<out>/<scenario>`.
    pub dir: PathBuf,
    /// The scenario's name.
    pub scenario: String,
    /// How many shards the run had (all were merged).
    pub shards: usize,
    /// Points of the whole sweep.
    pub points: usize,
    /// The sweep keys (the parameter columns).
    pub keys: Vec<String>,
    /// `summary.csv`, row by row.
    pub summary: Vec<SummaryRow>,
}

/// Read the shards in `dirs`, check they are all the shards of one run,
/// and write the merged `runs.csv` and `summary.csv` (and, with `plot`,
/// the comparison figure of a sweep) to `<out>/<scenario>/`.
pub fn merge(
    dirs: &[PathBuf],
    out: &Path,
    plot: bool,
    obs: &dyn Observer,
) -> Result<Merged, Error> {
    let shards = dirs
        .iter()
        .map(|d| read_shard(d))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first) = shards.first() else {
        return Err(Error::bad("merge needs the folders of the shards"));
    };
    check_complete(&shards)?;
    let dir = out.join(&first.meta.scenario);
    for s in &shards {
        if same_dir(&dir, &s.dir) {
            return Err(Error::Input(format!(
                "--out {}: would overwrite the shard in {}; choose another --out",
                out.display(),
                s.dir.display()
            )));
        }
    }
    outputs::check_folders(
        out,
        &dir,
        &["runs.csv", "summary.csv", "comparison.png", "labels.toml"],
    )?;

    // Rows back in plan order; the CSVs as one uninterrupted run writes them.
    let plan = &first.plan;
    let mut rows: Vec<Row> = shards.iter().flat_map(|s| s.rows.iter().cloned()).collect();
    let params = |point: usize| plan.params(point);
    let keys = first.meta.sweep_keys.clone();
    let tables = Tables::of(&plan.name, keys, &mut rows, &plan.policies, &params)?;
    let _lock = outputs::lock_results(&dir, obs)?;
    tables.write(&dir)?;
    let source = format!("scenario `{}`", plan.name);
    outputs::write_labels(&dir, &source, &plan.labels)?;
    if !tables.keys.is_empty() && plot {
        let _ = outputs::draw_comparison(&dir, obs);
    }
    Ok(Merged {
        dir,
        scenario: first.meta.scenario.clone(),
        shards: first.meta.shards,
        points: first.meta.points_total,
        keys: tables.keys,
        summary: tables.summary,
    })
}

/// All shards of one run, each once, none missing.
fn check_complete(shards: &[ShardData]) -> Result<(), Error> {
    let first = &shards[0];
    let n = first.meta.shards;
    let mut by_index: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, s) in shards.iter().enumerate() {
        let m = &s.meta;
        let same_run = m.fingerprint == first.meta.fingerprint
            && m.scenario == first.meta.scenario
            && m.shards == n
            && m.points_total == first.meta.points_total
            && m.policies == first.meta.policies
            && m.reps == first.meta.reps
            && m.sweep_keys == first.meta.sweep_keys;
        if !same_run {
            return Err(Error::Input(format!(
                "{}: key `fingerprint`: shard {}/{} of `{}` ({}) is not from the same run as {} \
                 (shard {}/{} of `{}`, {}): same scenario, options and herdsim build needed",
                s.dir.join(SHARD_FILE).display(),
                m.shard,
                m.shards,
                m.scenario,
                m.fingerprint,
                first.dir.display(),
                first.meta.shard,
                n,
                first.meta.scenario,
                first.meta.fingerprint
            )));
        }
        if let Some(j) = by_index.insert(m.shard, i) {
            return Err(Error::Input(format!(
                "shard {}/{n} is given twice: {} and {}",
                m.shard,
                shards[j].dir.display(),
                s.dir.display()
            )));
        }
    }
    if by_index.len() == n {
        return Ok(());
    }
    let missing: Vec<String> = (0..n)
        .filter(|k| !by_index.contains_key(k))
        .take(10)
        .map(|k| format!("{k}/{n}"))
        .collect();
    let count = n - by_index.len();
    Err(Error::Input(format!(
        "shard{} {}{} of `{}` {} missing: merge needs all {n}",
        if count == 1 { "" } else { "s" },
        missing.join(", "),
        if count > missing.len() {
            format!(" and {} more", count - missing.len())
        } else {
            String::new()
        },
        first.meta.scenario,
        if count == 1 { "is" } else { "are" },
    )))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}
