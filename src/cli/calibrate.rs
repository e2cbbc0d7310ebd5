//! `herdsim calibrate`: flags -> [`crate::calibrate::request`] -> exit status.
//! The fitting flags are shared with `herdsim observe`, which calibrates
//! what it recorded.

use super::{CliError, note};
use crate::calibrate::request::{self, Request};
use crate::calibrate::{self, fit::Settings};
use crate::term::Term;
use std::path::PathBuf;
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

/// The request, every flag as given.
pub fn request(args: Args) -> Request {
    let f = args.fitting;
    Request {
        log: args.log,
        out: args.out,
        name: args.name,
        channel: args.channel,
        format: args.format,
        humans: args.humans,
        bots: args.bots,
        unthreaded: args.unthreaded,
        hash_authors: args.hash_authors,
        since: args.since,
        until: args.until,
        speed: f.speed,
        link_ms: f.link_ms,
        ttl_ms: f.ttl_ms,
        csma_ms: f.csma_ms,
        policy: f.policy,
        reps: f.reps,
        seed: f.seed,
        jobs: f.jobs,
        plots: !f.no_plot,
    }
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

/// Check the flags, calibrate ([`request::run`]) and report: the report
/// on stdout, warnings and the folder on stderr.
pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let quiet = args.quiet;
    let checked = request(args).check()?;
    let never = std::sync::atomic::AtomicBool::new(false);
    let done = request::run(&checked, &Term::calibrate(quiet), &never)?;
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
    Ok(ExitCode::SUCCESS)
}
