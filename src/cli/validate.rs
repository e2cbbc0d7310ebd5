//! `herdsim validate`: check a scenario and print it resolved.

use super::CliError;
use crate::sweep::{Plan, memory};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file (TOML).
    pub scenario: PathBuf,
    /// Override any key, as for `run` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Master seed, as for `run`.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Replications, as for `run`.
    #[arg(long)]
    pub reps: Option<u32>,
}

/// Check the file, the overrides and every sweep point (as `run` does
/// before it starts), then print the resolved scenario on stdout: every
/// default filled in, overrides applied, sweep ranges expanded. The output
/// is itself a valid scenario file that resolves to the same run.
pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let budget = memory::budget(None);
    let plan = Plan::load(
        Some(&args.scenario),
        &args.set,
        args.seed,
        args.reps,
        budget,
    )?;
    for w in plan.loaded.scheme_warnings() {
        super::note(format_args!("herdsim: warning: {w}"));
    }
    let text = plan
        .loaded
        .resolved_toml()
        .map_err(crate::sweep::Error::from)?;
    super::print_out(&text)?;
    if !text.ends_with('\n') {
        super::print_out("\n")?;
    }
    let n = plan.points.len();
    super::note(format_args!(
        "herdsim: {} is valid: {} sweep point{} x {} polic{} x {} replication{}",
        plan.loaded.file,
        n,
        if n == 1 { "" } else { "s" },
        plan.policies.len(),
        if plan.policies.len() == 1 { "y" } else { "ies" },
        plan.reps,
        if plan.reps == 1 { "" } else { "s" },
    ));
    Ok(ExitCode::SUCCESS)
}
