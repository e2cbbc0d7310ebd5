//! `herdsim ui`: flags only; the server is [`crate::ui`] (docs/ui.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use super::CliError;
use crate::ui::{self, Options};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file (TOML). Without it, the built-in default scenario.
    pub scenario: Option<PathBuf>,
    /// Address to listen on: loopback only (127.0.0.1 or [::1]); port 0
    /// takes a free one. The URL is printed on stdout.
    #[arg(long, default_value = ui::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// The only folder the page may write into (this version writes nothing:
    /// summary.csv downloads from the page).
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Master seed the page starts from (overrides the file's `seed`).
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<u64>)]
    pub seed: Option<u64>,
    /// Print nothing on stderr but errors (the URL still goes to stdout).
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: Args) -> Result<ExitCode, CliError> {
    ui::run_foreground(Options {
        listen: a.listen,
        scenario: a.scenario,
        out: a.out,
        seed: a.seed,
        quiet: a.quiet,
    })
    .map(|()| ExitCode::SUCCESS)
}
