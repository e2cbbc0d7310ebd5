//! The command line: argument parsing and dispatch only. Each subcommand
//! lives in its own file.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

pub mod arbitrate;
pub mod calibrate;
pub mod live;
pub mod merge;
pub mod observe;
pub mod plot;
pub mod run;
pub mod serve;
pub mod tune;
pub mod ui;
pub mod validate;

pub use crate::term::{note, plural, print_out};

pub use crate::error::{EXIT_BAD_INPUT, EXIT_FAILURE};

/// An error that ends a subcommand: [`crate::error::Error`], whose
/// [`exit_code`](crate::error::Error::exit_code) is the exit status.
pub use crate::error::Error as CliError;

#[derive(Parser, Debug)]
#[command(
    name = "herdsim",
    version = herdsim_lab::VERSION,
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
    /// Run a live WebSocket chat server (agentchat subset) arbitrated by a policy.
    Serve(serve::Args),
    /// Run the scenario's agents against a real chat server in scaled real time and measure.
    Live(live::Args),
    /// Watch a channel as a passive member, record what it sees, then calibrate a scenario from it.
    Observe(observe::Args),
    /// Fit a scenario to a frame log (observe's, a recorded session or a live trace) and predict with it.
    Calibrate(calibrate::Args),
    /// Serve a local page to explore a scenario's settings in the browser (loopback only).
    Ui(ui::Args),
}

/// The subcommands' names, as the parser knows them (so a new one is never
/// missing from an error message).
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

/// An argument-parser error as the one line every other error is: clap's
/// message without its `error: ` prefix, usage block and colours, plus where
/// to look (`herdsim run --help`).
///
/// This reads clap's rendered text: its kind and context items
/// (`ContextKind::InvalidArg`, `InvalidValue`, `Suggested`, ...) are the
/// pieces of the message, not the message, whose wording per kind (and a
/// value parser's own text) only clap's formatter puts together; building
/// it again from them would copy that formatter. The kind is used where it
/// decides (no subcommand).
fn parse_error_line(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return format!(
            "no subcommand: give one of {} (`herdsim --help` says what each does)",
            subcommands().join(", ")
        );
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
        .filter(|a| subcommands().contains(a));
    let help = match sub {
        Some(s) => format!("herdsim {s} --help"),
        None => "herdsim --help".to_string(),
    };
    format!("{first}{tip} (`{help}` lists the options)")
}

pub use crate::term::interrupt::EXIT_INTERRUPTED;

/// A whole number flag (`--reps`, `--jobs`, `--seed`): a negative or
/// non-numeric value is named with what is expected, instead of clap's
/// advice to pass `-3` after `--`.
pub fn whole<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.trim().parse::<T>().map_err(|_| {
        if s.trim().starts_with('-') {
            "must not be negative: expected a whole number".to_string()
        } else {
            "expected a whole number".to_string()
        }
    })
}

/// The command line parsed, `--help` wrapped to the terminal stdout is
/// (80 columns when it is not one).
fn parse() -> Result<Cli, clap::Error> {
    let width = crate::report::table::terminal_width();
    let matches = Cli::command().term_width(width).try_get_matches()?;
    Cli::from_arg_matches(&matches)
}

/// Parse arguments, run the subcommand, map errors to exit codes.
pub fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version: clap's own text on stdout; into a full
            // disk, say so in the status (a closed pipe is not an error).
            return match e.print() {
                Err(io) if io.kind() != std::io::ErrorKind::BrokenPipe => {
                    ExitCode::from(EXIT_FAILURE)
                }
                _ => ExitCode::SUCCESS,
            };
        }
        Err(e) => {
            note(format_args!("herdsim: error: {}", parse_error_line(&e)));
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
        Command::Serve(args) => serve::run(args),
        Command::Live(args) => live::run(args),
        Command::Observe(args) => observe::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Ui(args) => ui::run(args),
    };
    match result {
        Ok(code) => code,
        // The reader of stdout went away (`| head`): it has what it wanted.
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            note(format_args!("herdsim: error: {e}"));
            ExitCode::from(e.exit_code())
        }
    }
}
