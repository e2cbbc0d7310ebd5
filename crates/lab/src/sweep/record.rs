//! `run.toml`: which plan made the results in a folder, and the files its
//! runs wrote there. A run into a folder that holds the results of another
//! plan (another scenario, `--set`, `--seed`, `--reps`, `--shard` or data
//! file) replaces them: it removes what herdsim made there for the old
//! plan (the recorded files, the figures `herdsim plot` drew there, `tune/`)
//! and says so, so that no figure, trace or recommendation of the old plan
//! is left beside the new numbers. A run of the same plan keeps them: its
//! results are the same bytes.

use super::Error;
use super::journal::first_difference;
use crate::metrics::METRICS;
use crate::progress::Observer;
use crate::report::{FolderLock, LABELS_FILE, write_atomic};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The record's name in the results folder.
pub const RECORD_FILE: &str = "run.toml";

/// The largest record read (it holds the resolved scenario).
const MAX_BYTES: u64 = 64 << 20;

/// The files `herdsim tune` writes into `<results>/tune/`.
pub const TUNE_FILES: [&str; 3] = ["candidates.csv", "pareto.png", "recommended.env"];

/// What made a results folder.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The herdsim version that wrote it.
    pub herdsim: String,
    /// `K/N` for a shard's results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Hash of the empirical data files.
    pub data: String,
    /// What the plan's runs wrote into the folder, by name.
    pub files: Vec<String>,
    /// The resolved scenario (defaults, `--set`, `--seed`, `--reps` and
    /// the sweep included).
    pub scenario: String,
}

impl Record {
    /// Whether `other` records the same plan (its files aside).
    pub fn same_plan(&self, other: &Record) -> bool {
        self.scenario == other.scenario && self.data == other.data && self.shard == other.shard
    }

    /// How `old` differs from this plan, in a few words.
    fn difference(&self, old: &Record) -> String {
        if self.shard != old.shard {
            let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".into());
            return format!(
                "--shard was {}, now {}",
                show(&old.shard),
                show(&self.shard)
            );
        }
        if self.scenario == old.scenario {
            return "a data file changed".into();
        }
        let parse = |t: &str| t.parse::<toml::Table>().unwrap_or_default();
        match first_difference(&parse(&old.scenario), &parse(&self.scenario)) {
            Some((key, was, now)) => format!("`{key}` was {was}, now {now}"),
            None => "the scenario changed".into(),
        }
    }

    fn to_toml(&self) -> Result<String, Error> {
        let body = toml::to_string(self).map_err(|e| Error::Failure(e.into()))?;
        Ok(format!(
            "# What made the results in this folder (written by herdsim run; a run of\n\
             # another plan into this folder replaces them and what they left here).\n{body}"
        ))
    }
}

/// Whether `name` is a figure `herdsim plot` names by default:
/// `comparison.png`, `timeline-<msg>.png`, `<metric>[-<metric>...].png`
/// (or `.svg`).
pub fn is_plot_figure(name: &str) -> bool {
    let Some(stem) = name
        .strip_suffix(".png")
        .or_else(|| name.strip_suffix(".svg"))
    else {
        return false;
    };
    stem == "comparison"
        || stem.starts_with("timeline-")
        || (!stem.is_empty() && stem.split('-').all(|m| METRICS.contains(&m)))
}

/// Before a run of `new` writes its results into `dir`: when `dir` holds
/// the results of another plan (or results no record describes), remove
/// what herdsim made there and say so through `obs`, naming what goes for
/// good (not the files of `rewritten`, which the run writes anew). Returns
/// the files of the same plan's earlier runs, which stay (their bytes
/// would not change).
pub fn replace_other(
    dir: &Path,
    new: &Record,
    rewritten: &[&str],
    obs: &dyn Observer,
) -> Result<Vec<String>, Error> {
    let path = dir.join(RECORD_FILE);
    // Checked a regular file (or absent) before the run; a record that
    // cannot be read or parsed describes no plan.
    let old: Option<Record> = crate::files::read_input(&path, MAX_BYTES)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| toml::from_str(&t).ok());
    let why = match &old {
        Some(old) if new.same_plan(old) => {
            let kept = old.files.iter().filter(|f| dir.join(f).is_file());
            return Ok(kept.cloned().collect());
        }
        Some(old) => new.difference(old),
        None if dir.join("summary.csv").is_file() => "no record says which plan made them".into(),
        None => return Ok(Vec::new()),
    };
    let mut removed: Vec<String> = Vec::new();
    let remove = |name: &str, removed: &mut Vec<String>| -> Result<(), Error> {
        let p = dir.join(name);
        // Files only, never through a link.
        if p.symlink_metadata().is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&p)?;
            removed.push(name.to_string());
        }
        Ok(())
    };
    if let Some(old) = &old {
        for f in &old.files {
            // A recorded name is a plain file name inside the folder.
            if Path::new(f).file_name().is_some_and(|n| n == f.as_str()) {
                remove(f, &mut removed)?;
            }
        }
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_plot_figure(n) || n == LABELS_FILE)
        .collect();
    names.sort();
    for n in &names {
        remove(n, &mut removed)?;
    }
    remove_tune(dir, &mut removed, obs)?;
    removed.retain(|f| !rewritten.contains(&f.as_str()));
    removed.sort();
    removed.dedup();
    let what = if removed.is_empty() {
        String::new()
    } else {
        format!("; removed what they left: {}", removed.join(", "))
    };
    obs.warn(&format!(
        "herdsim: {} held the results of another plan ({why}); replacing them{what}",
        dir.display()
    ));
    Ok(Vec::new())
}

/// Remove what `herdsim tune` wrote into `dir/tune/`, unless a tune holds
/// that folder now.
fn remove_tune(dir: &Path, removed: &mut Vec<String>, obs: &dyn Observer) -> Result<(), Error> {
    let tune = dir.join("tune");
    if !tune.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    let Ok(_lock) = FolderLock::exclusive(&tune) else {
        obs.warn(&format!(
            "herdsim: warning: left {} in place: a tune is writing into it",
            tune.display()
        ));
        return Ok(());
    };
    let mut any = false;
    for f in TUNE_FILES {
        let p = tune.join(f);
        if p.symlink_metadata().is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&p)?;
            any = true;
        }
    }
    if any {
        removed.push("tune/".into());
    }
    Ok(())
}

/// Write the record of `new`, whose runs wrote `files` into `dir`.
pub fn write(dir: &Path, new: &Record, files: Vec<String>) -> Result<(), Error> {
    write_atomic(&dir.join(RECORD_FILE), render(new, files)?.as_bytes())?;
    Ok(())
}

/// The text of the record of `new` whose runs wrote `files`: what
/// [`write`] writes.
pub fn render(new: &Record, files: Vec<String>) -> Result<String, Error> {
    let mut files = files;
    files.sort();
    files.dedup();
    let record = Record {
        files,
        ..new.clone()
    };
    record.to_toml()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_figures_are_known_by_name() {
        assert!(is_plot_figure("comparison.png"));
        assert!(is_plot_figure("timeline-q1.svg"));
        assert!(is_plot_figure("duplicate_rate.png"));
        assert!(is_plot_figure(
            "responses_per_msg-wasted_inference_rate-ttfr_p95_ms.png"
        ));
        assert!(!is_plot_figure("my-figure.png"));
        assert!(!is_plot_figure("summary.csv"));
        assert!(!is_plot_figure(".png"));
    }

    fn record(scenario: &str) -> Record {
        Record {
            herdsim: "0".into(),
            shard: None,
            data: "d".into(),
            files: Vec::new(),
            scenario: scenario.into(),
        }
    }

    #[test]
    fn another_plan_is_replaced_and_the_same_plan_kept() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        let old = record("reps = 20\n");
        for f in ["summary.csv", "comparison.png", "spec.jsonl", "notes.txt"] {
            std::fs::write(dir.join(f), "x").expect("write");
        }
        std::fs::create_dir(dir.join("tune")).expect("mkdir");
        std::fs::write(dir.join("tune/candidates.csv"), "x").expect("write");
        let files = vec!["spec.jsonl".to_string(), "summary.csv".to_string()];
        write(dir, &old, files.clone()).expect("record");
        // The same plan: everything stays.
        assert_eq!(replace_other(dir, &old, &[], &()).expect("same"), files);
        assert!(dir.join("spec.jsonl").exists());
        // Another plan: herdsim's files go, the user's stay.
        let new = record("reps = 3\n");
        assert!(
            replace_other(dir, &new, &[], &())
                .expect("other")
                .is_empty()
        );
        for gone in [
            "summary.csv",
            "comparison.png",
            "spec.jsonl",
            "tune/candidates.csv",
        ] {
            assert!(!dir.join(gone).exists(), "{gone}");
        }
        assert!(dir.join("notes.txt").exists());
        assert_eq!(new.difference(&old), "`reps` was 20, now 3");
    }
}
