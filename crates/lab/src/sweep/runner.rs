//! Running a plan: the one entry point of `herdsim run` (and of any
//! program that wants a sweep's results written as `run` writes them).
//!
//! [`run`] takes a checked [`Plan`] and [`Options`], and does, in order:
//! every remaining check of the options and the output paths (nothing is
//! written or simulated before they pass: [`prepare`]), then
//! ([`Run::start`]) the lock of the results folder,
//! the replications a journal of an interrupted run already holds
//! ([`resume`]), the remaining replications (each appended
//! to `<out>/<name>/runs.journal` as it finishes), then `runs.csv`,
//! `summary.csv`, `labels.toml` (a scenario that labels its sweep),
//! `shard.toml` (a shard), the trace, the comparison figure and
//! `run.toml` (see [`super::record`]: results of another plan in the folder
//! are replaced, with what they left), and last the journal's removal. A set `stop` flag (Ctrl-C)
//! ends it early with [`Outcome::Interrupted`]: the journal keeps every
//! finished replication for a later [`JournalMode::Resume`].

use super::journal::{self, Header, JOURNAL_FILE};
use super::outputs::{self, Tables};
use super::progress::Tally;
use super::record::{self, Record};
use super::resume::{self, Jobs};
use super::shard::{SHARD_FILE, SHARD_FORMAT, ShardMeta};
use super::{Error, Job, MAX_THREADS, Plan, Row, Shard, memory};
use crate::floor::PolicyKind;
use crate::metrics::METRICS;
use crate::model::{Prepared, TraceBuf, simulate};
use crate::progress::Observer;
use crate::report::{LABELS_FILE, SummaryRow, same_path, write_atomic};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

pub use super::resume::JournalMode;

/// Most replications one invocation runs (its plan is held in memory).
pub const MAX_JOBS: usize = 100_000_000;

/// How to run a plan (the options of `herdsim run`).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Results go to `<out>/<plan name>/`.
    pub out: PathBuf,
    /// Run only this shard's points.
    pub shard: Option<Shard>,
    /// Worker threads, 1 to [`MAX_THREADS`].
    pub threads: usize,
    /// What to do with the journal of an interrupted run.
    pub journal: JournalMode,
    /// Write every message and state change of one replication here.
    pub trace: Option<PathBuf>,
    /// Policy of the traced replication (a name; default: the first).
    pub trace_policy: Option<String>,
    /// Draw `comparison.png` (not for a shard).
    pub plot: bool,
    /// Memory the run may use, in bytes.
    pub budget: u64,
}

/// How a run ended (an error aside).
#[derive(Debug)]
pub enum Outcome {
    /// The results are written.
    Finished(Finished),
    /// Stopped by the `stop` flag: `saved` of `total` replications are in
    /// the `journal`.
    Interrupted {
        saved: usize,
        total: usize,
        journal: PathBuf,
    },
}

/// A finished run.
#[derive(Debug)]
pub struct Finished {
    /// The results folder.
    pub dir: PathBuf,
    /// The sweep keys (the parameter columns).
    pub keys: Vec<String>,
    /// `summary.csv`, row by row.
    pub summary: Vec<SummaryRow>,
    /// Replications computed by this call.
    pub runs: usize,
    /// Replications taken from the journal of an interrupted run.
    pub resumed: usize,
    /// Simulated events of the replications computed by this call.
    pub events: f64,
    /// Seconds the replications took.
    pub elapsed: f64,
}

/// A run checked and ready to start ([`prepare`]): the plan's jobs over
/// the points this run computes, their worlds, the worker pool and what
/// the run is (for the journal and `shard.toml`). Nothing is written yet.
pub struct Run<'p> {
    plan: &'p Plan,
    opts: &'p Options,
    points: Vec<usize>,
    jobs: Vec<Job>,
    prepared: Vec<(usize, Prepared)>,
    header: Header,
    dir: PathBuf,
    jpath: PathBuf,
    trace_policy: Option<PolicyKind>,
    pool: rayon::ThreadPool,
}

/// Run `plan` as `opts` say: [`prepare`], then [`Run::start`].
pub fn run(
    plan: &Plan,
    opts: &Options,
    obs: &dyn Observer,
    stop: &AtomicBool,
) -> Result<Outcome, Error> {
    prepare(plan, opts)?.start(obs, stop)
}

impl Run<'_> {
    /// Where the journal of this run goes (a stop keeps it there).
    pub fn journal(&self) -> &Path {
        &self.jpath
    }

    /// Lock the results folder, take what a journal holds, run the rest
    /// and write the results. Once `stop` is set, no further replication
    /// starts and the run ends with [`Outcome::Interrupted`].
    pub fn start(self, obs: &dyn Observer, stop: &AtomicBool) -> Result<Outcome, Error> {
        // One run per results folder: held until this call returns.
        let _lock = outputs::lock_results(&self.dir, obs)?;
        let mode = self.opts.journal;
        let finished = resume::finished_rows(&self.jobs(), &self.header, &self.jpath, mode, obs)?;
        self.finish(finished, obs, stop)
    }

    fn jobs(&self) -> Jobs<'_> {
        Jobs {
            plan: self.plan,
            points: &self.points,
            jobs: &self.jobs,
        }
    }

    /// Run the jobs not in `finished`, then write all.
    fn finish(
        self,
        finished: Vec<Row>,
        obs: &dyn Observer,
        stop: &AtomicBool,
    ) -> Result<Outcome, Error> {
        let (new_rows, complete, elapsed) = self.execute(&finished, obs, stop)?;
        if !complete {
            return Ok(Outcome::Interrupted {
                saved: finished.len() + new_rows.len(),
                total: self.jobs.len(),
                journal: self.jpath.clone(),
            });
        }
        let resumed = finished.len();
        let ev = METRICS.iter().position(|m| *m == "events").unwrap_or(0);
        // fold from +0: an empty sum of f64 is -0, printed "-0".
        let events = new_rows
            .iter()
            .map(|r| r.result.values[ev])
            .fold(0.0, |a, b| a + b);
        let runs = new_rows.len();
        let mut rows = finished;
        rows.extend(new_rows);
        let tables = self.write(&mut rows, obs)?;
        Ok(Outcome::Finished(Finished {
            dir: self.dir,
            keys: tables.keys,
            summary: tables.summary,
            runs,
            resumed,
            events,
            elapsed,
        }))
    }
}

/// Every check of the options and output paths, the worlds and the
/// worker pool: a run ready to [`Run::start`], nothing written yet.
pub fn prepare<'p>(plan: &'p Plan, opts: &'p Options) -> Result<Run<'p>, Error> {
    let trace_policy = check_trace_policy(plan, opts)?;
    let threads = opts.threads;
    check_threads(threads)?;
    let total = plan.points.len();
    let points: Vec<usize> = match opts.shard {
        Some(s) => s.points(total),
        None => (0..total).collect(),
    };
    if opts.trace.is_some() && points.is_empty() {
        return Err(Error::Input(format!(
            "--trace: shard {} has no points (the sweep has {total})",
            opts.shard.map_or_else(String::new, |s| s.to_string())
        )));
    }
    let prepared: Vec<(usize, Prepared)> = points
        .iter()
        .copied()
        .zip(worlds(plan, &points, threads, opts.budget)?)
        .collect();
    let jobs = super::plan(plan.seed, &points, &plan.policies, plan.reps);
    let header = header(plan, opts.shard, jobs.len())?;
    let dir = plan.results_dir(&opts.out);
    let mut inputs: Vec<PathBuf> = plan.source.iter().cloned().collect();
    let resolved = plan.loaded.resolved_table();
    let data_files = journal::data_files(&resolved);
    inputs.extend(data_files.iter().map(|p| plan.loaded.base_dir.join(p)));
    outputs::check(&opts.out, &dir, opts.trace.as_deref(), &inputs)?;
    let pool = super::pool(threads).map_err(|m| Error::Failure(anyhow::anyhow!(m)))?;
    Ok(Run {
        pool,
        jpath: dir.join(JOURNAL_FILE),
        plan,
        opts,
        points,
        jobs,
        prepared,
        header,
        dir,
        trace_policy,
    })
}

/// A plan's tables computed in memory, nothing read or written but the
/// plan's own data files (`herdsim ui`): the replications [`run`] runs
/// (every point, the same seeds, through [`super::execute`]), so the same
/// `summary.csv` bytes. `None` when `stop` was set before the last
/// replication finished. `threads` is checked as `--jobs` is.
pub fn compute(
    plan: &Plan,
    threads: usize,
    budget: u64,
    stop: &AtomicBool,
) -> Result<Option<Tables>, Error> {
    compute_observed(plan, threads, budget, stop, &())
}

/// [`compute`], telling `obs` the replications ahead (`length`) and each
/// one finished (`advance`).
pub fn compute_observed(
    plan: &Plan,
    threads: usize,
    budget: u64,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Option<Tables>, Error> {
    check_threads(threads)?;
    let points: Vec<usize> = (0..plan.points.len()).collect();
    // Every point, in order: point p's world is `prepared[p]`.
    let prepared = worlds(plan, &points, threads, budget)?;
    let jobs = super::plan(plan.seed, &points, &plan.policies, plan.reps);
    let pool = super::pool(threads).map_err(Error::Input)?;
    let world = |p: usize| prepared.get(p);
    obs.length(jobs.len() as u64);
    let done = |_: &Row| {
        obs.advance(1);
        Ok(())
    };
    let mut rows = match super::execute(&jobs, &world, &pool, &done, stop) {
        Ok(rows) => rows,
        Err(e) if e.downcast_ref::<crate::model::RunLimit>().is_some() => {
            return Err(Error::Input(format!("{}: {e:#}", plan.loaded.file)));
        }
        Err(e) => return Err(Error::from(e)),
    };
    if rows.len() < jobs.len() {
        return Ok(None);
    }
    tables_of(plan, &mut rows).map(Some)
}

/// A plan's tables of `rows` (one per replication, any order): each row
/// with its point's swept values, as `runs.csv` and `summary.csv` hold them.
fn tables_of(plan: &Plan, rows: &mut [Row]) -> Result<Tables, Error> {
    let params = |point: usize| -> Vec<(String, String)> {
        plan.points
            .get(point)
            .map(|p| p.params.clone())
            .unwrap_or_default()
    };
    let keys = plan.loaded.sweep_keys();
    Tables::of(&plan.name, keys, rows, &plan.policies, &params)
}

/// The trace `herdsim run --trace FILE --trace-policy POLICY` writes
/// (replication 0 of the first point, under `policy`), in memory.
pub fn trace(plan: &Plan, policy: PolicyKind) -> Result<TraceBuf, Error> {
    let l = &plan.loaded;
    let point = plan
        .points
        .first()
        .ok_or_else(|| Error::Input(format!("{}: the sweep has no points", l.file)))?;
    let world = world(plan, 0)?;
    let mut buf = TraceBuf::new();
    simulate(
        &world,
        policy,
        super::rep_seed(plan.seed, point.index, 0),
        Some(&mut buf),
    )
    .map_err(|e| Error::Input(format!("{}: --trace: {e}", l.file)))?;
    Ok(buf)
}

/// `--jobs`: 1 to [`MAX_THREADS`] worker threads.
fn check_threads(threads: usize) -> Result<(), Error> {
    if threads == 0 || threads > MAX_THREADS {
        return Err(Error::Input(format!(
            "--jobs {threads}: must be from 1 to {MAX_THREADS} worker threads"
        )));
    }
    Ok(())
}

/// The world of the plan's point `p`, its data files read once per plan.
fn world(plan: &Plan, p: usize) -> Result<Prepared, Error> {
    let l = &plan.loaded;
    Prepared::with_cache(&plan.points[p].scenario, &l.base_dir, &l.data)
        .map_err(|e| Error::Input(format!("{}: {e}", l.file)))
}

/// The worlds of `points` (in their order), after the checks of the job
/// count and the memory a run on `threads` threads needs within `budget`.
fn worlds(
    plan: &Plan,
    points: &[usize],
    threads: usize,
    budget: u64,
) -> Result<Vec<Prepared>, Error> {
    check_job_count(plan, points.len())?;
    let max_pending = memory::check_run(plan, points, threads, budget)?;
    points
        .iter()
        .map(|&p| {
            let mut w = world(plan, p)?;
            w.set_max_pending(max_pending);
            Ok(w)
        })
        .collect()
}

/// `--trace-policy`: only with `--trace`, and one of the plan's policies.
fn check_trace_policy(plan: &Plan, opts: &Options) -> Result<Option<PolicyKind>, Error> {
    let Some(p) = &opts.trace_policy else {
        return Ok(None);
    };
    if opts.trace.is_none() {
        return Err(Error::Input(format!(
            "--trace-policy {p}: given without --trace (it chooses the policy of the \
             traced replication); add --trace FILE or drop --trace-policy"
        )));
    }
    let kind = p
        .parse::<PolicyKind>()
        .map_err(|e| Error::Input(format!("--trace-policy {p}: {e}")))?;
    if !plan.policies.contains(&kind) {
        return Err(Error::Input(format!(
            "--trace-policy {p}: not a policy of this run (it runs {})",
            plan.policy_names()
        )));
    }
    Ok(Some(kind))
}

/// At most [`MAX_JOBS`] replications over `points` points.
fn check_job_count(plan: &Plan, points: usize) -> Result<(), Error> {
    let count = (points as u128) * plan.policies.len() as u128 * u128::from(plan.reps);
    if count <= MAX_JOBS as u128 {
        return Ok(());
    }
    let why = format!(
        "{points} points x {} policies x {} replications is {count} runs, more than the \
         {MAX_JOBS} one invocation supports (use --shard)",
        plan.policies.len(),
        plan.reps
    );
    Err(plan.loaded.error_at("reps", why).into())
}

/// What a run of `header` is, for `run.toml` (its files aside).
fn record_of(header: &Header, shard: Option<Shard>) -> Record {
    Record {
        herdsim: env!("CARGO_PKG_VERSION").to_string(),
        shard: shard.map(|s| s.to_string()),
        data: header.data.clone(),
        files: Vec::new(),
        scenario: header.scenario.clone(),
    }
}

/// The `run.toml` that `herdsim run` of `plan` (no `--shard`, no
/// `--trace`) writes into a folder that holds no results yet: `drawn`,
/// whether it drew `comparison.png` (not with `--no-plot`). Written nowhere.
pub fn record_toml(plan: &Plan, drawn: bool) -> Result<String, Error> {
    let made = record_of(&header(plan, None, 0)?, None);
    let mut files = vec!["runs.csv".to_string(), "summary.csv".to_string()];
    // As `outputs::write_plan_labels` writes it.
    if !plan.loaded.sweep_labels().is_empty() {
        files.push(LABELS_FILE.to_string());
    }
    if drawn {
        files.push("comparison.png".to_string());
    }
    record::render(&made, files)
}

/// What a run of `plan` is: its journal's header.
fn header(plan: &Plan, shard: Option<Shard>, jobs: usize) -> Result<Header, Error> {
    let scenario = plan.loaded.resolved_toml()?;
    let data = journal::data_hash(&plan.loaded.resolved_table(), &plan.loaded.base_dir)
        .map_err(|m| Error::Input(format!("{}: {m}", plan.loaded.file)))?;
    Ok(Header {
        herdsim: env!("CARGO_PKG_VERSION").to_string(),
        build: crate::BUILD.to_string(),
        fingerprint: journal::fingerprint(&scenario, &data),
        shard,
        jobs,
        data,
        scenario,
    })
}

impl Run<'_> {
    /// The jobs not in `finished`, each appended to the journal as it
    /// finishes: the new rows, whether they are all the remaining ones
    /// (not when `stop` ended the run first) and the seconds they took.
    fn execute(
        &self,
        finished: &[Row],
        obs: &dyn Observer,
        stop: &AtomicBool,
    ) -> Result<(Vec<Row>, bool, f64), Error> {
        let jobs = self.jobs();
        let mut done = vec![false; self.jobs.len()];
        for i in finished.iter().filter_map(|r| jobs.index(&r.job)) {
            done[i] = true;
        }
        let remaining: Vec<Job> = self
            .jobs
            .iter()
            .zip(&done)
            .filter(|(_, d)| !**d)
            .map(|(j, _)| *j)
            .collect();

        // From here on, files are written.
        let jpath = &self.jpath;
        let writer = journal::Writer::create(jpath, &self.header, finished)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", jpath.display()))?;
        let meta_path = self.dir.join(SHARD_FILE);
        if meta_path.exists() {
            // A stale one would let `merge` take unfinished results for finished.
            std::fs::remove_file(&meta_path)?;
        }
        let finished_jobs: Vec<Job> = finished.iter().map(|r| r.job).collect();
        let per_point = self.plan.policies.len() as u32 * self.plan.reps;
        let cost: Vec<u64> = self
            .prepared
            .iter()
            .map(|(_, w)| w.expected_cost())
            .collect();
        let tally = Tally::new(obs, &self.points, &cost, per_point, &finished_jobs);
        let started = Instant::now();
        let record = |row: &Row| {
            writer
                .record(row)
                .map_err(|e| anyhow::anyhow!("cannot append to {}: {e}", jpath.display()))?;
            tally.job_done(row.job.point);
            Ok(())
        };
        let world = |p: usize| {
            let i = self.prepared.binary_search_by_key(&p, |(q, _)| *q).ok()?;
            Some(&self.prepared[i].1)
        };
        let result = super::execute(&remaining, &world, &self.pool, &record, stop);
        obs.finish();
        let new_rows = result.map_err(|e| self.limit_is_bad_input(e))?;
        let elapsed = started.elapsed().as_secs_f64();
        let complete = new_rows.len() == remaining.len();
        Ok((new_rows, complete, elapsed))
    }

    /// A replication that hit a run limit (docs/limits.md) is bad input:
    /// the scenario asks for more than herdsim does in one run. Finishing
    /// the run would hit the same limit: it keeps no journal.
    fn limit_is_bad_input(&self, e: anyhow::Error) -> Error {
        if e.downcast_ref::<crate::model::RunLimit>().is_some() {
            let _ = std::fs::remove_file(&self.jpath);
            Error::Input(format!("{}: {e:#}", self.plan.loaded.file))
        } else {
            Error::from(e)
        }
    }

    /// The results of `rows` (all the jobs, any order): the CSVs,
    /// `shard.toml`, the trace, the figure; then the journal is removed.
    fn write(&self, rows: &mut [Row], obs: &dyn Observer) -> Result<Tables, Error> {
        let plan = self.plan;
        let made = self.record();
        // Results of another plan in the folder go first, with what they left.
        let draws = self.opts.shard.is_none() && self.opts.plot;
        let rewritten: &[&str] = if draws {
            &["runs.csv", "summary.csv", "comparison.png"]
        } else {
            &["runs.csv", "summary.csv"]
        };
        let mut files = record::replace_other(&self.dir, &made, rewritten, obs)?;
        let tables = tables_of(plan, rows)?;
        tables.write(&self.dir)?;
        files.extend(["runs.csv".to_string(), "summary.csv".to_string()]);
        if outputs::write_plan_labels(&self.dir, plan)? {
            files.push(LABELS_FILE.to_string());
        }
        if let Some(shard) = self.opts.shard {
            let meta = self.shard_meta(shard, &tables.keys);
            write_atomic(&self.dir.join(SHARD_FILE), meta.to_toml()?.as_bytes())?;
            files.push(SHARD_FILE.to_string());
        }
        if let Some(path) = &self.opts.trace {
            self.write_trace(path)?;
            // A trace inside the folder belongs to these results.
            if let Some(name) = path.file_name().and_then(|n| n.to_str())
                && path.parent().is_some_and(|p| same_path(p, &self.dir))
            {
                files.push(name.to_string());
            }
        }
        // A shard draws no figure: plot the merged result.
        if draws && outputs::draw_comparison(&self.dir, obs) {
            files.push("comparison.png".to_string());
        }
        record::write(&self.dir, &made, files)?;
        // Last: the results are complete on disk. A kill before this line
        // leaves a complete journal, which the next run recognises.
        std::fs::remove_file(&self.jpath)?;
        Ok(tables)
    }

    /// What this run is, for `run.toml`.
    fn record(&self) -> Record {
        record_of(&self.header, self.opts.shard)
    }

    fn shard_meta(&self, shard: Shard, keys: &[String]) -> ShardMeta {
        let plan = self.plan;
        ShardMeta {
            format: SHARD_FORMAT,
            herdsim: env!("CARGO_PKG_VERSION").to_string(),
            build: crate::BUILD.to_string(),
            scenario: plan.name.clone(),
            fingerprint: self.header.fingerprint.clone(),
            data: self.header.data.clone(),
            shard: shard.index,
            shards: shard.count,
            points_total: plan.points.len(),
            points: self.points.clone(),
            policies: plan.policies.iter().map(|p| p.name().to_string()).collect(),
            reps: plan.reps,
            sweep_keys: keys.to_vec(),
            resolved: self.header.scenario.clone(),
        }
    }

    /// Replication 0 of the first point run again, with its trace.
    fn write_trace(&self, path: &Path) -> Result<(), Error> {
        let plan = self.plan;
        let policy = self.trace_policy.unwrap_or(plan.policies[0]);
        let (point, world) = &self.prepared[0];
        let mut buf = TraceBuf::new();
        simulate(
            world,
            policy,
            super::rep_seed(plan.seed, *point, 0),
            Some(&mut buf),
        )
        .map_err(|e| Error::Input(format!("{}: --trace: {e}", plan.loaded.file)))?;
        write_atomic(path, &buf)
            .map_err(|e| anyhow::anyhow!("--trace {}: cannot write: {e}", path.display()))?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
