//! `herdsim tune`: recommend a CSMA window and claim TTL under a latency
//! budget, through [`crate::tune::request`] (see [`crate::tune`] for the method):
//! every check first, then the search, then `<out>/<name>/tune/`.

use super::{CliError, note, plural};
use crate::sweep;
use crate::term::Term;
use crate::tune::request::{self, Request};
use std::path::PathBuf;
use std::process::ExitCode;

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
    #[arg(
        long = "max-ttfr-p95-ms",
        value_name = "MS",
        allow_negative_numbers = true
    )]
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
    /// Also choose the scheme (`[schemes] scheme`): `all`, or names
    /// separated by commas (`open,owner,mentions`). Each is searched over
    /// the settings that matter under it, the cooldown among them, and the
    /// output names the best scheme and what the runner-up costs.
    #[arg(long, value_name = "all|SCHEME,...")]
    pub schemes: Option<String>,
    /// Master seed (default: the scenario's `seed`).
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<u64>)]
    pub seed: Option<u64>,
    /// Replications of every candidate (default: the scenario's `reps`).
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<u32>)]
    pub reps: Option<u32>,
    /// Most replications for the best two when they are too close to call
    /// (default: 4 x --reps).
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<u32>)]
    pub max_reps: Option<u32>,
    /// Grid levels per searched parameter (default: 3 to 9, about 200
    /// candidates at most).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = super::whole::<usize>)]
    pub grid: Option<usize>,
    /// Worker threads, 1 to 1024 (default: all cores). Results do not depend on it.
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<usize>)]
    pub jobs: Option<usize>,
    /// No progress bar and no timing line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Output directory; files go to `<out>/<scenario name>/tune/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Memory the search may use (bytes, or e.g. 512M, 4G); a search that
    /// needs more is refused before it starts (default: the available memory).
    #[arg(long, value_name = "SIZE", value_parser = |s: &str| crate::sweep::memory::parse_size(s))]
    pub max_memory: Option<u64>,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let search = Request {
        scenario: args.scenario,
        text: None,
        sets: args.set,
        objective: args.objective,
        max_ttfr_p95_ms: args.max_ttfr_p95_ms,
        params: args.param,
        policy: args.policy,
        seed: args.seed,
        reps: args.reps,
        max_reps: args.max_reps,
        grid: args.grid,
        threads: args.jobs.unwrap_or_else(sweep::default_threads),
        max_memory: args.max_memory,
        schemes: args.schemes,
    }
    .check()?;
    let never = std::sync::atomic::AtomicBool::new(false);
    let done = request::run(&search, &args.out, &Term::tune(args.quiet), &never)?;
    super::print_out(&done.text)?;
    if !args.quiet {
        note(format_args!(
            "herdsim: tune: {} candidates, {} runs ({} simulated, the others the same \
             as a run under another TTL) in {:.1} s on {}; wrote {}",
            done.outcome.candidates.len(),
            done.outcome.runs,
            done.outcome.simulated,
            done.elapsed,
            plural(search.settings.threads, "thread"),
            done.dir.display()
        ));
    }
    if let Some(why) = request::unmet(&search, &done) {
        return Err(CliError::Failure(anyhow::anyhow!("{why}")));
    }
    Ok(ExitCode::SUCCESS)
}
