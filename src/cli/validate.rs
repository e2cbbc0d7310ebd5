//! `herdsim validate`: check a scenario and print it resolved.

use super::CliError;
use crate::scenario::Loaded;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file (TOML).
    pub scenario: PathBuf,
    /// Override any key, as for `run` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let mut loaded = Loaded::from_file(&args.scenario).map_err(|e| CliError::bad(e.to_string()))?;
    for s in &args.set {
        loaded.apply_set(s).map_err(|e| CliError::bad(e.to_string()))?;
    }
    // Every sweep point must be valid too.
    let points = loaded.points().map_err(|e| CliError::bad(e.to_string()))?;
    print!(
        "{}",
        loaded.resolved_toml().map_err(|e| CliError::bad(e.to_string()))?
    );
    eprintln!(
        "herdsim: {} is valid ({} sweep point{})",
        loaded.file,
        points.len(),
        if points.len() == 1 { "" } else { "s" }
    );
    Ok(ExitCode::SUCCESS)
}
