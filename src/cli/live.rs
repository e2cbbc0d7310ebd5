//! `herdsim live`: flags -> [`crate::live::session`] -> exit status.

use super::CliError;
use crate::live::session::{self, Options};
use crate::term::interrupt;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file (TOML). Without it, a demonstration: the built-in default scenario reduced to 20 questions x 3 replications (about 40 s at the default speed), under spec unless --policy says otherwise.
    pub scenario: Option<PathBuf>,
    /// The chat server (ws://HOST:PORT, or wss://HOST[:PORT] over TLS). Without it, an embedded `herdsim serve` on a free loopback port.
    #[arg(long)]
    pub url: Option<String>,
    /// With a wss:// --url: also trust the CA certificate(s) in FILE (PEM), besides the built-in public roots (for a self-signed or private server).
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Scenario time runs this many times faster than real time (every scenario duration is divided by it).
    #[arg(long, default_value_t = 100.0, allow_negative_numbers = true)]
    pub speed: f64,
    /// Output directory; results go to `<out>/<scenario name>-live/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Master seed (overrides the file's `seed`).
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<u64>)]
    pub seed: Option<u64>,
    /// Replications (overrides the file's `reps`).
    #[arg(long, allow_negative_numbers = true, value_parser = super::whole::<u32>)]
    pub reps: Option<u32>,
    /// Override any key: `--set workload.count=50` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The policy the agents follow (and the embedded server runs); default: the scenario's first (spec for the demonstration).
    #[arg(long)]
    pub policy: Option<String>,
    /// Also simulate the scenario with the measured link delays and the same seeds, and compare.
    #[arg(long)]
    pub compare: bool,
    /// Ed25519 identities (keyed IDENTIFY), as agentchat clients use; the keys derive from a secret of yours, made on first use (--key-file).
    #[arg(long)]
    pub keyed: bool,
    /// With --keyed: the file holding your identities' secret (made if missing). Default: $HERDSIM_KEY_FILE, else $XDG_DATA_HOME/herdsim/live-identity.key (~/.local/share/... without XDG_DATA_HOME).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// A replication not over after this many seconds of real time fails (default: twice its expected length plus a minute).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub deadline: Option<f64>,
    /// The embedded server's input log (arbitrate format), first replication.
    #[arg(long, value_name = "FILE")]
    pub server_log: Option<PathBuf>,
    /// No progress bar and no notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let opts = Options {
        scenario: args.scenario,
        sets: args.set,
        seed: args.seed,
        reps: args.reps,
        policy: args.policy,
        url: args.url,
        ca_cert: args.ca_cert,
        speed: args.speed,
        out: args.out,
        keyed: args.keyed,
        key_file: args.key_file,
        deadline: args.deadline,
        compare: args.compare,
        quiet: args.quiet,
        server_log: args.server_log,
    };
    let checked = session::check(opts).map_err(CliError::from)?;
    if !args.quiet {
        for n in &checked.notes {
            super::note(format_args!("herdsim: note: {n}"));
        }
    }
    let stop = interrupt::catch(
        "herdsim: interrupted: writing what was measured so far (interrupt again to stop at once)",
        "herdsim: stopped at once; nothing written".into(),
    );
    let hook = |b: &indicatif::ProgressBar| interrupt::show(b.clone());
    let done = checked.run(stop, &hook).map_err(CliError::from)?;
    super::print_out(&done.stdout)?;
    if !args.quiet {
        for w in &done.warnings {
            super::note(format_args!("herdsim: warning: {w}"));
        }
    }
    if let Some(e) = done.failed {
        return Err(e.into());
    }
    if done.interrupted {
        super::note(format_args!(
            "herdsim: interrupted: {} holds what was measured until then ({} of {} replications, \
             the last one cut short; its open messages are counted as they stood)",
            done.dir.display(),
            done.reps_done,
            done.reps_planned
        ));
        return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}
