//! `herdsim run`: simulate a scenario and write its results.

use super::CliError;
use crate::floor::PolicyKind;
use crate::metrics::METRICS;
use crate::model::{Prepared, TraceBuf, simulate};
use crate::report::{atomic, csv_out, table};
use crate::scenario::{Loaded, Point};
use crate::sweep;
use std::path::PathBuf;
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
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// No progress bar and no timing line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Everything a run needs once the input is checked.
pub struct Plan {
    pub loaded: Loaded,
    pub points: Vec<Point>,
    pub prepared: Vec<(usize, Prepared)>,
    pub policies: Vec<PolicyKind>,
    pub reps: u32,
    pub seed: u64,
    pub name: String,
}

/// Load, override and check a scenario; any problem is bad input.
pub fn load_plan(
    scenario: Option<&PathBuf>,
    sets: &[String],
    seed: Option<u64>,
    reps: Option<u32>,
) -> Result<Plan, CliError> {
    let mut loaded = match scenario {
        Some(p) => Loaded::from_file(p),
        None => Loaded::builtin_default(),
    }
    .map_err(|e| CliError::bad(e.to_string()))?;
    for s in sets {
        loaded
            .apply_set(s)
            .map_err(|e| CliError::bad(e.to_string()))?;
    }
    if let Some(seed) = seed {
        loaded
            .apply_set(&format!("seed={seed}"))
            .map_err(|e| CliError::bad(format!("--seed: {e}")))?;
    }
    if let Some(reps) = reps {
        loaded
            .apply_set(&format!("reps={reps}"))
            .map_err(|e| CliError::bad(format!("--reps: {e}")))?;
    }
    let points = loaded.points().map_err(|e| CliError::bad(e.to_string()))?;
    let base = loaded.base().map_err(|e| CliError::bad(e.to_string()))?;
    let mut prepared = Vec::with_capacity(points.len());
    for p in &points {
        let w = Prepared::new(&p.scenario, &loaded.base_dir)
            .map_err(|e| CliError::bad(format!("{}: {e}", loaded.file)))?;
        prepared.push((p.index, w));
    }
    Ok(Plan {
        policies: base.policy_kinds(),
        reps: base.reps,
        seed: base.seed,
        name: base.name.clone(),
        loaded,
        points,
        prepared,
    })
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let plan = load_plan(args.scenario.as_ref(), &args.set, args.seed, args.reps)?;
    let trace_policy = match &args.trace_policy {
        Some(p) => Some(
            p.parse::<PolicyKind>()
                .map_err(|e| CliError::bad(format!("--trace-policy: {e}")))?,
        ),
        None => None,
    };
    let threads = args.jobs.unwrap_or_else(default_jobs);
    if threads == 0 {
        return Err(CliError::bad("--jobs: must be at least 1"));
    }
    let point_ids: Vec<usize> = plan.points.iter().map(|p| p.index).collect();
    let jobs = sweep::plan(plan.seed, &point_ids, &plan.policies, plan.reps);
    let bar = sweep::progress(jobs.len() as u64, args.quiet);
    let started = Instant::now();
    let rows = sweep::execute(&jobs, &plan.prepared, threads, &bar)?;
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();

    let keys: Vec<String> = plan.loaded.sweep.iter().map(|(k, _)| k.clone()).collect();
    let params = |point: usize| -> Vec<(String, String)> {
        plan.points
            .iter()
            .find(|p| p.index == point)
            .map(|p| p.params.clone())
            .unwrap_or_default()
    };
    let summary = csv_out::summarise(&rows, &params);
    let dir = args.out.join(&plan.name);
    atomic::write(
        &dir.join("runs.csv"),
        &csv_out::runs_csv(&plan.name, &keys, &rows, &params)?,
    )?;
    atomic::write(
        &dir.join("summary.csv"),
        &csv_out::summary_csv(&plan.name, &keys, &summary)?,
    )?;
    if let Some(path) = &args.trace {
        let policy = trace_policy.unwrap_or(plan.policies[0]);
        let (point, world) = &plan.prepared[0];
        let mut buf = TraceBuf::new();
        simulate(world, policy, sweep::rep_seed(plan.seed, *point, 0), Some(&mut buf));
        atomic::write(path, &buf)?;
    }
    print!("{}", table::render(&keys, &summary));
    if !args.quiet {
        let ev = METRICS.iter().position(|m| *m == "events").unwrap_or(0);
        let events: f64 = rows.iter().map(|r| r.result.values[ev]).sum();
        eprintln!(
            "herdsim: {} runs, {:.0} events in {:.2} s ({:.1} M events/s on {} threads); wrote {}",
            rows.len(),
            events,
            elapsed,
            events / elapsed.max(1e-9) / 1e6,
            threads,
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// All cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
