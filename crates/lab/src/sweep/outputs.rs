//! The files a run or a merge writes, and the checks made before any of
//! them: the results folder (a folder, locked, no input overwritten), the
//! two CSVs, the comparison figure of a sweep.

use super::journal::JOURNAL_FILE;
use super::record::RECORD_FILE;
use super::shard::SHARD_FILE;
use super::{Error, Row};
use crate::floor::PolicyKind;
use crate::progress::Observer;
use crate::report::{
    self, FolderLock, LABELS_FILE, LOCK_FILE, LockError, SummaryRow, labels_toml, same_path,
    write_atomic,
};
use crate::scenario::AxisLabels;
use std::path::{Path, PathBuf};

/// The files a run writes into its results folder.
pub const RESULT_FILES: [&str; 8] = [
    "runs.csv",
    "summary.csv",
    "comparison.png",
    LABELS_FILE,
    RECORD_FILE,
    JOURNAL_FILE,
    SHARD_FILE,
    LOCK_FILE,
];

/// Lock the results folder `dir` (creating it) for this process, and
/// remove what killed runs left there.
pub fn lock_results(dir: &Path, obs: &dyn Observer) -> Result<FolderLock, Error> {
    let lock = FolderLock::exclusive(dir).map_err(|e| match e {
        LockError::Held { .. } => Error::Input(e.to_string()),
        LockError::Io { .. } => Error::Failure(anyhow::anyhow!("cannot create {e}")),
    })?;
    if let Some(why) = &lock.unsupported {
        obs.warn(&format!(
            "herdsim: warning: cannot lock {} ({why}); nothing stops a second run from \
             writing into it at the same time",
            dir.display()
        ));
    }
    let removed = lock.remove_stale_temps();
    if !removed.is_empty() {
        obs.info(&format!(
            "herdsim: removed {} temporary file{} that killed runs left in {}: {}",
            removed.len(),
            if removed.len() == 1 { "" } else { "s" },
            dir.display(),
            removed.join(", ")
        ));
    }
    Ok(lock)
}

/// `--out` (`out`) and the results folder `dir` must be folders or not
/// exist yet, and each of the `files` the run writes there a regular file
/// or not there yet (never replaced if it is a link, a FIFO or a device:
/// [`crate::files`]).
pub fn check_folders(out: &Path, dir: &Path, files: &[&str]) -> Result<(), Error> {
    for d in [out, dir] {
        if d.exists() && !d.is_dir() {
            return Err(Error::Input(format!(
                "--out {}: {} exists and is not a folder",
                out.display(),
                d.display()
            )));
        }
    }
    for f in files.iter().chain([&LOCK_FILE]) {
        let path = dir.join(f);
        match crate::files::output_target(&path) {
            Ok(crate::files::Target::File) => {}
            Ok(_) => {
                return Err(Error::Input(format!(
                    "--out {}: {} is not a regular file; herdsim writes only regular files \
                     in a results folder: remove it or choose another --out",
                    out.display(),
                    path.display()
                )));
            }
            Err(why) => {
                return Err(Error::Input(format!(
                    "--out {}: {} {why}",
                    out.display(),
                    path.display()
                )));
            }
        }
    }
    Ok(())
}

/// Check the output paths before any work: `--out` and the results folder
/// `dir` must be folders (or not exist yet); no output may be one of the
/// run's `inputs`; `trace` must name a file that is neither an input nor
/// another output of the run.
pub fn check(
    out: &Path,
    dir: &Path,
    trace: Option<&Path>,
    inputs: &[PathBuf],
) -> Result<(), Error> {
    check_folders(out, dir, &RESULT_FILES)?;
    let outputs: Vec<PathBuf> = RESULT_FILES.iter().map(|f| dir.join(f)).collect();
    for o in &outputs {
        if let Some(i) = inputs.iter().find(|i| same_path(o, i)) {
            return Err(Error::Input(format!(
                "--out {}: the run would overwrite its input {} with its results; \
                 choose another --out",
                out.display(),
                i.display()
            )));
        }
    }
    let Some(t) = trace else { return Ok(()) };
    let shown = t.display();
    let why = if let Err(refused) = crate::files::check_output(t) {
        refused.0
    } else if t.is_dir() {
        "is a folder; name the file to write the trace to".to_string()
    } else if let Some(parent) = t
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && p.exists() && !p.is_dir())
    {
        format!("{} is not a folder", parent.display())
    } else if let Some(i) = inputs.iter().find(|i| same_path(t, i)) {
        format!(
            "is an input of this run ({}); name another file",
            i.display()
        )
    } else if outputs.iter().any(|o| same_path(t, o)) {
        "is a results file of this run; name another file".to_string()
    } else {
        return Ok(());
    };
    Err(Error::Input(format!("--trace {shown}: {why}")))
}

/// The rows (in plan order) as `runs.csv` and `summary.csv`: the bytes of
/// both and the summary.
pub struct Tables {
    pub keys: Vec<String>,
    pub summary: Vec<SummaryRow>,
    pub runs_csv: Vec<u8>,
    pub summary_csv: Vec<u8>,
}

impl Tables {
    /// Put `rows` in plan order and make both CSVs; `params` gives a
    /// point's parameter columns (the sweep `keys`).
    pub fn of(
        name: &str,
        keys: Vec<String>,
        rows: &mut [Row],
        policies: &[PolicyKind],
        params: &dyn Fn(usize) -> Vec<(String, String)>,
    ) -> Result<Tables, Error> {
        super::sort_rows(rows, policies);
        let summary = report::summarise(rows, params);
        Ok(Tables {
            runs_csv: report::runs_csv(name, &keys, rows, params)?,
            summary_csv: report::summary_csv(name, &keys, &summary)?,
            keys,
            summary,
        })
    }

    /// Write both into `dir`, each atomically.
    pub fn write(&self, dir: &Path) -> Result<(), Error> {
        write_atomic(&dir.join("runs.csv"), &self.runs_csv)?;
        write_atomic(&dir.join("summary.csv"), &self.summary_csv)?;
        Ok(())
    }
}

/// The standard comparison figure, next to the CSVs in `dir`: whether it
/// was drawn. A drawing failure loses no results, so it is a warning.
pub fn draw_comparison(dir: &Path, obs: &dyn Observer) -> bool {
    let png = dir.join("comparison.png");
    match report::plot::comparison_figure(&dir.join("summary.csv"), &png, None) {
        Ok(notes) => {
            for n in notes {
                obs.info(&format!("herdsim: {}: {n}", png.display()));
            }
            true
        }
        Err(e) => {
            obs.warn(&format!(
                "herdsim: warning: could not draw {}: {e:#}",
                png.display()
            ));
            false
        }
    }
}

/// `labels.toml` in `dir` when the plan's scenario labels its sweep axes
/// (a stale one is removed otherwise): whether it was written.
pub fn write_plan_labels(dir: &Path, plan: &super::Plan) -> Result<bool, Error> {
    write_labels(dir, &plan.loaded.file, &plan.loaded.sweep_labels())
}

/// `labels.toml` in `dir` for `axes`, labels `source` gives its sweep axes
/// (a stale one is removed when there are none): whether it was written.
pub fn write_labels(dir: &Path, source: &str, axes: &[AxisLabels]) -> Result<bool, Error> {
    let path = dir.join(LABELS_FILE);
    if axes.is_empty() {
        if path.symlink_metadata().is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&path)?;
        }
        return Ok(false);
    }
    let text = labels_toml(source, axes).map_err(Error::Failure)?;
    write_atomic(&path, text.as_bytes())?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_may_not_overwrite_inputs() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = tmp.path().join("out");
        let dir = out.join("s");
        let input = dir.join("summary.csv");
        let e = check(&out, &dir, None, std::slice::from_ref(&input)).expect_err("refused");
        assert!(matches!(e, Error::Input(m) if m.contains("would overwrite its input")));
        let e = check(&out, &dir, Some(&input), &[]).expect_err("refused");
        assert!(matches!(e, Error::Input(m) if m.contains("results file")));
        let e = check(&out, &dir, Some(tmp.path()), &[]).expect_err("refused");
        assert!(matches!(e, Error::Input(m) if m.contains("is a folder")));
        check(&out, &dir, Some(&tmp.path().join("t.jsonl")), &[]).expect("fine");
        std::fs::write(&out, "x").expect("write");
        assert!(check_folders(&out, &dir, &[]).is_err());
    }
}
