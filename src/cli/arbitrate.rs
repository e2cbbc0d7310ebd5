//! `herdsim arbitrate`. TODO(helper): implement.

use super::CliError;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> Result<ExitCode, CliError> {
    Ok(ExitCode::SUCCESS)
}
