//! Placeholder for `herdsim run` while the simulator lands.

use super::CliError;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> Result<ExitCode, CliError> {
    Err(CliError::Failure(anyhow::anyhow!("`herdsim run` is not built in yet")))
}
