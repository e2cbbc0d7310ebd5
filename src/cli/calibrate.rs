//! `herdsim calibrate`: flags -> [`crate::calibrate::run`] -> exit status.
//! The fitting flags are shared with `herdsim observe`, which calibrates
//! what it recorded.

use super::{CliError, note};
use crate::calibrate::{self, Options, fit::Settings};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How to read the log, and the fit's assumptions.
#[derive(clap::Args, Debug, Clone)]
pub struct Fitting {
    /// Scenario time per unit of the log's time: the --speed of the `live` run that was watched (1 for real agents).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// One-way link delay between the agents and the server, ms of the log's time (default: half the observer's shortest round trip, else 0).
    #[arg(long, value_name = "MS")]
    pub link_ms: Option<f64>,
    /// The server's claim TTL, ms of the log's time (agentchat: AGENTCHAT_CLAIM_TTL_MS).
    #[arg(long, value_name = "MS", default_value_t = 45000.0)]
    pub ttl_ms: f64,
    /// The agents' CSMA window when you know it (AGENTCHAT_CSMA_MIN_MS..MAX_MS), ms of the log's time: pins it, so that respond_p is well determined.
    #[arg(long, value_name = "MIN..MAX")]
    pub csma_ms: Option<String>,
    /// The server's policy (default: read from the wire: FLOOR_CLAIMED means agentchat-0.36, relayed claims spec, none none).
    #[arg(long)]
    pub policy: Option<String>,
    /// Replications of the fitted scenario's prediction (0: none).
    #[arg(long, default_value_t = 20)]
    pub reps: u32,
    /// Seed of the prediction, the Monte Carlo tests and the bootstrap.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads of the prediction, 1 to 1024 (default: all cores). Results do not depend on it.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Do not draw the figures.
    #[arg(long)]
    pub no_plot: bool,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The frame log: observe's, a recorded session (tests/data/agentchat-wire), or a `live` trace; plain or gzipped.
    pub log: PathBuf,
    /// Output directory; results go to `<out>/<name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// The results folder's name (default: the log's file name without .gz and .jsonl; for observe's frames.jsonl, its folder's).
    #[arg(long)]
    pub name: Option<String>,
    /// The channel to read (default: observe's, else the one with the most messages; a Slack export: the channel folder with the most bytes).
    #[arg(long)]
    pub channel: Option<String>,
    /// What LOG is: log (a frame log), slack (an export's folder or day file), discord (DiscordChatExporter JSON), matrix (room events) (default: told from it; docs/exports.md).
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// An export's authors (ids or names, comma-separated) read as humans (askers), whatever the platform says.
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub humans: Vec<String>,
    /// An export's authors (ids or names) read as bots (agents), whatever the platform says.
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub bots: Vec<String>,
    /// An export: what a bot's message outside threads and replies answers: next-human (the question before it, if no human spoke since) or ignore.
    #[arg(long, default_value = "next-human", value_name = "RULE")]
    pub unthreaded: String,
    /// An export: write author ids hashed (SHA-256) and no display names.
    #[arg(long)]
    pub hash_authors: bool,
    /// An export: read only the messages at or after this time: YYYY-MM-DD (midnight UTC) or RFC 3339 (2024-01-31T12:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// An export: read only the messages before this time (same format as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    #[command(flatten)]
    pub fitting: Fitting,
    /// No notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

impl Fitting {
    /// The settings, every flag checked.
    pub fn settings(&self) -> Result<Settings, CliError> {
        calibrate::flags::settings(&calibrate::flags::Flags {
            speed: self.speed,
            link_ms: self.link_ms,
            ttl_ms: self.ttl_ms,
            csma_ms: self.csma_ms.as_deref(),
            policy: self.policy.as_deref(),
            reps: self.reps,
            seed: self.seed,
        })
    }

    /// The prediction's threads, checked.
    pub fn jobs(&self) -> Result<usize, CliError> {
        calibrate::flags::jobs(self.jobs)
    }
}

/// Calibrate `log` into `dir` (locked by the caller) and report: the
/// report on stdout, warnings and the folder on stderr.
pub fn calibrate_into(
    log: &Path,
    dir: &Path,
    channel: Option<String>,
    f: &Fitting,
    quiet: bool,
    export: Option<&calibrate::export::Settings>,
) -> Result<calibrate::Finished, CliError> {
    let opts = Options {
        log: log.to_path_buf(),
        dir: dir.to_path_buf(),
        channel,
        settings: f.settings()?,
        reps: f.reps,
        jobs: f.jobs()?,
        plots: !f.no_plot,
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    let done = match export {
        Some(x) => calibrate::export::run(&opts, x, &never)?,
        None => calibrate::run(&opts, &never)?,
    };
    super::print_out(&done.report)?;
    if !quiet {
        for w in &done.warnings {
            note(format_args!("herdsim: warning: {w}"));
        }
        note(format_args!(
            "herdsim: calibrate: wrote {} ({} files)",
            done.dir.display(),
            done.written.len()
        ));
    }
    Ok(done)
}

pub use crate::calibrate::flags::in_folder;

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    args.fitting.settings()?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| calibrate::default_name(&args.log));
    if let Err(m) = crate::scenario::validate::check_name(&name) {
        return Err(CliError::bad(format!("--name {name}: {m}")));
    }
    let export = calibrate::export::settings(
        &args.log,
        args.format.as_deref(),
        &args.humans,
        &args.bots,
        &args.unthreaded,
        args.hash_authors,
        calibrate::flags::period(args.since.as_deref(), args.until.as_deref())?,
    )?;
    let dir = args.out.join(&name);
    // Before the folder is created or locked: an input there is not touched.
    calibrate::refuse_into(&args.log, &dir)?;
    in_folder(&dir, args.quiet, || {
        calibrate_into(
            &args.log,
            &dir,
            args.channel,
            &args.fitting,
            args.quiet,
            export.as_ref(),
        )
    })?;
    Ok(ExitCode::SUCCESS)
}
