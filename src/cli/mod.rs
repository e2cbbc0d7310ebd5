//! The command line: argument parsing and dispatch only. Each subcommand
//! lives in its own file.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod arbitrate;
pub mod memory;
pub mod merge;
pub mod plot;
pub mod run;
pub mod tune;
pub mod validate;

/// Exit status 2: bad input (a file, a field, an argument).
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit status 1: any other failure.
pub const EXIT_FAILURE: u8 = 1;

/// An error that ends a subcommand, with the exit status it maps to.
#[derive(Debug)]
pub enum CliError {
    /// Bad input: exit 2. The message names the file, field and line.
    BadInput(String),
    /// Anything else: exit 1.
    Failure(anyhow::Error),
}

impl CliError {
    pub fn bad(msg: impl Into<String>) -> Self {
        CliError::BadInput(msg.into())
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        CliError::Failure(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Failure(e.into())
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "herdsim",
    version,
    about = "Deterministic simulator of RESPONDING_TO floor control for LLM agents in one chat channel"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Simulate a scenario (default: the embedded default scenario) and write results.
    Run(run::Args),
    /// Replay timestamped server inputs (JSON Lines on stdin) through a policy.
    Arbitrate(arbitrate::Args),
    /// Check a scenario file and print it resolved, every default filled in.
    Validate(validate::Args),
    /// Draw comparison plots from results, or a timeline from a trace.
    Plot(plot::Args),
    /// Join the CSVs of sharded runs into the single-run result.
    Merge(merge::Args),
    /// Recommend a CSMA window and claim TTL under a latency budget.
    Tune(tune::Args),
}

/// Parse arguments, run the subcommand, map errors to exit codes.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_BAD_INPUT } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Arbitrate(args) => arbitrate::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Tune(args) => tune::run(args),
    };
    match result {
        Ok(code) => code,
        Err(CliError::BadInput(msg)) => {
            eprintln!("herdsim: error: {msg}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
        Err(CliError::Failure(e)) => {
            eprintln!("herdsim: error: {e:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}
