//! `herdsim observe`: flags -> [`crate::observe::job::run`] (observe,
//! then calibrate what was recorded) -> exit status.

use super::calibrate::Fitting;
use super::{CliError, note};
use crate::observe::job::{self, Calibrate, Job};
use crate::observe::{self, Options};
use crate::term::interrupt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The chat server: ws://HOST:PORT, or wss://HOST[:PORT] over TLS.
    #[arg(long)]
    pub url: String,
    /// The channel to watch (`#general`).
    #[arg(long)]
    pub channel: String,
    /// The name the observer identifies as.
    #[arg(long = "as", value_name = "NAME", default_value = "observer")]
    pub identity: String,
    /// An Ed25519 identity (keyed IDENTIFY), as agentchat servers need; its key derives from a secret of yours (--key-file), as live's do.
    #[arg(long)]
    pub keyed: bool,
    /// With --keyed: the file holding your identities' secret (made if missing). Default: $HERDSIM_KEY_FILE, else $XDG_DATA_HOME/herdsim/live-identity.key.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// With a wss:// --url: also trust the CA certificate(s) in FILE (PEM).
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Stop after this long: seconds, or with a unit (90s, 15m, 2h). Default: at Ctrl-C.
    #[arg(long, value_name = "D")]
    pub duration: Option<String>,
    /// Output directory; the log and the calibration go to `<out>/<name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// The results folder's name (default: observe-CHANNEL, without the #).
    #[arg(long)]
    pub name: Option<String>,
    /// The largest log to write, bytes; reaching it ends the observation.
    #[arg(long, value_name = "BYTES", default_value_t = observe::DEFAULT_MAX_LOG_BYTES)]
    pub max_log_bytes: u64,
    /// Record only: do not calibrate at the end.
    #[arg(long)]
    pub no_calibrate: bool,
    #[command(flatten)]
    pub fitting: Fitting,
    /// No progress line and no notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

fn check(args: &Args) -> Result<Job, CliError> {
    let tls_url = job::is_tls_url(&args.url)?;
    let dir = job::folder(&args.out, args.name.as_deref(), &args.channel)?;
    if args.ca_cert.is_some() && !tls_url {
        return Err(CliError::bad(
            "--ca-cert: only for a wss:// server (--url wss://HOST[:PORT])",
        ));
    }
    let duration = job::duration(args.duration.as_deref())?;
    let max_log_bytes = job::max_log_bytes(args.max_log_bytes)?;
    let f = &args.fitting;
    let calibrate = Calibrate {
        settings: f.settings()?,
        reps: f.reps,
        jobs: f.jobs()?,
        plots: !f.no_plot,
    };
    // Last: a keyed identity makes the key file when it is missing.
    let identity = job::identity(&args.identity, args.keyed, args.key_file.as_deref())?;
    let tls = if tls_url {
        let c = crate::tls::client_config(args.ca_cert.as_deref());
        Some(c.map_err(|e| CliError::bad(e.to_string()))?)
    } else {
        None
    };
    Ok(Job {
        opts: Options {
            url: args.url.clone(),
            channel: args.channel.clone(),
            identity,
            tls,
            duration,
            log: dir.join("frames.jsonl"),
            max_log_bytes,
            ping_every: observe::PING_EVERY,
            pong_timeout: observe::PONG_TIMEOUT,
        },
        dir,
        calibrate: (!args.no_calibrate).then_some(calibrate),
        quiet: args.quiet,
    })
}

fn bar(quiet: bool) -> ProgressBar {
    let target = if quiet {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let b = ProgressBar::with_draw_target(None, target);
    if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}") {
        b.set_style(style);
    }
    b
}

fn show(c: &observe::Counts) -> String {
    format!(
        "{} questions, {} claims, {} answers seen ({} frames, {:.1} MB logged)",
        c.questions,
        c.claims,
        c.answers,
        c.frames,
        c.bytes as f64 / 1e6
    )
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let job = check(&args)?;
    let opts = &job.opts;
    let stop = interrupt::catch(
        "herdsim: observe: stopping (interrupt again to stop at once)",
        "herdsim: stopped at once".into(),
    );
    if !args.quiet {
        let keyed = if opts.identity.key.is_some() {
            " (keyed)"
        } else {
            ""
        };
        let until = match opts.duration {
            Some(d) => format!("for {:.0} s (Ctrl-C stops sooner)", d.as_secs_f64()),
            None => "Ctrl-C stops".into(),
        };
        note(format_args!(
            "herdsim: observe: watching {} on {} as {}{keyed}; {until}",
            opts.channel, opts.url, opts.identity.name
        ));
    }
    let b = bar(args.quiet);
    interrupt::show(b.clone());
    let done = job::run(&job, stop, &mut |c, _| b.set_message(show(c)), &mut |rec| {
        b.finish_and_clear();
        if !args.quiet {
            note(format_args!(
                "herdsim: observe: {} after {:.1} s: {}; log {}",
                rec.end.reason(),
                rec.elapsed.as_secs_f64(),
                show(&rec.counts),
                opts.log.display()
            ));
        }
    })?;
    if let Some(cal) = &done.calibrated {
        super::print_out(&cal.report)?;
        if !args.quiet {
            for w in &cal.warnings {
                note(format_args!("herdsim: warning: {w}"));
            }
            let (dir, n) = (cal.dir.display(), cal.written.len());
            note(format_args!("herdsim: calibrate: wrote {dir} ({n} files)"));
        }
    }
    match done.ended_early(&opts.log) {
        Some(e) => Err(e),
        None => Ok(ExitCode::SUCCESS),
    }
}
