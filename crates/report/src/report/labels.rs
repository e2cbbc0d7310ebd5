//! `labels.toml`: the labels a scenario gives its sweep axes
//! (`[sweep]` `{ values, label, labels }`, scenarios/README.md), written by
//! `herdsim run` beside `summary.csv` so that every figure drawn from that
//! file, by `run` or later by `herdsim plot`, names the axes and values as
//! the scenario does. The CSVs themselves carry only keys and values.

use crate::error::bad_input as bad;
use crate::scenario::AxisLabels;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file's name, beside `summary.csv`.
pub const LABELS_FILE: &str = "labels.toml";

/// The largest `labels.toml` read (10 000 values of 100 characters fit).
const MAX_BYTES: u64 = 16 << 20;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    axis: Vec<AxisLabels>,
}

/// The text of `labels.toml` for `axes`.
pub fn to_toml(source: &str, axes: &[AxisLabels]) -> anyhow::Result<String> {
    let body = toml::to_string(&File {
        axis: axes.to_vec(),
    })?;
    Ok(format!(
        "# The labels {source} gives its sweep axes, for the figures drawn from\n\
         # summary.csv (written by herdsim run; herdsim plot reads it).\n{body}"
    ))
}

/// Where the labels of the figures drawn from `summary_csv` are.
pub fn beside(summary_csv: &Path) -> PathBuf {
    match summary_csv.parent() {
        Some(p) => p.join(LABELS_FILE),
        None => PathBuf::from(LABELS_FILE),
    }
}

/// The labels beside `summary_csv`: none when there is no such file; a
/// file that does not read as labels is an input error naming it.
pub fn read_beside(summary_csv: &Path) -> anyhow::Result<Vec<AxisLabels>> {
    let path = beside(summary_csv);
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let shown = path.display();
    let bytes = crate::files::read_input(&path, MAX_BYTES)
        .map_err(|e| bad(format!("{shown}: cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| bad(format!("{shown}: not UTF-8 text")))?;
    let file: File = toml::from_str(&text).map_err(|e| {
        let at = e
            .span()
            .map(|s| {
                let (line, col) = crate::scenario::line_col(&text, s.start);
                format!(":{line}:{col}")
            })
            .unwrap_or_default();
        bad(format!("{shown}{at}: {}", e.message().trim()))
    })?;
    Ok(file.axis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_and_bad_files_are_named() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let csv = tmp.path().join("summary.csv");
        assert!(read_beside(&csv).expect("none").is_empty());
        let axes = vec![AxisLabels {
            key: "agents.1.respond_p".into(),
            label: Some("channels".into()),
            values: vec![
                ("1".into(), "open".into()),
                ("0.2".into(), "specialised".into()),
            ],
        }];
        let text = to_toml("s.toml", &axes).expect("toml");
        std::fs::write(beside(&csv), text).expect("write");
        assert_eq!(read_beside(&csv).expect("reads"), axes);
        std::fs::write(beside(&csv), "[[axis]]\nkey = 3\n").expect("write");
        let e = read_beside(&csv).expect_err("bad");
        assert!(crate::error::is_input_error(&e));
        assert!(e.to_string().contains("labels.toml:2:"), "{e}");
    }
}
