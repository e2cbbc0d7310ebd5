//! The command line: argument parsing and dispatch only. Each subcommand
//! lives in its own file.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod arbitrate;
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
    about = "Deterministic simulator of RESPONDING_TO floor control for LLM agents in one chat channel",
    after_help = "Start with `herdsim run scenarios/default.toml` in the source tree. Documentation: \
                  README.md and docs/ in the repository."
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

/// An argument-parser error as the one line every other error is: clap's
/// message without its `error: ` prefix, usage block and colours, plus where
/// to look (`herdsim run --help`).
fn parse_error_line(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "no subcommand: give one of run, validate, tune, plot, merge, arbitrate \
                (`herdsim --help` says what each does)"
            .to_string();
    }
    let text = e.render().to_string();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let first = lines.first().copied().unwrap_or("bad arguments");
    let mut first = first.strip_prefix("error: ").unwrap_or(first).to_string();
    // Lines right under the message belong to it (the missing arguments).
    let more: Vec<&str> = lines
        .iter()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .copied()
        .collect();
    if !more.is_empty() {
        first = format!("{} {}", first, more.join(", "));
    }
    let tip = lines
        .iter()
        .find_map(|l| l.strip_prefix("tip: "))
        .map(|t| format!("; {t}"))
        .unwrap_or_default();
    let sub = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .filter(|a| {
            ["run", "arbitrate", "validate", "plot", "merge", "tune"].contains(&a.as_str())
        });
    let help = match sub {
        Some(s) => format!("herdsim {s} --help"),
        None => "herdsim --help".to_string(),
    };
    format!("{first}{tip} (`{help}` lists the options)")
}

/// Parse arguments, run the subcommand, map errors to exit codes.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version: clap's own text on stdout.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("herdsim: error: {}", parse_error_line(&e));
            return ExitCode::from(EXIT_BAD_INPUT);
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
