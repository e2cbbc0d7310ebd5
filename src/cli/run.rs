//! `herdsim run`: simulate a scenario and write its results.
//!
//! Every check of the input (scenario, `--set`, flags, a journal to resume)
//! happens before anything is written, so bad input never leaves a partial
//! results folder. Then each finished replication is appended to
//! `<out>/<name>/runs.journal` ([`sweep::journal`]); `summary.csv` and
//! `runs.csv` are written atomically at the end and the journal removed.

use super::CliError;
use super::interrupt;
use super::memory;
use crate::floor::PolicyKind;
use crate::metrics::METRICS;
use crate::model::{Prepared, TraceBuf, simulate};
use crate::report::lock::{FolderLock, LOCK_FILE, LockError};
use crate::report::{atomic, csv_out, paths, table};
use crate::scenario::{Loaded, Point, ScenarioError};
use crate::sweep::journal::{self, Header, JOURNAL_FILE};
use crate::sweep::shard::{SHARD_FILE, SHARD_FORMAT, ShardMeta};
use crate::sweep::{self, Job, Progress, Row, Shard};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file (TOML). Without it, the built-in default scenario.
    pub scenario: Option<PathBuf>,
    /// Master seed (overrides the file's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Replications per point and policy (overrides the file's `reps`).
    #[arg(long)]
    pub reps: Option<u32>,
    /// Override any key: `--set server.ttl_ms=30000` (repeatable; `sweep.KEY=[..]` sets a sweep axis).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Output directory; results go to `<out>/<scenario name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Write every message and state change of one replication (JSON Lines).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Policy of the traced replication (default: the first listed).
    #[arg(long, value_name = "POLICY")]
    pub trace_policy: Option<String>,
    /// Worker threads, 1 to 1024 (default: all cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Run only the sweep points p with p % N == K (K counts from 0), for
    /// array jobs; join the shards with `herdsim merge`.
    #[arg(long, value_name = "K/N", value_parser = |s: &str| s.parse::<Shard>())]
    pub shard: Option<Shard>,
    /// Complete an interrupted run from the journal in its results folder
    /// (runs from the start when there is none).
    #[arg(long, conflicts_with = "fresh")]
    pub resume: bool,
    /// Discard the journal of an interrupted run and start over.
    #[arg(long)]
    pub fresh: bool,
    /// Do not draw `comparison.png` for a sweep.
    #[arg(long)]
    pub no_plot: bool,
    /// No progress bar and no timing line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Memory the run may use (bytes, or e.g. 512M, 4G); a plan that needs
    /// more is refused before it starts (default: the available memory).
    #[arg(long, value_name = "SIZE", value_parser = |s: &str| memory::parse_size(s))]
    pub max_memory: Option<u64>,
}

/// Most replications one invocation runs (its plan is held in memory).
pub const MAX_JOBS: usize = 100_000_000;

/// Everything a run needs once the input is checked.
pub struct Plan {
    pub loaded: Loaded,
    pub points: Vec<Point>,
    pub policies: Vec<PolicyKind>,
    pub reps: u32,
    pub seed: u64,
    pub name: String,
}

fn bad(e: ScenarioError) -> CliError {
    CliError::bad(e.to_string())
}

/// Load, override and check a scenario; any problem is bad input.
pub fn load_plan(
    scenario: Option<&PathBuf>,
    sets: &[String],
    seed: Option<u64>,
    reps: Option<u32>,
) -> Result<Plan, CliError> {
    load_plan_within(scenario, sets, seed, reps, memory::budget(None))
}

/// [`load_plan`], refusing a plan whose points and replications would not
/// fit in `budget` bytes before its points are expanded.
pub fn load_plan_within(
    scenario: Option<&PathBuf>,
    sets: &[String],
    seed: Option<u64>,
    reps: Option<u32>,
    budget: u64,
) -> Result<Plan, CliError> {
    let mut loaded = match scenario {
        Some(p) => Loaded::from_file(p),
        None => Loaded::builtin_default(),
    }
    .map_err(bad)?;
    for s in sets {
        loaded.apply_set(s).map_err(bad)?;
    }
    if let Some(seed) = seed {
        loaded
            .apply_as(&format!("seed={seed}"), &format!("--seed {seed}"))
            .map_err(bad)?;
    }
    if let Some(reps) = reps {
        loaded
            .apply_as(&format!("reps={reps}"), &format!("--reps {reps}"))
            .map_err(bad)?;
    }
    let base = loaded.base().map_err(bad)?;
    let n_points = loaded.point_count() as u64;
    let (need, key) = memory::plan_bytes(
        &loaded,
        n_points,
        base.policies.len() as u64,
        u64::from(base.reps),
    );
    if need > budget {
        return Err(bad(loaded.error_at(
            &key,
            format!(
                "{n_points} points x {} policies x {} replications need about {} of memory, \
                 more than the {} this run may use (--max-memory; default: the memory \
                 available); split the plan with --shard or fewer replications",
                base.policies.len(),
                base.reps,
                memory::show(need),
                memory::show(budget)
            ),
        )));
    }
    let points = loaded.points().map_err(bad)?;
    Ok(Plan {
        policies: base.policy_kinds(),
        reps: base.reps,
        seed: base.seed,
        name: base.name.clone(),
        loaded,
        points,
    })
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    // Every check of the input, the flags and the output paths comes
    // first: nothing is written and nothing simulated before they pass.
    let budget = memory::budget(args.max_memory);
    let plan = load_plan_within(
        args.scenario.as_ref(),
        &args.set,
        args.seed,
        args.reps,
        budget,
    )?;
    let trace_policy = match &args.trace_policy {
        Some(p) => {
            if args.trace.is_none() {
                return Err(CliError::bad(format!(
                    "--trace-policy {p}: given without --trace (it chooses the policy of the \
                     traced replication); add --trace FILE or drop --trace-policy"
                )));
            }
            let kind = p
                .parse::<PolicyKind>()
                .map_err(|e| CliError::bad(format!("--trace-policy {p}: {e}")))?;
            if !plan.policies.contains(&kind) {
                return Err(CliError::bad(format!(
                    "--trace-policy {p}: not a policy of this run (it runs {})",
                    plan.policies
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            Some(kind)
        }
        None => None,
    };
    let threads = args.jobs.unwrap_or_else(default_jobs);
    if threads == 0 || threads > sweep::MAX_THREADS {
        return Err(CliError::bad(format!(
            "--jobs {threads}: must be from 1 to {} worker threads",
            sweep::MAX_THREADS
        )));
    }
    let total_points = plan.points.len();
    let run_points: Vec<usize> = match args.shard {
        Some(s) => s.points(total_points),
        None => (0..total_points).collect(),
    };
    if args.trace.is_some() && run_points.is_empty() {
        return Err(CliError::bad(format!(
            "--trace: shard {} has no points (the sweep has {total_points})",
            args.shard.map_or_else(String::new, |s| s.to_string())
        )));
    }
    let job_count =
        (run_points.len() as u128) * plan.policies.len() as u128 * u128::from(plan.reps);
    if job_count > MAX_JOBS as u128 {
        return Err(bad(plan.loaded.error_at(
            "reps",
            format!(
                "{} points x {} policies x {} replications is {job_count} runs, more than the \
                 {MAX_JOBS} one invocation supports (use --shard)",
                run_points.len(),
                plan.policies.len(),
                plan.reps
            ),
        )));
    }
    let max_pending = check_memory(&plan, &run_points, threads, budget)?;
    let mut prepared: Vec<(usize, Prepared)> = Vec::with_capacity(run_points.len());
    for &p in &run_points {
        let mut w = Prepared::with_cache(
            &plan.points[p].scenario,
            &plan.loaded.base_dir,
            &plan.loaded.data,
        )
        .map_err(|e| CliError::bad(format!("{}: {e}", plan.loaded.file)))?;
        w.set_max_pending(max_pending);
        prepared.push((p, w));
    }
    let jobs = sweep::plan(plan.seed, &run_points, &plan.policies, plan.reps);

    // What this run is, for the journal and shard metadata.
    let scenario_toml = plan.loaded.resolved_toml().map_err(bad)?;
    let resolved = plan.loaded.resolved_table();
    let data = journal::data_hash(&resolved, &plan.loaded.base_dir)
        .map_err(|m| CliError::bad(format!("{}: {m}", plan.loaded.file)))?;
    let header = Header {
        herdsim: env!("CARGO_PKG_VERSION").to_string(),
        build: crate::BUILD.to_string(),
        fingerprint: journal::fingerprint(&scenario_toml, &data),
        shard: args.shard,
        jobs: jobs.len(),
        data: data.clone(),
        scenario: scenario_toml.clone(),
    };
    let dir = args.out.join(&plan.name);
    let jpath = dir.join(JOURNAL_FILE);
    let mut inputs: Vec<PathBuf> = args.scenario.iter().cloned().collect();
    inputs.extend(
        journal::data_files(&resolved)
            .iter()
            .map(|p| plan.loaded.base_dir.join(p)),
    );
    check_outputs(&args, &dir, &inputs)?;
    let pool = sweep::pool(threads).map_err(|m| CliError::Failure(anyhow::anyhow!(m)))?;

    // One run per results folder: held until this process ends.
    let _lock = lock_folder(&dir, args.quiet)?;

    // Replications an interrupted run already finished.
    let mut finished: Vec<Row> = Vec::new();
    if jpath.exists() && !args.fresh {
        let old = journal::read(&jpath);
        // A run killed after writing its results but before removing its
        // journal left a complete one: use it, whatever the flags.
        let complete = !args.resume
            && old.as_ref().is_ok_and(|c| {
                c.header.fingerprint == header.fingerprint
                    && c.header.shard == header.shard
                    && c.rows.len() == jobs.len()
                    && c.rows
                        .iter()
                        .all(|r| job_index(&r.job, &run_points, &plan, &jobs).is_some())
            });
        if args.resume || complete {
            let old = old.map_err(|m| CliError::bad(format!("{}: {m}", jpath.display())))?;
            check_resumable(&old.header, &header, &plan.loaded, &jpath)?;
            for row in old.rows {
                if job_index(&row.job, &run_points, &plan, &jobs).is_none() {
                    return Err(CliError::bad(format!(
                        "{}: a row (point {}, {}, rep {}) is not a job of this run; \
                         add --fresh to discard the journal and start over",
                        jpath.display(),
                        row.job.point,
                        row.job.policy.name(),
                        row.job.rep
                    )));
                }
                finished.push(row);
            }
            if complete {
                super::note(format_args!(
                    "herdsim: {} holds every replication of this run (a finished run stopped \
                     before removing it): writing the results from it",
                    jpath.display()
                ));
            } else if !args.quiet {
                super::note(format_args!(
                    "herdsim: resuming {}: {} of {} replications already done{}",
                    dir.display(),
                    finished.len(),
                    jobs.len(),
                    if old.dropped > 0 {
                        format!(" ({} torn or repeated journal lines dropped)", old.dropped)
                    } else {
                        String::new()
                    }
                ));
            }
        } else {
            let n = old.map_or(0, |c| c.rows.len());
            return Err(CliError::bad(format!(
                "{}: an interrupted run left its journal here ({n} replications finished); \
                 add --resume to complete it, or --fresh to discard it and start over",
                jpath.display()
            )));
        }
    } else if args.resume && !args.quiet {
        super::note(format_args!(
            "herdsim: no journal in {}: nothing to resume, running from the start",
            dir.display()
        ));
    }
    let mut done = vec![false; jobs.len()];
    for row in &finished {
        if let Some(i) = job_index(&row.job, &run_points, &plan, &jobs) {
            done[i] = true;
        }
    }
    let remaining: Vec<Job> = jobs
        .iter()
        .zip(&done)
        .filter(|(_, d)| !**d)
        .map(|(j, _)| *j)
        .collect();

    // From here on, files are written.
    let writer = journal::Writer::create(&jpath, &header, &finished)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", jpath.display()))?;
    let meta_path = dir.join(SHARD_FILE);
    if meta_path.exists() {
        // A stale one would let `merge` take unfinished results for finished.
        std::fs::remove_file(&meta_path)?;
    }
    let finished_jobs: Vec<Job> = finished.iter().map(|r| r.job).collect();
    let per_point = plan.policies.len() as u32 * plan.reps;
    let cost: Vec<u64> = prepared.iter().map(|(_, w)| w.expected_cost()).collect();
    let progress = Progress::new(&run_points, &cost, per_point, &finished_jobs, args.quiet);
    let started = Instant::now();
    let record = |row: &Row| {
        writer
            .record(row)
            .map_err(|e| anyhow::anyhow!("cannot append to {}: {e}", jpath.display()))
    };
    let stop = interrupt::catch(&jpath, progress.bar());
    let new_rows =
        sweep::execute(&remaining, &prepared, &pool, &progress, &record, stop).map_err(|e| {
            let e = limit_is_bad_input(e, &plan.loaded.file);
            if matches!(e, CliError::BadInput(_)) {
                // Finishing it would hit the same limit: keep no journal.
                let _ = std::fs::remove_file(&jpath);
            }
            e
        })?;
    progress.finish();
    let elapsed = started.elapsed().as_secs_f64();
    drop(writer);
    if new_rows.len() < remaining.len() {
        super::note(format_args!(
            "herdsim: interrupted: {} of {} replications are saved in {}; to complete the run:\n  {}",
            finished.len() + new_rows.len(),
            jobs.len(),
            jpath.display(),
            interrupt::resume_command()
        ));
        return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
    }

    let resumed = finished.len();
    let mut rows = finished;
    rows.extend(new_rows.iter().cloned());
    sweep::sort_rows(&mut rows, &plan.policies);

    let keys = plan.loaded.sweep_keys();
    let params = |point: usize| -> Vec<(String, String)> {
        plan.points
            .get(point)
            .map(|p| p.params.clone())
            .unwrap_or_default()
    };
    let summary = csv_out::summarise(&rows, &params);
    atomic::write(
        &dir.join("runs.csv"),
        &csv_out::runs_csv(&plan.name, &keys, &rows, &params)?,
    )?;
    atomic::write(
        &dir.join("summary.csv"),
        &csv_out::summary_csv(&plan.name, &keys, &summary)?,
    )?;
    if let Some(shard) = args.shard {
        let meta = ShardMeta {
            format: SHARD_FORMAT,
            herdsim: env!("CARGO_PKG_VERSION").to_string(),
            build: crate::BUILD.to_string(),
            scenario: plan.name.clone(),
            fingerprint: header.fingerprint.clone(),
            data,
            shard: shard.index,
            shards: shard.count,
            points_total: total_points,
            points: run_points.clone(),
            policies: plan.policies.iter().map(|p| p.name().to_string()).collect(),
            reps: plan.reps,
            sweep_keys: keys.clone(),
            resolved: scenario_toml,
        };
        atomic::write(&meta_path, meta.to_toml()?.as_bytes())?;
    }
    if let Some(path) = &args.trace {
        let policy = trace_policy.unwrap_or(plan.policies[0]);
        let (point, world) = &prepared[0];
        let mut buf = TraceBuf::new();
        simulate(
            world,
            policy,
            sweep::rep_seed(plan.seed, *point, 0),
            Some(&mut buf),
        )
        .map_err(|e| CliError::bad(format!("{}: --trace: {e}", plan.loaded.file)))?;
        atomic::write(path, &buf)
            .map_err(|e| anyhow::anyhow!("--trace {}: cannot write: {e}", path.display()))?;
    }
    // The standard comparison figure of a sweep, next to the CSVs (a shard
    // draws none: plot the merged result). A drawing failure loses no
    // results, so it is a warning.
    if !keys.is_empty() && args.shard.is_none() && !args.no_plot {
        let png = dir.join("comparison.png");
        if let Err(e) = crate::report::plot::comparison_figure(&dir.join("summary.csv"), &png, None)
        {
            super::note(format_args!(
                "herdsim: warning: could not draw {}: {e:#}",
                png.display()
            ));
        }
    }
    // Last: the results are complete on disk. A kill before this line
    // leaves a complete journal, which the next run recognises.
    std::fs::remove_file(&jpath)?;
    super::print_out(&table::render(&keys, &summary))?;
    if !args.quiet {
        let ev = METRICS.iter().position(|m| *m == "events").unwrap_or(0);
        // fold from +0: an empty sum of f64 is -0, printed "-0".
        let events: f64 = new_rows
            .iter()
            .map(|r| r.result.values[ev])
            .fold(0.0, |a, b| a + b);
        let resumed_note = if resumed > 0 {
            format!(" (+{resumed} resumed from the journal)")
        } else {
            String::new()
        };
        super::note(format_args!(
            "herdsim: {}{resumed_note}, {:.0} events in {:.2} s ({:.1} M events/s on {}); wrote {}",
            plural(new_rows.len(), "run"),
            events,
            elapsed,
            events / elapsed.max(1e-9) / 1e6,
            plural(threads, "thread"),
            dir.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Lock the results folder `dir` (creating it) for this process, and
/// remove what killed runs left there.
pub fn lock_folder(dir: &Path, quiet: bool) -> Result<FolderLock, CliError> {
    let lock = FolderLock::exclusive(dir).map_err(|e| match e {
        LockError::Held { .. } => CliError::bad(e.to_string()),
        LockError::Io { .. } => CliError::Failure(anyhow::anyhow!("cannot create {e}")),
    })?;
    if let Some(why) = &lock.unsupported {
        super::note(format_args!(
            "herdsim: warning: cannot lock {} ({why}); nothing stops a second run from \
             writing into it at the same time",
            dir.display()
        ));
    }
    let removed = lock.remove_stale_temps();
    if !removed.is_empty() && !quiet {
        super::note(format_args!(
            "herdsim: removed {} temporary file{} that killed runs left in {}: {}",
            removed.len(),
            if removed.len() == 1 { "" } else { "s" },
            dir.display(),
            removed.join(", ")
        ));
    }
    Ok(lock)
}

/// Check the output paths before any work: `--out` and the results folder
/// must be folders (or not exist yet); no output may be one of the run's
/// inputs; `--trace` must name a file that is neither an input nor
/// another output of the run.
fn check_outputs(args: &Args, dir: &Path, inputs: &[PathBuf]) -> Result<(), CliError> {
    for d in [&args.out, &dir.to_path_buf()] {
        if d.exists() && !d.is_dir() {
            return Err(CliError::bad(format!(
                "--out {}: {} exists and is not a folder",
                args.out.display(),
                d.display()
            )));
        }
    }
    let outputs: Vec<PathBuf> = [
        "runs.csv",
        "summary.csv",
        "comparison.png",
        JOURNAL_FILE,
        SHARD_FILE,
        LOCK_FILE,
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect();
    for o in &outputs {
        if let Some(i) = inputs.iter().find(|i| paths::same(o, i)) {
            return Err(CliError::bad(format!(
                "--out {}: the run would overwrite its input {} with its results; \
                 choose another --out",
                args.out.display(),
                i.display()
            )));
        }
    }
    if let Some(t) = &args.trace {
        let shown = t.display();
        if t.is_dir() {
            return Err(CliError::bad(format!(
                "--trace {shown}: is a folder; name the file to write the trace to"
            )));
        }
        if let Some(parent) = t.parent().filter(|p| !p.as_os_str().is_empty())
            && parent.exists()
            && !parent.is_dir()
        {
            return Err(CliError::bad(format!(
                "--trace {shown}: {} is not a folder",
                parent.display()
            )));
        }
        if let Some(i) = inputs.iter().find(|i| paths::same(t, i)) {
            return Err(CliError::bad(format!(
                "--trace {shown}: is an input of this run ({}); name another file",
                i.display()
            )));
        }
        if outputs.iter().any(|o| paths::same(t, o)) {
            return Err(CliError::bad(format!(
                "--trace {shown}: is a results file of this run; name another file"
            )));
        }
    }
    Ok(())
}

/// Index of `job` in `jobs` (the plan over `run_points`), if it is one of
/// them with the right seed.
fn job_index(job: &Job, run_points: &[usize], plan: &Plan, jobs: &[Job]) -> Option<usize> {
    let slot = run_points.binary_search(&job.point).ok()?;
    let pol = plan.policies.iter().position(|p| *p == job.policy)?;
    if job.rep >= plan.reps {
        return None;
    }
    let i = (slot * plan.policies.len() + pol) * plan.reps as usize + job.rep as usize;
    (jobs.get(i) == Some(job)).then_some(i)
}

/// Refuse to resume a journal written for another scenario, plan or shard,
/// naming what changed.
fn check_resumable(
    old: &Header,
    new: &Header,
    loaded: &Loaded,
    jpath: &Path,
) -> Result<(), CliError> {
    let j = jpath.display();
    if old.build != new.build {
        return Err(CliError::bad(format!(
            "{j}: key `build`: the interrupted run was computed by another build of herdsim \
             (build {}, this is build {}); replications of two builds must not mix in one \
             result: finish it with the herdsim that started it, or add --fresh to discard \
             the journal and start over",
            old.build, new.build
        )));
    }
    if old.fingerprint == new.fingerprint && old.shard == new.shard {
        return Ok(());
    }
    let hint = "resume with the same scenario and options, or add --fresh to discard the journal and start over";
    let shard_name =
        |s: Option<Shard>| s.map_or_else(|| "not sharded".to_string(), |s| format!("--shard {s}"));
    if old.shard != new.shard {
        return Err(CliError::bad(format!(
            "{j}: key `--shard`: the interrupted run was {}, this one is {}; {hint}",
            shard_name(old.shard),
            shard_name(new.shard)
        )));
    }
    let parsed = (
        toml::from_str::<toml::Table>(&old.scenario),
        toml::from_str::<toml::Table>(&new.scenario),
    );
    let difference = match parsed {
        (Ok(a), Ok(b)) => journal::first_difference(&a, &b),
        _ => None,
    };
    if let Some((key, was, now)) = difference {
        let e = loaded.error_at(
            &key,
            format!(
                "differs from the interrupted run whose journal is {j} (there {was}, now {now}); {hint}"
            ),
        );
        return Err(bad(e));
    }
    if old.data != new.data {
        return Err(CliError::bad(format!(
            "{j}: an empirical data file the scenario reads changed since the interrupted run; {hint}"
        )));
    }
    if old.herdsim != new.herdsim {
        return Err(CliError::bad(format!(
            "{j}: written by herdsim {}, this is herdsim {}; {hint}",
            old.herdsim, new.herdsim
        )));
    }
    Err(CliError::bad(format!(
        "{j}: the run changed since it was interrupted (fingerprint {}, now {}); {hint}",
        old.fingerprint, new.fingerprint
    )))
}

/// Refuse a run whose agents do not fit the memory budget, before they are
/// allocated; return how many events each replication may hold pending
/// (its share of what is left: docs/limits.md).
fn check_memory(
    plan: &Plan,
    run_points: &[usize],
    threads: usize,
    budget: u64,
) -> Result<usize, CliError> {
    let agents = |p: usize| plan.points.get(p).map_or(0, |p| p.scenario.agent_count());
    let (most, at) = run_points
        .iter()
        .map(|&p| (agents(p), p))
        .max()
        .unwrap_or((0, 0));
    let per_points: u64 = run_points
        .iter()
        .map(|&p| agents(p).saturating_mul(memory::POINT_AGENT_BYTES))
        .fold(0, u64::saturating_add);
    let (plan_need, _) = memory::plan_bytes(
        &plan.loaded,
        plan.points.len() as u64,
        plan.policies.len() as u64,
        u64::from(plan.reps),
    );
    // Replications run concurrently, up to one per thread.
    let jobs = (run_points.len() as u64)
        .saturating_mul(plan.policies.len() as u64)
        .saturating_mul(u64::from(plan.reps));
    let threads = (threads as u64).min(jobs.max(1));
    let runs = threads.saturating_mul(memory::run_bytes(most));
    // Room for each replication to relay at least a few messages to all.
    let events_floor =
        threads.saturating_mul(most.saturating_mul(4).saturating_mul(memory::EVENT_BYTES));
    let need = plan_need.saturating_add(per_points).saturating_add(runs);
    if need.saturating_add(events_floor) > budget {
        let key = plan
            .points
            .get(at)
            .and_then(|p| {
                p.scenario
                    .agents
                    .iter()
                    .position(|g| g.count > 0)
                    .map(|g| format!("agents.{g}.count"))
            })
            .unwrap_or_else(|| "agents".into());
        return Err(bad(plan.loaded.error_at(
            &key,
            format!(
                "{most} agents on {threads} thread{} need about {} of memory, more than the {} \
                 this run may use (--max-memory; default: the memory available); use fewer \
                 agents or fewer --jobs",
                if threads == 1 { "" } else { "s" },
                memory::show(need.saturating_add(events_floor)),
                memory::show(budget)
            ),
        )));
    }
    let per_run = (budget - need) / threads / memory::EVENT_BYTES;
    Ok(usize::try_from(per_run).unwrap_or(usize::MAX))
}

/// A replication that hit a run limit (docs/limits.md) is bad input: the
/// scenario asks for more than herdsim does in one run.
fn limit_is_bad_input(e: anyhow::Error, file: &str) -> CliError {
    if e.downcast_ref::<crate::model::RunLimit>().is_some() {
        CliError::bad(format!("{file}: {e:#}"))
    } else {
        CliError::Failure(e)
    }
}

/// All cores (at most [`sweep::MAX_THREADS`]).
pub fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(sweep::MAX_THREADS)
}

/// `1 thread`, `2 threads`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}
