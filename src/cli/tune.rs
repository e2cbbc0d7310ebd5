//! `herdsim tune`: recommend a CSMA window and claim TTL under a latency
//! budget (see [`crate::tune`] for the method).
//!
//! Every check of the input happens before anything runs or is written, so
//! bad input (exit 2) never leaves a partial results folder. Outputs go to
//! `<out>/<scenario name>/tune/`: `candidates.csv`, `pareto.png` and
//! `recommended.env` (the text printed on stdout), each written atomically.

use super::CliError;
use crate::floor::PolicyKind;
use crate::report::atomic;
use crate::report::plot::pareto::pareto_figure;
use crate::scenario::Loaded;
use crate::tune::space::{Space, parse_param};
use crate::tune::{self, Settings, TuneError, Weights, report};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file (TOML). Without it, the built-in default scenario.
    pub scenario: Option<PathBuf>,
    /// Objective weights of duplicate_rate, wasted_inference_rate and
    /// unanswered_rate: `W_DUP,W_WASTE,W_UNANS` or named, e.g.
    /// `dup=1,waste=0.5,unanswered=4` (unnamed ones stay 1).
    #[arg(long, value_name = "WEIGHTS", default_value = "1,1,1")]
    pub objective: String,
    /// Latency budget: the mean p95 time to first response (ms) a setting
    /// may have. Without it latency does not count at all (the output then
    /// says what the recommendation cost in p95).
    #[arg(long = "max-ttfr-p95-ms", value_name = "MS")]
    pub max_ttfr_p95_ms: Option<f64>,
    /// Search this key over LO..HI (optionally in steps of STEP), or pin it
    /// to VALUE. Built in: agents.csma.min_ms=0..10000,
    /// agents.csma.max_ms=1000..30000, server.ttl_ms=5000..120000.
    #[arg(long = "param", value_name = "KEY=LO..HI[:STEP]")]
    pub param: Vec<String>,
    /// Override any scenario key first: `--set workload.count=300` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Arbitration policy to tune for.
    #[arg(long, default_value = "spec")]
    pub policy: String,
    /// Master seed (default: the scenario's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Replications of every candidate (default: the scenario's `reps`).
    #[arg(long)]
    pub reps: Option<u32>,
    /// Most replications for the best two when they are too close to call
    /// (default: 4 x --reps).
    #[arg(long)]
    pub max_reps: Option<u32>,
    /// Grid levels per searched parameter (default: 3 to 9, about 200
    /// candidates at most).
    #[arg(long, value_name = "N")]
    pub grid: Option<usize>,
    /// Worker threads, 1 to 1024 (default: all cores). Results do not depend on it.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// No progress bar and no timing line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Output directory; files go to `<out>/<scenario name>/tune/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
}

/// Most candidates a grid may have.
const MAX_GRID: usize = 20_000;

/// Parse `--objective`.
pub fn parse_weights(text: &str) -> Result<Weights, String> {
    let flag = format!("--objective {text}");
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let mut w = Weights::default();
    let named = parts.iter().any(|p| p.contains('='));
    if named {
        let mut seen = [false; 3];
        for p in &parts {
            let Some((k, v)) = p.split_once('=') else {
                return Err(format!(
                    "{flag}: `{p}` is not NAME=WEIGHT (names: dup, waste, unanswered)"
                ));
            };
            let slot = match k.trim() {
                "dup" | "duplicate" | "duplicate_rate" => 0,
                "waste" | "wasted" | "wasted_inference_rate" => 1,
                "unans" | "unanswered" | "unanswered_rate" => 2,
                other => {
                    return Err(format!(
                        "{flag}: unknown name `{other}` (names: dup, waste, unanswered)"
                    ));
                }
            };
            if seen[slot] {
                return Err(format!("{flag}: `{}` is given twice", k.trim()));
            }
            seen[slot] = true;
            let x = weight(v, &flag)?;
            match slot {
                0 => w.duplicate = x,
                1 => w.wasted = x,
                _ => w.unanswered = x,
            }
        }
    } else {
        if parts.len() != 3 {
            return Err(format!(
                "{flag}: expected three weights W_DUP,W_WASTE,W_UNANS (e.g. 1,1,1), got {}",
                parts.len()
            ));
        }
        w = Weights {
            duplicate: weight(parts[0], &flag)?,
            wasted: weight(parts[1], &flag)?,
            unanswered: weight(parts[2], &flag)?,
        };
    }
    if w.duplicate + w.wasted + w.unanswered == 0.0 {
        return Err(format!("{flag}: at least one weight must be positive"));
    }
    Ok(w)
}

fn weight(v: &str, flag: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!(
            "{flag}: weight `{}` must be a number >= 0",
            v.trim()
        )),
    }
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    // Input, all of it, before anything runs.
    let mut loaded = match &args.scenario {
        Some(p) => Loaded::from_file(p),
        None => Loaded::builtin_default(),
    }
    .map_err(|e| CliError::bad(e.to_string()))?;
    for s in &args.set {
        loaded
            .apply_set(s)
            .map_err(|e| CliError::bad(e.to_string()))?;
    }
    if let Some(axis) = loaded.sweep.first() {
        let e = loaded.error_at(
            &format!("sweep.{}", axis.key),
            format!(
                "herdsim tune searches its own grid and does not run a [sweep]; remove the \
                 sweep or pin the key with --set {}=VALUE",
                axis.key
            ),
        );
        return Err(CliError::bad(e.to_string()));
    }
    let base = loaded.base().map_err(|e| CliError::bad(e.to_string()))?;
    let policy = args
        .policy
        .parse::<PolicyKind>()
        .map_err(|e| CliError::bad(format!("--policy {}: {e}", args.policy)))?;
    let weights = parse_weights(&args.objective).map_err(CliError::bad)?;
    if let Some(b) = args
        .max_ttfr_p95_ms
        .filter(|b| !(b.is_finite() && *b > 0.0))
    {
        return Err(CliError::bad(format!(
            "--max-ttfr-p95-ms {b}: must be a positive number of milliseconds"
        )));
    }
    let reps = args.reps.unwrap_or(base.reps);
    if reps < 2 {
        let origin = match args.reps {
            Some(r) => format!("--reps {r}"),
            None => format!("{}: key `reps` ({reps})", loaded.file),
        };
        return Err(CliError::bad(format!(
            "{origin}: tune needs at least 2 replications per candidate to compare them"
        )));
    }
    let max_reps = args.max_reps.unwrap_or(reps.saturating_mul(4));
    if max_reps < reps {
        return Err(CliError::bad(format!(
            "--max-reps {max_reps}: must be at least --reps ({reps})"
        )));
    }
    let threads = args.jobs.unwrap_or_else(super::run::default_jobs);
    if threads == 0 || threads > crate::sweep::MAX_THREADS {
        return Err(CliError::bad(format!(
            "--jobs {threads}: must be from 1 to {} worker threads",
            crate::sweep::MAX_THREADS
        )));
    }
    let params = args
        .param
        .iter()
        .map(|p| parse_param(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CliError::bad)?;
    let space = Space::new(&loaded, &params).map_err(CliError::bad)?;
    let levels = args.grid.unwrap_or_else(|| space.default_levels());
    if levels < 2 {
        return Err(CliError::bad(format!(
            "--grid {levels}: must be at least 2"
        )));
    }
    let grid_size = space
        .dims
        .iter()
        .filter(|d| d.free())
        .try_fold(1usize, |n, _| n.checked_mul(levels))
        .unwrap_or(usize::MAX);
    if grid_size > MAX_GRID {
        return Err(CliError::bad(format!(
            "--grid {levels}: {levels} levels over {} parameters is more than {MAX_GRID} \
             candidates; use fewer levels",
            space.free_count()
        )));
    }
    let settings = Settings {
        policy,
        seed: args.seed.unwrap_or(base.seed),
        reps,
        max_reps,
        levels,
        weights,
        budget_ms: args.max_ttfr_p95_ms,
        threads,
        quiet: args.quiet,
    };

    // The outputs' folder: a folder, not an input, and this process's alone.
    let dir = args.out.join(&base.name).join("tune");
    for d in [&args.out, &dir] {
        if d.exists() && !d.is_dir() {
            return Err(CliError::bad(format!(
                "--out {}: {} exists and is not a folder",
                args.out.display(),
                d.display()
            )));
        }
    }
    if let Some(input) = &args.scenario
        && ["candidates.csv", "pareto.png", "recommended.env"]
            .iter()
            .any(|f| crate::report::paths::same(&dir.join(f), input))
    {
        return Err(CliError::bad(format!(
            "--out {}: tune would overwrite its input {} with its results; choose another --out",
            args.out.display(),
            input.display()
        )));
    }
    let _lock = super::run::lock_folder(&dir, args.quiet)?;

    // The search.
    let started = Instant::now();
    let outcome = tune::tune(&loaded, &space, &settings).map_err(|e| match e {
        TuneError::Input(m) => CliError::BadInput(m),
        TuneError::Failure(e) => CliError::Failure(e),
    })?;
    let elapsed = started.elapsed().as_secs_f64();

    // Outputs.
    atomic::write(
        &dir.join("candidates.csv"),
        &report::candidates_csv(&base.name, &space, &outcome, &settings)?,
    )?;
    pareto_figure(
        &report::pareto_chart(&base.name, &outcome, &settings),
        &dir.join("pareto.png"),
    )?;
    let text = report::recommendation(&base.name, &space, &outcome, &settings);
    let env = dir.join("recommended.env");
    if outcome.chosen.is_some() {
        atomic::write(&env, text.as_bytes())?;
    } else if env.exists() {
        // A stale recommendation would read as this run's.
        std::fs::remove_file(&env)?;
    }
    super::print_out(&text)?;
    if !args.quiet {
        super::note(format_args!(
            "herdsim: tune: {} candidates, {} runs in {:.1} s on {}; wrote {}",
            outcome.candidates.len(),
            outcome.runs,
            elapsed,
            super::run::plural(threads, "thread"),
            dir.display()
        ));
    }
    if outcome.chosen.is_none() {
        return Err(CliError::Failure(anyhow::anyhow!(
            "no setting in the searched ranges meets --max-ttfr-p95-ms {}",
            args.max_ttfr_p95_ms
                .map_or_else(String::new, crate::report::csv_out::num)
        )));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_parse_both_ways() {
        let w = parse_weights("1,0.5,4").expect("ok");
        assert_eq!((w.duplicate, w.wasted, w.unanswered), (1.0, 0.5, 4.0));
        let w = parse_weights("waste=2, unanswered=0").expect("ok");
        assert_eq!((w.duplicate, w.wasted, w.unanswered), (1.0, 2.0, 0.0));
        for bad in [
            "1,1",
            "1,-1,1",
            "0,0,0",
            "dup=1,dup=2",
            "speed=1",
            "1,x,1",
            "1,inf,1",
        ] {
            let e = parse_weights(bad).expect_err(bad);
            assert!(e.starts_with("--objective"), "{e}");
        }
    }
}
