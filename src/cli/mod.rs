//! The command line: argument parsing and dispatch only. Each subcommand
//! lives in its own file.

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

pub mod arbitrate;
pub mod interrupt;
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
    version = concat!(env!("CARGO_PKG_VERSION"), " (build ", env!("HERDSIM_BUILD"), ")"),
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

/// Exit status of a run stopped by Ctrl-C (SIGINT), SIGTERM or SIGHUP.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Write `text` to stdout, all of it, and flush. Never panics (unlike
/// `print!`): a write error comes back as a failure naming stdout; a
/// closed pipe (`herdsim ... | head`) is recognised by [`main`], which
/// then exits quietly.
pub fn print_out(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CliError::Failure(anyhow::Error::new(e).context("cannot write to stdout")))
}

/// Write one diagnostic line to stderr. Never panics: when stderr itself
/// cannot be written (closed, a full disk), the line is lost and nothing
/// else happens (the exit status still tells).
pub fn note(line: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Whether an error is a write to a closed pipe (the reader went away).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Parse arguments, run the subcommand, map errors to exit codes.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_BAD_INPUT } else { 0 };
            return match e.print() {
                // `--help` or `--version` into a full disk: say so in the status.
                Err(io) if code == 0 && io.kind() != std::io::ErrorKind::BrokenPipe => {
                    ExitCode::from(EXIT_FAILURE)
                }
                _ => ExitCode::from(code),
            };
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
            note(format_args!("herdsim: error: {msg}"));
            ExitCode::from(EXIT_BAD_INPUT)
        }
        // The reader of stdout went away (`| head`): it has what it wanted.
        Err(CliError::Failure(e)) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(CliError::Failure(e)) => {
            note(format_args!("herdsim: error: {e:#}"));
            ExitCode::from(EXIT_FAILURE)
        }
    }
}
