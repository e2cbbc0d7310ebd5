//! A calibration request, as `herdsim calibrate` takes it: checked
//! ([`Request::check`]) before any folder is made, then run ([`run`]) in
//! its locked results folder `<out>/<name>/`, from a frame log or a chat
//! export (Slack, Discord, Matrix: docs/exports.md).

use super::export;
use super::flags::{self, Flags};
use super::{Finished, Options};
use crate::error::Error;
use crate::progress::Observer;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

/// What to calibrate, as given (each field is a `herdsim calibrate`
/// option).
#[derive(Debug, Clone)]
pub struct Request {
    /// The frame log or the export.
    pub log: PathBuf,
    /// `--out`: results go to `<out>/<name>/`.
    pub out: PathBuf,
    /// `--name` (none: [`super::default_name`] of the log).
    pub name: Option<String>,
    /// `--channel`.
    pub channel: Option<String>,
    /// `--format`: log, slack, discord, matrix (none: told from the log).
    pub format: Option<String>,
    /// `--humans`, `--bots`: an export's authors read as such.
    pub humans: Vec<String>,
    pub bots: Vec<String>,
    /// `--unthreaded`: next-human or ignore.
    pub unthreaded: String,
    /// `--hash-authors`.
    pub hash_authors: bool,
    /// `--since`, `--until`: an export's window.
    pub since: Option<String>,
    pub until: Option<String>,
    /// `--speed`, `--link-ms`, `--ttl-ms`, `--csma-ms`, `--policy`,
    /// `--reps`, `--seed`: the fitting flags ([`flags::settings`]).
    pub speed: f64,
    pub link_ms: Option<f64>,
    pub ttl_ms: f64,
    pub csma_ms: Option<String>,
    pub policy: Option<String>,
    pub reps: u32,
    pub seed: u64,
    /// `--jobs` (none: all cores).
    pub jobs: Option<usize>,
    /// Draw the figures (not `--no-plot`).
    pub plots: bool,
}

/// A checked request: the calibration's options (its results folder
/// `<out>/<name>`) and, for an export, how to read it.
#[derive(Debug, Clone)]
pub struct Checked {
    pub opts: Options,
    pub export: Option<export::Settings>,
}

impl Request {
    /// The fitting flags as [`flags::settings`] takes them.
    pub fn flags(&self) -> Flags<'_> {
        Flags {
            speed: self.speed,
            link_ms: self.link_ms,
            ttl_ms: self.ttl_ms,
            csma_ms: self.csma_ms.as_deref(),
            policy: self.policy.as_deref(),
            reps: self.reps,
            seed: self.seed,
        }
    }

    /// Every check of the flags (exit 2 naming the flag), before any
    /// folder is made.
    pub fn check(&self) -> Result<Checked, Error> {
        let settings = flags::settings(&self.flags())?;
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| super::default_name(&self.log));
        if let Err(m) = crate::scenario::validate::check_name(&name) {
            return Err(Error::bad(format!("--name {name}: {m}")));
        }
        let export = export::settings(
            &self.log,
            self.format.as_deref(),
            &self.humans,
            &self.bots,
            &self.unthreaded,
            self.hash_authors,
            flags::period(self.since.as_deref(), self.until.as_deref())?,
        )?;
        let jobs = flags::jobs(self.jobs)?;
        Ok(Checked {
            opts: Options {
                log: self.log.clone(),
                dir: self.out.join(&name),
                channel: self.channel.clone(),
                settings,
                reps: self.reps,
                jobs,
                plots: self.plots,
            },
            export,
        })
    }
}

/// Calibrate as `c` says into its results folder, locked for the
/// calibration ([`flags::in_folder`]; `obs` hears the lock's notes), the
/// input refused first if the calibration would write over it. `stop`:
/// no further replication of the prediction starts, and the calibration
/// fails leaving the folder as it was.
pub fn run(c: &Checked, obs: &dyn Observer, stop: &AtomicBool) -> Result<Finished, Error> {
    let opts = &c.opts;
    // Before the folder is created or locked: an input there is not touched.
    super::refuse_into(&opts.log, &opts.dir)?;
    flags::in_folder(&opts.dir, obs, || match &c.export {
        Some(x) => export::run(opts, x, obs, stop),
        None => super::run(opts, obs, stop),
    })
}
