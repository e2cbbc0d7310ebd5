//! What `herdsim observe` runs: its flags checked into [`Options`], then
//! one call, [`run`], that records into a locked results folder and
//! calibrates what was recorded with [`crate::calibrate::run`].

use super::{Counts, End, Options, Recorded};
use crate::calibrate::{self, fit::Settings};
use crate::error::Error;
use crate::live::conn::Identity;
use crate::live::keys;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The calibration of what was recorded.
#[derive(Debug, Clone)]
pub struct Calibrate {
    pub settings: Settings,
    /// Replications of the prediction (0: none).
    pub reps: u32,
    /// Threads of the prediction.
    pub jobs: usize,
    /// Draw the figures.
    pub plots: bool,
}

/// An observation and what follows it.
#[derive(Debug, Clone)]
pub struct Job {
    pub opts: Options,
    /// The results folder (the log is `opts.log`, in it).
    pub dir: PathBuf,
    /// None: record only.
    pub calibrate: Option<Calibrate>,
    /// No notes on stderr.
    pub quiet: bool,
}

/// A finished job.
#[derive(Debug)]
pub struct Done {
    pub recorded: Recorded,
    pub calibrated: Option<calibrate::Finished>,
}

impl Done {
    /// The failure to report once the calibration is out: the server ended
    /// the observation (what was recorded was still calibrated).
    pub fn ended_early(&self, log: &Path) -> Option<Error> {
        match &self.recorded.end {
            End::Closed(why) => Some(Error::Failure(anyhow::anyhow!(
                "the observation ended early: {why} (what was recorded is in {})",
                log.display()
            ))),
            _ => None,
        }
    }
}

/// Whether `url` is a `wss://` one (false: `ws://`); anything else is bad.
pub fn is_tls_url(url: &str) -> Result<bool, Error> {
    if url.starts_with("wss://") {
        Ok(true)
    } else if url.starts_with("ws://") {
        Ok(false)
    } else {
        Err(Error::bad(format!(
            "--url {url}: must start with ws:// or wss://"
        )))
    }
}

/// The observer's identity: `name` checked, keyed from the secret in
/// `key_file` (default: live's key file) when `keyed`.
pub fn identity(name: &str, keyed: bool, key_file: Option<&Path>) -> Result<Identity, Error> {
    if name.is_empty()
        || name.len() > 64
        || name.chars().any(|c| c.is_whitespace() || c.is_control())
        || name.starts_with(['#', '@'])
    {
        return Err(Error::bad(format!(
            "--as {name}: a name of 1 to 64 characters, no spaces, not starting with # or @"
        )));
    }
    if key_file.is_some() && !keyed {
        return Err(Error::bad("--key-file: only with --keyed"));
    }
    let key = if keyed {
        let path = key_file.map(Path::to_path_buf).or_else(keys::default_path).ok_or_else(|| {
            Error::bad("--keyed: no place for the key file (neither HOME nor XDG_DATA_HOME nor HERDSIM_KEY_FILE is set); give one with --key-file FILE")
        })?;
        let secret =
            keys::load_or_create(&path).map_err(|e| Error::bad(format!("--key-file {e}")))?;
        Some(secret.key_of(name))
    } else {
        None
    };
    Ok(Identity {
        name: name.to_string(),
        key,
    })
}

/// The channel checked, and the results folder under `out`: `name`, by
/// default `observe-CHANNEL` (without the #).
pub fn folder(out: &Path, name: Option<&str>, channel: &str) -> Result<PathBuf, Error> {
    if !crate::floor::address::is_channel_name(channel) {
        return Err(Error::bad(format!(
            "--channel {channel}: a channel is # followed by letters, digits, - or _"
        )));
    }
    let name = name.map_or_else(
        || format!("observe-{}", channel.trim_start_matches('#')),
        str::to_string,
    );
    if let Err(m) = crate::scenario::validate::check_name(&name) {
        return Err(Error::bad(format!("--name {name}: {m}")));
    }
    Ok(out.join(name))
}

/// `--duration`, checked.
pub fn duration(raw: Option<&str>) -> Result<Option<Duration>, Error> {
    raw.map(|d| {
        super::parse_duration(d).ok_or_else(|| {
            Error::bad(format!(
                "--duration {d}: seconds, or a number with s, m or h (90s, 15m, 2h), at most 1e7 s"
            ))
        })
    })
    .transpose()
}

/// `--max-log-bytes`, checked.
pub fn max_log_bytes(bytes: u64) -> Result<u64, Error> {
    if bytes < 1 << 16 {
        return Err(Error::bad(format!(
            "--max-log-bytes {bytes}: at least 65536"
        )));
    }
    Ok(bytes)
}

/// Observe into the locked folder `job.dir` until the duration, `stop`,
/// the log's cap or the server ends it, then calibrate the log there.
/// `progress` is called about five times a second, `recorded` once the
/// observation has ended. When it fails and the folder was made for it,
/// the (empty) folder is removed again.
pub fn run(
    job: &Job,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Counts, Duration),
    recorded: &mut dyn FnMut(&Recorded),
) -> Result<Done, Error> {
    let existed = job.dir.exists();
    let lock = crate::sweep::outputs::lock_results(&job.dir, &crate::term::Term::notes(job.quiet))?;
    let result = observe_then_calibrate(job, stop, progress, recorded);
    drop(lock);
    if result.is_err() && !existed {
        let _ = std::fs::remove_file(job.dir.join(crate::report::LOCK_FILE));
        // Only an empty folder goes (what was written stays).
        let _ = std::fs::remove_dir(&job.dir);
    }
    result
}

fn observe_then_calibrate(
    job: &Job,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Counts, Duration),
    recorded: &mut dyn FnMut(&Recorded),
) -> Result<Done, Error> {
    let opts = &job.opts;
    let rec = super::record(opts, stop, progress)?;
    recorded(&rec);
    let Some(cal) = &job.calibrate else {
        return Ok(Done {
            recorded: rec,
            calibrated: None,
        });
    };
    if rec.counts.questions == 0 {
        return Err(Error::Failure(anyhow::anyhow!(
            "no question was asked in {} while observing: nothing to calibrate (the log is {})",
            opts.channel,
            opts.log.display()
        )));
    }
    let copts = calibrate::Options {
        log: opts.log.clone(),
        dir: job.dir.clone(),
        channel: Some(opts.channel.clone()),
        settings: cal.settings.clone(),
        reps: cal.reps,
        jobs: cal.jobs,
        plots: cal.plots,
    };
    // Ctrl-C ended the observation; the calibration of what was recorded
    // still runs to its end.
    let never = AtomicBool::new(false);
    let done = calibrate::run(&copts, &(), &never)?;
    Ok(Done {
        recorded: rec,
        calibrated: Some(done),
    })
}
