//! `herdsim observe`: flags -> [`crate::observe::record`], then
//! [`crate::calibrate::run`] on what was recorded -> exit status.

use super::calibrate::{Fitting, calibrate_into};
use super::{CliError, note};
use crate::live::conn::Identity;
use crate::live::keys;
use crate::observe::{self, End, Options};
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

fn bad(m: impl Into<String>) -> CliError {
    CliError::bad(m.into())
}

fn check(args: &Args) -> Result<(Options, PathBuf), CliError> {
    let tls_url = if args.url.starts_with("wss://") {
        true
    } else if args.url.starts_with("ws://") {
        false
    } else {
        return Err(bad(format!(
            "--url {}: must start with ws:// or wss://",
            args.url
        )));
    };
    if !crate::floor::wire::is_channel_name(&args.channel) {
        return Err(bad(format!(
            "--channel {}: a channel is # followed by letters, digits, - or _",
            args.channel
        )));
    }
    if args.identity.is_empty()
        || args.identity.len() > 64
        || args
            .identity
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        || args.identity.starts_with(['#', '@'])
    {
        return Err(bad(format!(
            "--as {}: a name of 1 to 64 characters, no spaces, not starting with # or @",
            args.identity
        )));
    }
    if args.key_file.is_some() && !args.keyed {
        return Err(bad("--key-file: only with --keyed"));
    }
    if args.ca_cert.is_some() && !tls_url {
        return Err(bad(
            "--ca-cert: only for a wss:// server (--url wss://HOST[:PORT])",
        ));
    }
    let duration = args
        .duration
        .as_deref()
        .map(|d| {
            observe::parse_duration(d).ok_or_else(|| {
                bad(format!("--duration {d}: seconds, or a number with s, m or h (90s, 15m, 2h), at most 1e7 s"))
            })
        })
        .transpose()?;
    if args.max_log_bytes < 1 << 16 {
        return Err(bad(format!(
            "--max-log-bytes {}: at least 65536",
            args.max_log_bytes
        )));
    }
    args.fitting.settings()?;
    args.fitting.jobs()?;
    let key = if args.keyed {
        let path = args.key_file.clone().or_else(keys::default_path).ok_or_else(|| {
            bad("--keyed: no place for the key file (neither HOME nor XDG_DATA_HOME nor HERDSIM_KEY_FILE is set); give one with --key-file FILE")
        })?;
        let secret = keys::load_or_create(&path).map_err(|e| bad(format!("--key-file {e}")))?;
        Some(secret.key_of(&args.identity))
    } else {
        None
    };
    let tls = if tls_url {
        Some(crate::tls::client_config(args.ca_cert.as_deref()).map_err(|e| bad(e.to_string()))?)
    } else {
        None
    };
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("observe-{}", args.channel.trim_start_matches('#')));
    if let Err(m) = crate::scenario::validate::check_name(&name) {
        return Err(bad(format!("--name {name}: {m}")));
    }
    let dir = args.out.join(&name);
    Ok((
        Options {
            url: args.url.clone(),
            channel: args.channel.clone(),
            identity: Identity {
                name: args.identity.clone(),
                key,
            },
            tls,
            duration,
            log: dir.join("frames.jsonl"),
            max_log_bytes: args.max_log_bytes,
            ping_every: observe::PING_EVERY,
            pong_timeout: observe::PONG_TIMEOUT,
        },
        dir,
    ))
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
    let (opts, dir) = check(&args)?;
    super::calibrate::in_folder(&dir, args.quiet, || watch(&args, &opts, &dir))
}

/// Observe, then calibrate what was recorded, in the locked `dir`.
fn watch(args: &Args, opts: &Options, dir: &std::path::Path) -> Result<ExitCode, CliError> {
    let stop = interrupt::catch(
        "herdsim: observe: stopping (interrupt again to stop at once)",
        "herdsim: stopped at once".into(),
    );
    if !args.quiet {
        note(format_args!(
            "herdsim: observe: watching {} on {} as {}{}; {}",
            opts.channel,
            opts.url,
            opts.identity.name,
            if opts.identity.key.is_some() {
                " (keyed)"
            } else {
                ""
            },
            match opts.duration {
                Some(d) => format!("for {:.0} s (Ctrl-C stops sooner)", d.as_secs_f64()),
                None => "Ctrl-C stops".into(),
            }
        ));
    }
    let b = bar(args.quiet);
    interrupt::show(b.clone());
    let rec =
        observe::record(opts, stop, &mut |c, _| b.set_message(show(c))).map_err(|e| match e {
            observe::ObserveError::BadInput(m) => CliError::bad(m),
            observe::ObserveError::Failure(m) => CliError::Failure(anyhow::anyhow!(m)),
        })?;
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
    if !args.no_calibrate {
        if rec.counts.questions == 0 {
            return Err(CliError::Failure(anyhow::anyhow!(
                "no question was asked in {} while observing: nothing to calibrate (the log is {})",
                opts.channel,
                opts.log.display()
            )));
        }
        calibrate_into(
            &opts.log,
            dir,
            Some(opts.channel.clone()),
            &args.fitting,
            args.quiet,
        )?;
    }
    if let End::Closed(why) = &rec.end {
        return Err(CliError::Failure(anyhow::anyhow!(
            "the observation ended early: {why} (what was recorded is in {})",
            opts.log.display()
        )));
    }
    Ok(ExitCode::SUCCESS)
}
