//! `herdsim run`: simulate a scenario and write its results, through
//! [`crate::sweep::runner`] (which checks everything before it writes anything,
//! journals each replication and resumes an interrupted run).

use super::{CliError, note, plural};
use crate::report::table;
use crate::sweep::runner::{self, JournalMode, Options, Outcome};
use crate::sweep::{self, Plan, Shard, ShardSpec, memory};
use crate::term::Term;
use crate::term::interrupt;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file (TOML). Without it, the built-in default scenario.
    pub scenario: Option<PathBuf>,
    /// Master seed (overrides the file's `seed`).
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<u64>)]
    pub seed: Option<u64>,
    /// Replications per point and policy (overrides the file's `reps`).
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<u32>)]
    pub reps: Option<u32>,
    /// Override any key: `--set server.ttl_ms=30000` (repeatable; `sweep.KEY=[..]` sets a sweep axis).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Output directory; results go to `<out>/<scenario name>/`, replacing
    /// the results of another plan there (and what they left: figures,
    /// traces, tune/).
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Write every message and state change of one replication (JSON Lines).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Policy of the traced replication (default: the first listed).
    #[arg(long, value_name = "POLICY")]
    pub trace_policy: Option<String>,
    /// Worker threads, 1 to 1024 (default: all cores).
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<usize>)]
    pub jobs: Option<usize>,
    /// Run only the sweep points p with p % N == K (K counts from 0), for
    /// array jobs; prints no table: join the shards with `herdsim merge`.
    /// `auto`: K and N from a Slurm array task; `auto/N`: K from
    /// SLURM_ARRAY_TASK_ID or Kubernetes' JOB_COMPLETION_INDEX.
    #[arg(long, value_name = "K/N|auto[/N]", value_parser = |s: &str| s.parse::<ShardSpec>())]
    pub shard: Option<ShardSpec>,
    /// Complete an interrupted run from the journal in its results folder
    /// (runs from the start when there is none).
    #[arg(long, conflicts_with = "fresh")]
    pub resume: bool,
    /// Discard the journal of an interrupted run and start over.
    #[arg(long)]
    pub fresh: bool,
    /// Do not draw the standard figure `comparison.png`.
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

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let budget = memory::budget(args.max_memory);
    let (scenario, sets) = (args.scenario.as_deref(), &args.set);
    let plan = Plan::load(scenario, sets, args.seed, args.reps, budget)?;
    for w in plan.loaded.scheme_warnings() {
        super::note(format_args!("herdsim: warning: {w}"));
    }
    let shard = match args.shard {
        Some(spec) => Some(resolve_shard(spec, plan.points.len(), args.quiet)?),
        None => None,
    };
    let journal = match (args.resume, args.fresh) {
        (true, _) => JournalMode::Resume,
        (_, true) => JournalMode::Fresh,
        _ => JournalMode::Refuse,
    };
    let opts = Options {
        out: args.out.clone(),
        shard,
        threads: args.jobs.unwrap_or_else(sweep::default_threads),
        journal,
        trace: args.trace.clone(),
        trace_policy: args.trace_policy.clone(),
        plot: !args.no_plot,
        budget,
    };
    let run = runner::prepare(&plan, &opts)?;
    let term = Term::sweep(args.quiet);
    let stop = interrupt::catch_run(run.journal(), term.bar());
    let done = match run.start(&term, stop)? {
        Outcome::Finished(done) => done,
        Outcome::Interrupted {
            saved,
            total,
            journal,
        } => {
            note(format_args!(
                "herdsim: interrupted: {saved} of {total} replications are saved in {}; to \
                 complete the run:\n  {}",
                journal.display(),
                interrupt::resume_command()
            ));
            return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
        }
    };
    // A shard's rows are part of the sweep: `herdsim merge` prints the table.
    if shard.is_none() {
        super::print_out(&table::render(&done.keys, &done.summary))?;
    }
    if !args.quiet {
        let resumed = match done.resumed {
            0 => String::new(),
            n => format!(" (+{n} resumed from the journal)"),
        };
        note(format_args!(
            "herdsim: {}{resumed}, {:.0} events in {:.2} s ({:.1} M events/s on {}); wrote {}",
            plural(done.runs, "run"),
            done.events,
            done.elapsed,
            done.events / done.elapsed.max(1e-9) / 1e6,
            plural(opts.threads, "thread"),
            done.dir.display()
        ));
        if let Some(s) = shard {
            note(format_args!(
                "herdsim: shard {s} holds part of the sweep: join the shards with `herdsim merge` \
                 for the table and the figure"
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--shard`: a fixed K/N, or `auto` read from the scheduler's environment
/// (said on stderr, as a batch log wants it, unless --quiet).
fn resolve_shard(spec: ShardSpec, points: usize, quiet: bool) -> Result<Shard, CliError> {
    let env = |var: &str| std::env::var_os(var).map(|v| v.to_string_lossy().into_owned());
    let (shard, source) = spec.resolve(&env, points).map_err(CliError::Input)?;
    if let (Some(source), false) = (source, quiet) {
        note(format_args!("herdsim: shard {shard} ({source})"));
    }
    Ok(shard)
}
