//! `herdsim calibrate`: from what a member of a channel saw (a frame log:
//! observe's, a recorded session, a `live` trace) to a scenario, with an
//! interval and a sample count behind every estimate, a figure per fitted
//! distribution, and the fitted scenario simulated against what was
//! observed (docs/observe.md).
//!
//! - [`read`]: the log's formats into the channel's events;
//! - [`view`]: question by question, who claimed and answered when, and
//!   each agent's clock;
//! - [`window`]: the censored likelihood of the wait and respond_p;
//! - [`fit`]: every estimate (arrivals, groups, inference, skew, outcome);
//! - [`stats`]: the statistics behind them;
//! - [`out`], [`report`], [`figures`]: what is written;
//! - [`predict`]: the fitted scenario through the simulator;
//! - [`export`]: Slack, Discord and Matrix exports into the same view;
//! - [`request`]: `herdsim calibrate`'s options checked, then run;
//! - [`whatif`]: an export's fitted scenario under each scheme and policy.
//!
//! Nothing here changes a simulated result: it reads logs and writes
//! scenarios (build.rs leaves it out of the build's identity).

pub mod export;
pub mod figures;
pub mod fit;
pub mod flags;
pub mod out;
pub mod predict;
pub mod read;
pub mod report;
pub mod request;
pub mod stats;
pub mod view;
pub mod whatif;
pub mod window;

use crate::error::Error;
use crate::progress::Observer;
use crate::report::write_atomic;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// The fitted scenario's file name in the results folder.
pub const SCENARIO_FILE: &str = "scenario.toml";

/// The most (agent, question) pairs one calibration fits: each is an
/// opportunity (24 bytes, kept twice: per agent and per group; the
/// blocked sets are shared per question, bounded by the claims), so this
/// bounds what the fit holds to about 1 GB (docs/observe.md, "How long
/// and how much memory").
pub const MAX_OPPORTUNITIES: u64 = 20_000_000;

/// What a calibration is asked.
#[derive(Debug, Clone)]
pub struct Options {
    /// The frame log.
    pub log: PathBuf,
    /// The results folder (written into; the caller holds its lock).
    pub dir: PathBuf,
    /// The channel (default: observe's, else the busiest).
    pub channel: Option<String>,
    pub settings: fit::Settings,
    /// Replications of the prediction (0: none).
    pub reps: u32,
    /// Threads of the prediction.
    pub jobs: usize,
    /// Draw the figures.
    pub plots: bool,
}

/// What a calibration produced.
#[derive(Debug)]
pub struct Finished {
    pub dir: PathBuf,
    /// The report (also in `report.txt`).
    pub report: String,
    pub calibration: fit::Calibration,
    pub prediction: Option<predict::Prediction>,
    /// For stderr: what the user must know.
    pub warnings: Vec<String>,
    /// Files written, in order.
    pub written: Vec<PathBuf>,
}

/// A folder name from a log's path: its file name without `.gz` and
/// `.jsonl`, or for observe's `frames.jsonl` the folder it is in; only
/// letters, digits, `-`, `_` and `.` kept.
pub fn default_name(log: &Path) -> String {
    let file = log
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut stem = file.as_str();
    for ext in [".gz", ".jsonl", ".json", ".log"] {
        stem = stem.strip_suffix(ext).unwrap_or(stem);
    }
    let stem = if stem == "frames" {
        log.parent()
            .and_then(|p| p.file_name())
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| stem.to_string())
    } else {
        stem.to_string()
    };
    let clean: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let clean = clean.trim_start_matches('.').to_string();
    if clean.is_empty() {
        "calibrated".into()
    } else {
        clean.chars().take(80).collect()
    }
}

/// Whether `name` is a file a calibration writes (so that a calibration
/// into a folder replaces an earlier one's files, never leaving a figure
/// or CSV of the last one beside the new).
pub fn is_output(name: &str) -> bool {
    // Every name `run_log` writes (an export's what-if too: a file of
    // that name in the folder was read, then replaced).
    const FIXED: [&str; 9] = [
        SCENARIO_FILE,
        "estimates.csv",
        "questions.csv",
        "agents.csv",
        "prediction.csv",
        "report.txt",
        "gaps.csv",
        export::channel::FILE,
        whatif::FILE,
    ];
    FIXED.contains(&name)
        || (name.starts_with("fit-") && name.ends_with(".png"))
        || (name.starts_with("group-")
            && (name.ends_with("-csma.csv") || name.ends_with("-inference.csv")))
}

/// Remove an earlier calibration's files from `dir` (regular files only;
/// observe's log and anything else stay).
fn remove_earlier(dir: &Path) -> Result<Vec<String>, Error> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(removed);
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_output(n))
        .collect();
    names.sort();
    for n in names {
        let path = dir.join(&n);
        std::fs::remove_file(&path).map_err(|e| Error::io("removing", &path, e))?;
        removed.push(n);
    }
    Ok(removed)
}

/// Whether two metadata are of one file (same device and inode).
#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

/// The output in `dir` that `log` is, if it is one: a calibration into
/// `dir` replaces its outputs, and would destroy the log it reads. Told
/// by the canonical path, and by the file itself (a hard link or a
/// symbolic link under another name).
pub fn input_is_output(log: &Path, dir: &Path) -> Option<PathBuf> {
    let canon_dir = std::fs::canonicalize(dir).ok()?;
    if let Ok(c) = std::fs::canonicalize(log)
        && c.parent() == Some(canon_dir.as_path())
        && c.file_name()
            .is_some_and(|n| is_output(&n.to_string_lossy()))
    {
        return Some(c);
    }
    let meta = std::fs::metadata(log).ok()?;
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| is_output(&e.file_name().to_string_lossy()))
        .find(|e| std::fs::metadata(e.path()).is_ok_and(|m| same_file(&meta, &m)))
        .map(|e| e.path())
}

fn write(path: &Path, text: &str, written: &mut Vec<PathBuf>) -> Result<(), Error> {
    write_atomic(path, text.as_bytes()).map_err(|e| Error::io("writing", path, e))?;
    written.push(path.to_path_buf());
    Ok(())
}

/// A folder inside the results folder where a calibration's files are
/// written before any is put in place: removed whatever happens, so a
/// calibration that fails leaves nothing behind.
struct Staging(PathBuf);

impl Staging {
    fn new(dir: &Path) -> Result<Staging, Error> {
        let path = dir.join(format!(".calibrate-{}.tmp", std::process::id()));
        // One left by a process with this id that was killed: stale.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| Error::io("creating", &path, e))?;
        Ok(Staging(path))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The log's times, in scenario time, must stay durations a scenario
/// holds: refused (naming the log and the limit) otherwise.
fn check_span(opts: &Options, log: &read::Log) -> Result<(), Error> {
    let (lo, hi) = log
        .events
        .iter()
        .map(|e| e.t)
        .fold((log.start_t, log.end_t), |(lo, hi), t| {
            (lo.min(t), hi.max(t))
        });
    let span = (hi - lo) * opts.settings.speed;
    let max = crate::limits::MAX_DURATION_MS;
    if span.is_finite() && span <= max {
        return Ok(());
    }
    Err(Error::bad(format!(
        "{}: its times run from {lo:e} to {hi:e} ms ({}): {} x --speed {} is longer than the \
         longest duration a scenario holds ({max:e} ms): calibrate a shorter part of it",
        opts.log.display(),
        log.times(),
        if (hi - lo).is_finite() {
            format!("{:e} ms", hi - lo)
        } else {
            "more than any number".to_string()
        },
        opts.settings.speed
    )))
}

/// Calibrate: read the log, fit, write the scenario, the estimates, the
/// report and the figures into `opts.dir`, then simulate the scenario.
/// Every file is written into a staging folder first and put in place
/// only when all are: bad input or a failure leaves the folder as it was.
/// `obs` hears the simulations' progress (replications done of those
/// ahead: the prediction's, then the what-ifs').
pub fn run(opts: &Options, obs: &dyn Observer, stop: &AtomicBool) -> Result<Finished, Error> {
    refuse_own_output(opts)?;
    let log = read::read(&opts.log, opts.channel.as_deref()).map_err(|e| Error::bad(e.0))?;
    run_log(opts, log, Extra::default(), obs, stop)
}

/// Whether `dir` (which need not exist yet) is `folder` or inside it,
/// by canonical paths (through symbolic links): its nearest ancestor
/// that exists, canonical, under `folder`'s.
pub fn is_inside(dir: &Path, folder: &Path) -> bool {
    let Ok(f) = std::fs::canonicalize(folder) else {
        return false;
    };
    let mut d = dir;
    loop {
        if let Ok(c) = std::fs::canonicalize(d) {
            return c.starts_with(&f);
        }
        d = match d.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ if d != Path::new(".") => Path::new("."),
            _ => return false,
        };
    }
}

/// The input must not be one of the outputs, nor (a folder: Slack's
/// export) hold the results folder.
fn refuse_own_output(opts: &Options) -> Result<(), Error> {
    refuse_into(&opts.log, &opts.dir)
}

/// [`refuse_own_output`] for the input `log` and the results folder
/// `dir`: the command line asks it before it creates or locks `dir`.
pub fn refuse_into(log: &Path, dir: &Path) -> Result<(), Error> {
    if let Some(out) = input_is_output(log, dir) {
        return Err(Error::bad(format!(
            "{}: is {}, a file this calibration writes (and would replace): calibrate it into \
             another folder (--out or --name)",
            log.display(),
            out.display()
        )));
    }
    if log.is_dir() && is_inside(dir, log) {
        return Err(Error::bad(format!(
            "{}: the results folder {} is inside this export, which calibrate never writes \
             into: give an --out outside it",
            log.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// What a reader adds to a calibration: text before the report, and
/// files (name, text) written beside the outputs.
#[derive(Debug, Default)]
pub struct Extra {
    pub preface: String,
    pub files: Vec<(String, String)>,
    /// Run the fitted scenario under each scheme and policy (`--reps`
    /// replications; none at 0) and report it after the preface.
    pub whatif: bool,
    /// For stderr, before the calibration's own.
    pub warnings: Vec<String>,
}

/// The failure of a calibration that was told to stop.
pub const INTERRUPTED: &str =
    "interrupted: the calibration stopped before it finished; its folder is as it was";

/// Told to stop: some replications of a simulation never ran, so what it
/// gives is not to be written.
fn interrupted(stop: &AtomicBool) -> Result<(), Error> {
    if stop.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(Error::Failure(anyhow::anyhow!(INTERRUPTED)));
    }
    Ok(())
}

/// [`run`] on a log already read.
pub fn run_log(
    opts: &Options,
    log: read::Log,
    extra: Extra,
    obs: &dyn Observer,
    stop: &AtomicBool,
) -> Result<Finished, Error> {
    if log.format == read::Format::LiveTrace && opts.settings.speed != 1.0 {
        return Err(Error::bad(format!(
            "--speed {}: {} is a live trace, already in scenario time; leave --speed out",
            opts.settings.speed,
            opts.log.display()
        )));
    }
    check_span(opts, &log)?;
    let mut view = view::View::of(&log);
    let mut warnings = extra.warnings.clone();
    if view.questions.is_empty() {
        return Err(Error::Failure(anyhow::anyhow!(
            "{}: no question in channel {}: nothing to calibrate",
            opts.log.display(),
            log.channel
        )));
    }
    let pairs = (view.agents.len() as u64).saturating_mul(view.questions.len() as u64);
    if pairs > MAX_OPPORTUNITIES {
        return Err(Error::bad(format!(
            "{}: {} agents x {} questions in channel {} is more than calibrate fits at once \
             ({MAX_OPPORTUNITIES} pairs): calibrate a shorter log",
            opts.log.display(),
            view.agents.len(),
            view.questions.len(),
            log.channel
        )));
    }
    let first = view.questions[0].t;
    if view.questions.len() > 1 && view.questions.iter().all(|q| q.t == first) {
        return Err(Error::bad(format!(
            "{}: all {} questions in channel {} were posted at one instant ({first} ms, {}): \
             there is no time between questions to fit their arrivals from",
            opts.log.display(),
            view.questions.len(),
            log.channel,
            log.times()
        )));
    }
    if view.agents.is_empty() {
        warnings.push(format!(
            "nobody claimed or answered any of the {} questions: there are no agents to fit",
            view.questions.len()
        ));
    }
    let cal = fit::calibrate(&log, &mut view, &opts.settings);
    let dir = &opts.dir;
    let folder = default_name(dir);
    let name = format!("{folder}-fitted");
    let (toml, files) = out::scenario(&cal, &log, &view, &name);
    let scenario = dir.join(SCENARIO_FILE);
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
    let staging = Staging::new(dir)?;
    let stage = staging.0.as_path();
    let mut written = Vec::new();
    for (file, text) in files.iter().chain(&extra.files) {
        write(&stage.join(file), text, &mut written)?;
    }
    // The fitted scenario must be one herdsim runs (tune, run): read back
    // as they would read it, else the log is refused and nothing written.
    let refused = |m: String| {
        Error::bad(format!(
            "{}: gives a scenario herdsim cannot run: {m}",
            opts.log.display()
        ))
    };
    let loaded = crate::scenario::Loaded::from_text(&scenario.display().to_string(), &toml, stage)
        .map_err(|e| refused(e.to_string()))?;
    let base = loaded.base().map_err(|e| refused(e.to_string()))?;
    crate::model::Prepared::new(&base, stage).map_err(|e| refused(e.to_string()))?;
    let staged = stage.join(SCENARIO_FILE);
    write(&staged, &toml, &mut written)?;
    write(
        &stage.join("estimates.csv"),
        &out::estimates_csv(&cal),
        &mut written,
    )?;
    write(
        &stage.join("questions.csv"),
        &out::questions_csv(&view, opts.settings.speed),
        &mut written,
    )?;
    write(
        &stage.join("agents.csv"),
        &out::agents_csv(&cal, &view),
        &mut written,
    )?;
    let simulates = opts.reps > 0 && !view.agents.is_empty();
    if simulates {
        let whatifs = if extra.whatif {
            whatif::RUNS_PER_REP
        } else {
            0
        };
        obs.length(u64::from(opts.reps) * (1 + whatifs));
    }
    let prediction = if simulates {
        match predict::predict(
            &staged,
            &cal.outcome,
            opts.reps,
            opts.settings.seed,
            opts.jobs,
            obs,
            stop,
        ) {
            Ok(p) => Some(p),
            // The scenario was read back above: a refusal here is a bug,
            // not the user's input.
            Err(e @ (Error::Input(_) | Error::Scenario(_))) => {
                return Err(Error::Failure(anyhow::anyhow!(
                    "internal: the fitted scenario is not valid: {e}"
                )));
            }
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    interrupted(stop)?;
    if let Some(p) = &prediction {
        let mut csv = String::from(
            "metric,observed,observed_ci_low,observed_ci_high,samples,predicted_mean,predicted_ci95,reps,within\n",
        );
        for l in &p.lines {
            csv.push_str(&format!(
                "{},{},{},{},{},{},{},{},{}\n",
                l.metric,
                crate::report::num(l.observed),
                crate::report::num(l.observed_ci.0),
                crate::report::num(l.observed_ci.1),
                l.samples,
                crate::report::num(l.predicted.mean),
                crate::report::num(l.predicted.ci95),
                l.predicted.n,
                l.agree
            ));
        }
        write(&stage.join("prediction.csv"), &csv, &mut written)?;
        for l in p.lines.iter().filter(|l| !l.agree) {
            let v = |x: f64| report::value(l.metric, x);
            warnings.push(format!(
                "the fitted scenario predicts {} {} (± {}), outside the observed {}..{}",
                report::metric_name(l.metric),
                v(l.predicted.mean),
                v(l.predicted.ci95),
                v(l.observed_ci.0),
                v(l.observed_ci.1)
            ));
        }
    }
    let mut preface = extra.preface;
    if extra.whatif && opts.reps > 0 && !view.agents.is_empty() {
        let rows = whatif::whatif(&staged, opts.reps, opts.settings.seed, opts.jobs, obs, stop)
            .map_err(|e| match e {
                // Read back above: a refusal here is a bug, not the input.
                Error::Input(_) | Error::Scenario(_) => Error::Failure(anyhow::anyhow!(
                    "internal: the fitted scenario is not valid: {e}"
                )),
                e => e,
            })?;
        interrupted(stop)?;
        write(&stage.join(whatif::FILE), &whatif::csv(&rows), &mut written)?;
        preface.push_str(&whatif::text(&rows, opts.reps));
    }
    if simulates {
        obs.finish();
    }
    let report = preface + &report::text(&cal, &log, &view, prediction.as_ref(), &scenario);
    write(&stage.join("report.txt"), &report, &mut written)?;
    if opts.plots {
        written.extend(figures::draw(&cal, &folder, stage)?);
    }
    // Every file is ready: the earlier calibration's go, these move in.
    let removed = remove_earlier(dir)?;
    if !removed.is_empty() {
        warnings.push(format!(
            "replaced an earlier calibration in {} ({} files)",
            dir.display(),
            removed.len()
        ));
    }
    let mut placed = Vec::with_capacity(written.len());
    for from in &written {
        let to = dir.join(from.file_name().unwrap_or_default());
        std::fs::rename(from, &to).map_err(|e| Error::io("moving", &to, e))?;
        placed.push(to);
    }
    drop(staging);
    Ok(Finished {
        dir: dir.clone(),
        report,
        calibration: cal,
        prediction,
        warnings,
        written: placed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_from_logs() {
        assert_eq!(
            default_name(Path::new("a/expiry-ttl1s.jsonl.gz")),
            "expiry-ttl1s"
        );
        assert_eq!(
            default_name(Path::new("results/observe-general/frames.jsonl")),
            "observe-general"
        );
        assert_eq!(default_name(Path::new("x y.jsonl")), "x-y");
        assert_eq!(default_name(Path::new(".jsonl")), "calibrated");
    }

    #[test]
    fn what_a_calibration_replaces() {
        for n in [
            "scenario.toml",
            "report.txt",
            "gaps.csv",
            "fit-arrivals.png",
            "group-2-inference.csv",
            "group-0-csma.csv",
            "whatif.csv",
            "channel.csv",
        ] {
            assert!(is_output(n), "{n}");
        }
        for n in [
            "frames.jsonl",
            "notes.txt",
            "group-0.csv",
            "fit.txt",
            "runs.csv",
        ] {
            assert!(!is_output(n), "{n}");
        }
    }
}
