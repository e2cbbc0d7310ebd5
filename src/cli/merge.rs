//! `herdsim merge`: join the results of `herdsim run --shard K/N` into the
//! single-run result.
//!
//! Each shard's folder holds `summary.csv`, `runs.csv` and `shard.toml`
//! ([`ShardMeta`]). A point's rows depend only on that point (its seeds
//! come from the master seed and the point index), so the merged files
//! are the shards' rows put back in point order: byte for byte what one
//! uninterrupted `herdsim run` writes.

use super::CliError;
use crate::floor::PolicyKind;
use crate::metrics::{METRICS, RunResult};
use crate::report::csv_out;
use crate::report::lock::FolderLock;
use crate::report::{atomic, table};
use crate::scenario::validate::check_name;
use crate::scenario::{MAX_POINTS, Scenario, csv_value, grid_picks};
use crate::sweep::journal::{self, JOURNAL_FILE};
use crate::sweep::shard::{SHARD_FILE, SHARD_FORMAT, ShardMeta};
use crate::sweep::{Job, Row, Shard, rep_seed};
use std::collections::BTreeMap;
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

/// One shard's files, read and checked against the plan they record.
struct ShardData {
    dir: PathBuf,
    meta: ShardMeta,
    plan: PlanView,
    /// runs.csv, row by row, each checked.
    rows: Vec<Row>,
    /// Shared lock on the shard's folder while it is read.
    _lock: Option<FolderLock>,
}

/// What a shard's recorded resolved scenario says about the rows: the
/// name, master seed, replications, policies and sweep axes (values as
/// the CSVs write them).
struct PlanView {
    name: String,
    seed: u64,
    reps: u32,
    policies: Vec<PolicyKind>,
    axes: Vec<(String, Vec<String>)>,
}

impl PlanView {
    fn from_resolved(text: &str) -> Result<PlanView, String> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| e.message().trim().to_string())?;
        let mut axes = Vec::new();
        for (key, v) in s.sweep.take().unwrap_or_default() {
            let values = match v {
                toml::Value::Array(items) if !items.is_empty() => {
                    items.iter().map(csv_value).collect()
                }
                _ => return Err(format!("sweep axis `{key}` is not a list of values")),
            };
            axes.push((key, values));
        }
        let policies = s.policy_kinds();
        if policies.len() != s.policies.len() || policies.is_empty() {
            return Err(format!("policies {:?} are not all known", s.policies));
        }
        Ok(PlanView {
            name: s.name,
            seed: s.seed,
            reps: s.reps,
            policies,
            axes,
        })
    }

    /// Points in the grid (saturating).
    fn points(&self) -> usize {
        self.axes
            .iter()
            .fold(1usize, |n, (_, v)| n.saturating_mul(v.len()))
    }

    /// The parameter columns of `point`.
    fn params(&self, point: usize) -> Vec<(String, String)> {
        let lens: Vec<usize> = self.axes.iter().map(|(_, v)| v.len()).collect();
        grid_picks(&lens, point)
            .iter()
            .zip(&self.axes)
            .map(|(pick, (k, v))| (k.clone(), v[*pick].clone()))
            .collect()
    }
}

fn bad(msg: String) -> CliError {
    CliError::BadInput(msg)
}

/// `:line:col` of the value of top-level `key` in `shard.toml` text.
fn key_pos(text: &str, key: &str) -> String {
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix(key)
            && let Some(value) = rest.trim_start().strip_prefix('=')
        {
            let col = line.len() - value.trim_start().len() + 1;
            return format!(":{}:{col}", i + 1);
        }
    }
    String::new()
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
    // A shard being (re)run right now is not finished: refuse it.
    let lock = FolderLock::shared(&dir).map_err(|e| bad(e.to_string()))?;
    let meta_path = dir.join(SHARD_FILE);
    let text = std::fs::read_to_string(&meta_path)
        .map_err(|e| bad(format!("{}: cannot read: {e}", meta_path.display())))?;
    let at = |key: &str| {
        format!(
            "{}{}: key `{key}`",
            meta_path.display(),
            key_pos(&text, key)
        )
    };
    // The format first: an older file lacks fields the parser wants.
    let format = toml::from_str::<toml::Table>(&text)
        .ok()
        .and_then(|t| t.get("format").and_then(toml::Value::as_integer));
    if let Some(f) = format.filter(|f| *f != i64::from(SHARD_FORMAT)) {
        return Err(bad(format!(
            "{}: format {f}, but this herdsim reads format {SHARD_FORMAT}: run the shard \
             again with this herdsim",
            at("format")
        )));
    }
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
    // It becomes a folder name under --out: the rule of a scenario's `name`.
    check_name(&meta.scenario).map_err(|m| bad(format!("{}: {m}", at("scenario"))))?;
    if meta.shards == 0 || meta.shards > MAX_POINTS || meta.shard >= meta.shards {
        return Err(bad(format!(
            "{}: shard {} of {} is not a shard K/N with 0 <= K < N <= {MAX_POINTS}",
            at("shards"),
            meta.shard,
            meta.shards
        )));
    }
    if meta.points_total > MAX_POINTS {
        return Err(bad(format!(
            "{}: {} is more than the {MAX_POINTS} points a sweep may have",
            at("points_total"),
            meta.points_total
        )));
    }
    // The recorded parts must give the recorded fingerprint.
    if journal::fingerprint_of(&meta.build, &meta.resolved, &meta.data) != meta.fingerprint {
        return Err(bad(format!(
            "{}: does not match the build, scenario and data the file records (an edited \
             file?); run the shard again",
            at("fingerprint")
        )));
    }
    if meta.build != crate::BUILD {
        return Err(bad(format!(
            "{}: the shard was computed by another build of herdsim (build {}, this is build \
             {}); merge with the herdsim that ran the shards, or run them again with this one",
            at("build"),
            meta.build,
            crate::BUILD
        )));
    }
    let plan = PlanView::from_resolved(&meta.resolved)
        .map_err(|m| bad(format!("{}: {m}", at("resolved"))))?;
    let names: Vec<&str> = plan.policies.iter().map(|p| p.name()).collect();
    let keys: Vec<&String> = plan.axes.iter().map(|(k, _)| k).collect();
    let mismatch = if plan.name != meta.scenario {
        Some("scenario")
    } else if plan.reps != meta.reps {
        Some("reps")
    } else if names != meta.policies {
        Some("policies")
    } else if keys != meta.sweep_keys.iter().collect::<Vec<_>>() {
        Some("sweep_keys")
    } else if plan.points() != meta.points_total {
        Some("points_total")
    } else {
        None
    };
    if let Some(key) = mismatch {
        return Err(bad(format!(
            "{}: does not match the resolved scenario recorded in the same file (an edited \
             file?)",
            at(key)
        )));
    }
    let expected = Shard {
        index: meta.shard,
        count: meta.shards,
    };
    if meta.points != expected.points(meta.points_total) {
        return Err(bad(format!(
            "{}: not the points of shard {expected}",
            at("points")
        )));
    }

    // runs.csv: every row's scenario, policy, parameters, replication and
    // seed must be the ones the plan puts there.
    let runs_path = dir.join("runs.csv");
    let records = read_csv(&runs_path, &csv_out::runs_header(&meta.sweep_keys))?;
    let p = plan.policies.len();
    let reps = plan.reps as usize;
    let want = meta.points.len() * p * reps;
    if records.len() != want {
        return Err(bad(format!(
            "{}: {} rows, but {} points x {p} policies x {reps} replications make {want}",
            runs_path.display(),
            records.len(),
            meta.points.len()
        )));
    }
    let mut rows = Vec::with_capacity(want);
    let nk = plan.axes.len();
    for (i, rec) in records.iter().enumerate() {
        let point = meta.points[i / (p * reps)];
        let policy = plan.policies[(i / reps) % p];
        let rep = (i % reps) as u32;
        let seed = rep_seed(plan.seed, point, rep);
        let params = plan.params(point);
        let line = i + 2;
        let mut expect: Vec<String> = vec![plan.name.clone(), policy.name().to_string()];
        expect.extend(params.into_iter().map(|(_, v)| v));
        expect.push(rep.to_string());
        expect.push(seed.to_string());
        let columns = csv_out::runs_header(&meta.sweep_keys);
        for (c, want) in expect.iter().enumerate() {
            let got = rec.get(c).unwrap_or("");
            if got != want {
                return Err(bad(format!(
                    "{}: line {line}: column {} is `{got}`, but the run's plan (point {point}, \
                     {}, replication {rep}) puts `{want}` there: the rows are out of order, \
                     edited, or from another run",
                    runs_path.display(),
                    columns[c],
                    policy.name()
                )));
            }
        }
        let mut values = [0.0; METRICS.len()];
        for (m, v) in values.iter_mut().enumerate() {
            let field = rec.get(4 + nk + m).unwrap_or("");
            *v = field.parse().map_err(|_| {
                bad(format!(
                    "{}: line {line}: `{field}` in column {} is not a number",
                    runs_path.display(),
                    METRICS[m]
                ))
            })?;
        }
        rows.push(Row {
            job: Job {
                point,
                policy,
                rep,
                seed,
            },
            result: RunResult { values },
        });
    }

    // summary.csv must be the summary of those rows.
    let summary_path = dir.join("summary.csv");
    let on_disk = std::fs::read(&summary_path)
        .map_err(|e| bad(format!("{}: cannot read: {e}", summary_path.display())))?;
    let params = |point: usize| plan.params(point);
    let recomputed = csv_out::summary_csv(
        &plan.name,
        &meta.sweep_keys,
        &csv_out::summarise(&rows, &params),
    )?;
    if on_disk != recomputed {
        let line = on_disk
            .split(|b| *b == b'\n')
            .zip(recomputed.split(|b| *b == b'\n'))
            .position(|(a, b)| a != b)
            .map_or_else(
                || {
                    on_disk
                        .split(|b| *b == b'\n')
                        .count()
                        .min(recomputed.split(|b| *b == b'\n').count())
                },
                |i| i + 1,
            );
        return Err(bad(format!(
            "{}: line {line}: does not match the replications in runs.csv beside it (edited, \
             or from another run?)",
            summary_path.display()
        )));
    }
    Ok(ShardData {
        dir,
        meta,
        plan,
        rows,
        _lock: lock,
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
            return Err(bad(format!(
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
            return Err(bad(format!(
                "shard {}/{n} is given twice: {} and {}",
                m.shard,
                shards[j].dir.display(),
                s.dir.display()
            )));
        }
    }
    if by_index.len() < n {
        let missing: Vec<String> = (0..n)
            .filter(|k| !by_index.contains_key(k))
            .take(10)
            .map(|k| format!("{k}/{n}"))
            .collect();
        let count = n - by_index.len();
        return Err(bad(format!(
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
    if args.out.exists() && !args.out.is_dir() || out_dir.exists() && !out_dir.is_dir() {
        return Err(bad(format!(
            "--out {}: {} exists and is not a folder",
            args.out.display(),
            out_dir.display()
        )));
    }

    // Rows back in plan order; the CSVs as one uninterrupted run writes them.
    let plan = &first.plan;
    let keys = first.meta.sweep_keys.clone();
    let mut rows: Vec<Row> = shards.iter().flat_map(|s| s.rows.iter().cloned()).collect();
    crate::sweep::sort_rows(&mut rows, &plan.policies);
    let params = |point: usize| plan.params(point);
    let summary = csv_out::summarise(&rows, &params);
    let runs_csv = csv_out::runs_csv(&plan.name, &keys, &rows, &params)?;
    let summary_csv = csv_out::summary_csv(&plan.name, &keys, &summary)?;
    let _lock = super::run::lock_folder(&out_dir, args.quiet)?;
    atomic::write(&out_dir.join("runs.csv"), &runs_csv)?;
    atomic::write(&out_dir.join("summary.csv"), &summary_csv)?;
    // The comparison figure an unsharded run draws next to its CSVs.
    if !keys.is_empty() && !args.no_plot {
        let png = out_dir.join("comparison.png");
        if let Err(e) =
            crate::report::plot::comparison_figure(&out_dir.join("summary.csv"), &png, None)
        {
            super::note(format_args!(
                "herdsim: warning: could not draw {}: {e:#}",
                png.display()
            ));
        }
    }
    if !args.quiet {
        super::print_out(&table::render(&keys, &summary))?;
        super::note(format_args!(
            "herdsim: merged {n} shard{} of `{}` ({} points); wrote {}",
            if n == 1 { "" } else { "s" },
            first.meta.scenario,
            first.meta.points_total,
            out_dir.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}
