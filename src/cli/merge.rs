//! `herdsim merge`: join the results of `herdsim run --shard K/N` into the
//! single-run result, through [`crate::sweep::merge`] (which checks every shard
//! against the plan it records before it writes anything).

use super::{CliError, note};
use crate::report::table;
use crate::sweep::merge;
use crate::term::Term;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Results folders of the shards (`<out>/<name>` of each `run --shard`,
    /// or its `<out>` when it holds one scenario).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Output directory; the merged files go to `<out>/<scenario name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Do not draw `comparison.png` for a sweep (as `run` does).
    #[arg(long)]
    pub no_plot: bool,
    /// No table on stdout and no note on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let term = Term::notes(args.quiet);
    let m = merge::merge(&args.dirs, &args.out, !args.no_plot, &term)?;
    if !args.quiet {
        super::print_out(&table::render(&m.keys, &m.summary))?;
        note(format_args!(
            "herdsim: merged {} shard{} of `{}` ({} points); wrote {}",
            m.shards,
            if m.shards == 1 { "" } else { "s" },
            m.scenario,
            m.points,
            m.dir.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}
