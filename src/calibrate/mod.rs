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
//! - [`predict`]: the fitted scenario through the simulator.
//!
//! Nothing here changes a simulated result: it reads logs and writes
//! scenarios (build.rs leaves it out of the build's identity).

pub mod figures;
pub mod fit;
pub mod out;
pub mod predict;
pub mod read;
pub mod report;
pub mod stats;
pub mod view;
pub mod window;

use crate::error::Error;
use crate::report::write_atomic;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// The fitted scenario's file name in the results folder.
pub const SCENARIO_FILE: &str = "scenario.toml";

/// The most (agent, question) pairs one calibration fits: each is an
/// opportunity with its blocked set, so this bounds the memory a log can
/// make calibrate use (about 1 GB at the most).
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
    const FIXED: [&str; 7] = [
        SCENARIO_FILE,
        "estimates.csv",
        "questions.csv",
        "agents.csv",
        "prediction.csv",
        "report.txt",
        "gaps.csv",
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
        std::fs::remove_file(&path).map_err(|e| {
            Error::Failure(anyhow::Error::new(e).context(format!("removing {}", path.display())))
        })?;
        removed.push(n);
    }
    Ok(removed)
}

fn write(path: &Path, text: &str, written: &mut Vec<PathBuf>) -> Result<(), Error> {
    write_atomic(path, text.as_bytes()).map_err(|e| {
        Error::Failure(anyhow::Error::new(e).context(format!("writing {}", path.display())))
    })?;
    written.push(path.to_path_buf());
    Ok(())
}

/// Calibrate: read the log, fit, write the scenario, the estimates, the
/// report and the figures into `opts.dir`, then simulate the scenario.
pub fn run(opts: &Options, stop: &AtomicBool) -> Result<Finished, Error> {
    let log = read::read(&opts.log, opts.channel.as_deref()).map_err(|e| Error::bad(e.0))?;
    if log.format == read::Format::LiveTrace && opts.settings.speed != 1.0 {
        return Err(Error::bad(format!(
            "--speed {}: {} is a live trace, already in scenario time; leave --speed out",
            opts.settings.speed,
            opts.log.display()
        )));
    }
    let mut view = view::View::of(&log);
    let mut warnings = Vec::new();
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
    if view.agents.is_empty() {
        warnings.push(format!(
            "nobody claimed or answered any of the {} questions: there are no agents to fit",
            view.questions.len()
        ));
    }
    let cal = fit::calibrate(&log, &mut view, &opts.settings);
    let dir = &opts.dir;
    std::fs::create_dir_all(dir).map_err(|e| {
        Error::Failure(anyhow::Error::new(e).context(format!("creating {}", dir.display())))
    })?;
    let removed = remove_earlier(dir)?;
    if !removed.is_empty() {
        warnings.push(format!(
            "replaced an earlier calibration in {} ({} files)",
            dir.display(),
            removed.len()
        ));
    }
    let folder = default_name(dir);
    let name = format!("{folder}-fitted");
    let (toml, files) = out::scenario(&cal, &log, &view, &name);
    let mut written = Vec::new();
    for (file, text) in &files {
        write(&dir.join(file), text, &mut written)?;
    }
    let scenario = dir.join(SCENARIO_FILE);
    write(&scenario, &toml, &mut written)?;
    write(
        &dir.join("estimates.csv"),
        &out::estimates_csv(&cal),
        &mut written,
    )?;
    write(
        &dir.join("questions.csv"),
        &out::questions_csv(&view, opts.settings.speed),
        &mut written,
    )?;
    write(
        &dir.join("agents.csv"),
        &out::agents_csv(&cal, &view),
        &mut written,
    )?;
    let prediction = if opts.reps > 0 && !view.agents.is_empty() {
        match predict::predict(
            &scenario,
            &cal.outcome,
            opts.reps,
            opts.settings.seed,
            opts.jobs,
            stop,
        ) {
            Ok(p) => Some(p),
            // The scenario calibrate wrote must be valid: a refusal here is
            // a bug, not the user's input.
            Err(Error::Input(m)) => {
                return Err(Error::Failure(anyhow::anyhow!(
                    "internal: the fitted scenario is not valid: {m}"
                )));
            }
            Err(e) => return Err(e),
        }
    } else {
        None
    };
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
        write(&dir.join("prediction.csv"), &csv, &mut written)?;
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
    let report = report::text(&cal, &log, &view, prediction.as_ref(), &scenario);
    write(&dir.join("report.txt"), &report, &mut written)?;
    if opts.plots {
        written.extend(figures::draw(&cal, &folder, dir)?);
    }
    Ok(Finished {
        dir: dir.clone(),
        report,
        calibration: cal,
        prediction,
        warnings,
        written,
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
