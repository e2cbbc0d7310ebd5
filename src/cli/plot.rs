//! `herdsim plot`. Not implemented yet.

use super::CliError;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> Result<ExitCode, CliError> {
    Err(CliError::Failure(anyhow::anyhow!("`herdsim plot` is not implemented yet")))
}
