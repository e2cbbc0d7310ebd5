//! `herdsim merge`: join the results of `herdsim run --shard K/N` into the
//! single-run result.
//!
//! Each shard's folder holds `summary.csv`, `runs.csv` and `shard.toml`
//! ([`ShardMeta`]). A point's rows depend only on that point (its seeds
//! come from the master seed and the point index), so the merged files
//! are the shards' rows put back in point order: byte for byte what one
//! uninterrupted `herdsim run` writes.

use super::CliError;
use crate::metrics::METRICS;
use crate::metrics::stats::Summary;
use crate::report::csv_out::{self, SummaryRow};
use crate::report::{atomic, table};
use crate::sweep::journal::JOURNAL_FILE;
use crate::sweep::shard::{SHARD_FILE, SHARD_FORMAT, ShardMeta};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Results folders of the shards (`<out>/<name>` of each `run --shard`,
    /// or its `<out>` when it holds one scenario).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Output directory; the merged files go to `<out>/<scenario name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Do not draw `comparison.png` for a sweep (as `run` does).
    #[arg(long)]
    pub no_plot: bool,
    /// No table on stdout and no note on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// One shard's files, read and checked.
struct ShardData {
    dir: PathBuf,
    meta: ShardMeta,
    summary: Vec<csv::StringRecord>,
    runs: Vec<csv::StringRecord>,
}

fn bad(msg: String) -> CliError {
    CliError::BadInput(msg)
}

/// The folder holding `shard.toml`: `dir` itself, or its only subfolder
/// that has one.
fn shard_dir(dir: &Path) -> Result<PathBuf, CliError> {
    if dir.join(SHARD_FILE).is_file() {
        return Ok(dir.to_path_buf());
    }
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().join(SHARD_FILE).is_file() {
                found.push(e.path());
            }
        }
    }
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => {
            let why = if dir.join(JOURNAL_FILE).is_file() {
                "the shard has not finished: complete it with `herdsim run ... --shard K/N --resume`"
            } else if !dir.exists() {
                "no such folder"
            } else {
                "not the results folder of a finished `herdsim run --shard K/N`"
            };
            Err(bad(format!("{}: no {SHARD_FILE}: {why}", dir.display())))
        }
        _ => Err(bad(format!(
            "{}: holds several shard results ({}); name one of them",
            dir.display(),
            found
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn read_csv(path: &Path, expected_header: &[String]) -> Result<Vec<csv::StringRecord>, CliError> {
    let bytes =
        std::fs::read(path).map_err(|e| bad(format!("{}: cannot read: {e}", path.display())))?;
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bytes.as_slice());
    let header = r
        .headers()
        .map_err(|e| bad(format!("{}: {e}", path.display())))?
        .clone();
    if header.iter().ne(expected_header.iter().map(String::as_str)) {
        return Err(bad(format!(
            "{}: line 1: the header is not the one this herdsim writes for these sweep keys \
             (another herdsim version, or an edited file?)",
            path.display()
        )));
    }
    r.records()
        .map(|rec| rec.map_err(|e| bad(format!("{}: {e}", path.display()))))
        .collect()
}

fn read_shard(dir: &Path) -> Result<ShardData, CliError> {
    let dir = shard_dir(dir)?;
    let meta_path = dir.join(SHARD_FILE);
    let text = std::fs::read_to_string(&meta_path)
        .map_err(|e| bad(format!("{}: cannot read: {e}", meta_path.display())))?;
    let meta: ShardMeta = toml::from_str(&text).map_err(|e| {
        let pos = e
            .span()
            .map(|s| {
                let (l, c) = crate::scenario::line_col(&text, s.start);
                format!(":{l}:{c}")
            })
            .unwrap_or_default();
        bad(format!(
            "{}{pos}: {}",
            meta_path.display(),
            e.message().trim()
        ))
    })?;
    if meta.format != SHARD_FORMAT {
        return Err(bad(format!(
            "{}: key `format`: {} is not the format this herdsim reads ({SHARD_FORMAT})",
            meta_path.display(),
            meta.format
        )));
    }
    let p = meta.policies.len();
    let reps = meta.reps as usize;
    let summary = read_csv(
        &dir.join("summary.csv"),
        &csv_out::summary_header(&meta.sweep_keys),
    )?;
    let runs = read_csv(
        &dir.join("runs.csv"),
        &csv_out::runs_header(&meta.sweep_keys),
    )?;
    let check_rows = |name: &str, rows: &[csv::StringRecord], per_point: usize| {
        let want = meta.points.len() * per_point;
        if rows.len() != want {
            return Err(bad(format!(
                "{}: {} rows, but {} points x {per_point} make {want}",
                dir.join(name).display(),
                rows.len(),
                meta.points.len()
            )));
        }
        for (i, r) in rows.iter().enumerate() {
            let policy = &meta.policies[(i / (per_point / p)) % p];
            if r.get(0) != Some(meta.scenario.as_str()) || r.get(1) != Some(policy.as_str()) {
                return Err(bad(format!(
                    "{}: line {}: expected scenario `{}` and policy `{policy}`",
                    dir.join(name).display(),
                    i + 2,
                    meta.scenario
                )));
            }
        }
        Ok(())
    };
    if meta.shards == 0 || meta.points_total > crate::scenario::MAX_POINTS {
        return Err(bad(format!(
            "{}: key `shards` or `points_total` out of range",
            meta_path.display()
        )));
    }
    if p == 0 || reps == 0 {
        return Err(bad(format!(
            "{}: lists no policies or no replications",
            meta_path.display()
        )));
    }
    check_rows("summary.csv", &summary, p)?;
    check_rows("runs.csv", &runs, p * reps)?;
    Ok(ShardData {
        dir,
        meta,
        summary,
        runs,
    })
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let mut shards = Vec::with_capacity(args.dirs.len());
    for d in &args.dirs {
        shards.push(read_shard(d)?);
    }
    let first = &shards[0];
    let n = first.meta.shards;
    // All shards of one run, each once, none missing.
    let mut by_index: Vec<Option<usize>> = vec![None; n];
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
            return Err(bad(format!(
                "{}: key `fingerprint`: shard {}/{} of `{}` ({}) is not from the same run as {} \
                 (shard {}/{} of `{}`, {}): same scenario, options and herdsim version needed",
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
        let expected = crate::sweep::Shard {
            index: m.shard,
            count: n,
        };
        if m.shard >= n || m.points != expected.points(m.points_total) {
            return Err(bad(format!(
                "{}: key `points`: not the points of shard {}/{n}",
                s.dir.join(SHARD_FILE).display(),
                m.shard
            )));
        }
        if let Some(j) = by_index[m.shard] {
            return Err(bad(format!(
                "shard {}/{n} is given twice: {} and {}",
                m.shard,
                shards[j].dir.display(),
                s.dir.display()
            )));
        }
        by_index[m.shard] = Some(i);
    }
    let missing: Vec<String> = by_index
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(k, _)| format!("{k}/{n}"))
        .collect();
    if !missing.is_empty() {
        return Err(bad(format!(
            "shard{} {} of `{}` {} missing: merge needs all {n}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            first.meta.scenario,
            if missing.len() == 1 { "is" } else { "are" },
        )));
    }
    let out_dir = args.out.join(&first.meta.scenario);
    for s in &shards {
        if same_dir(&out_dir, &s.dir) {
            return Err(bad(format!(
                "--out {}: would overwrite the shard in {}; choose another --out",
                args.out.display(),
                s.dir.display()
            )));
        }
    }

    // Rows back in point order.
    let p = first.meta.policies.len();
    let reps = first.meta.reps as usize;
    let keys = first.meta.sweep_keys.clone();
    let mut summary = csv::Writer::from_writer(Vec::new());
    let mut runs = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| CliError::Failure(e.into());
    summary
        .write_record(csv_out::summary_header(&keys))
        .map_err(csv_err)?;
    runs.write_record(csv_out::runs_header(&keys))
        .map_err(csv_err)?;
    let mut table_rows = Vec::new();
    for point in 0..first.meta.points_total {
        let Some(s) = by_index[point % n].map(|i| &shards[i]) else {
            continue;
        };
        let Ok(b) = s.meta.points.binary_search(&point) else {
            continue;
        };
        for rec in &s.summary[b * p..(b + 1) * p] {
            summary.write_record(rec).map_err(csv_err)?;
            table_rows.push(
                summary_row(point, &keys, rec, reps)
                    .map_err(|m| bad(format!("{}: {m}", s.dir.join("summary.csv").display())))?,
            );
        }
        for rec in &s.runs[b * p * reps..(b + 1) * p * reps] {
            runs.write_record(rec).map_err(csv_err)?;
        }
    }
    let summary = summary
        .into_inner()
        .map_err(|e| CliError::Failure(anyhow::anyhow!("{e}")))?;
    let runs = runs
        .into_inner()
        .map_err(|e| CliError::Failure(anyhow::anyhow!("{e}")))?;
    atomic::write(&out_dir.join("runs.csv"), &runs)?;
    atomic::write(&out_dir.join("summary.csv"), &summary)?;
    // The comparison figure an unsharded run draws next to its CSVs.
    if !keys.is_empty() && !args.no_plot {
        let png = out_dir.join("comparison.png");
        if let Err(e) =
            crate::report::plot::comparison_figure(&out_dir.join("summary.csv"), &png, None)
        {
            eprintln!("herdsim: warning: could not draw {}: {e:#}", png.display());
        }
    }
    if !args.quiet {
        print!("{}", table::render(&keys, &table_rows));
        eprintln!(
            "herdsim: merged {n} shard{} of `{}` ({} points); wrote {}",
            if n == 1 { "" } else { "s" },
            first.meta.scenario,
            first.meta.points_total,
            out_dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A summary.csv record back as a table row.
fn summary_row(
    point: usize,
    keys: &[String],
    rec: &csv::StringRecord,
    reps: usize,
) -> Result<SummaryRow, String> {
    let field = |i: usize| rec.get(i).unwrap_or("");
    let params = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), field(2 + i).to_string()))
        .collect();
    let base = 3 + keys.len();
    let mut stats = Vec::with_capacity(METRICS.len());
    for (m, name) in METRICS.iter().enumerate() {
        let num = |i: usize| -> Result<f64, String> {
            field(i)
                .parse()
                .map_err(|_| format!("`{}` in column {name} is not a number", field(i)))
        };
        // An empty CI cell: fewer than two values went into the mean (one
        // replication, or none with a value), so the CI is unknown.
        let mean = num(base + 2 * m)?;
        let (ci95, n) = if field(base + 2 * m + 1).is_empty() {
            (0.0, usize::from(!mean.is_nan()).min(reps))
        } else {
            (num(base + 2 * m + 1)?, reps)
        };
        stats.push(Summary { mean, ci95, n });
    }
    Ok(SummaryRow {
        point,
        params,
        policy: field(1).to_string(),
        reps,
        stats,
    })
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}
