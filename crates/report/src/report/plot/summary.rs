//! Reading `summary.csv`: `scenario,policy,<param columns>,reps,<metric>_mean,
//! <metric>_ci95,...`, one row per policy and sweep point.

use super::bad;
use std::path::{Path, PathBuf};

/// One data row of a summary: its descriptive fields (every column before
/// `reps`) as text, and every column from `reps` on as a number (NaN when
/// empty).
#[derive(Debug, Clone)]
pub struct Row {
    /// 1-based line number in the file (the header is line 1).
    pub line: u64,
    pub keys: Vec<String>,
    pub values: Vec<f64>,
}

/// A parsed `summary.csv`.
#[derive(Debug, Clone)]
pub struct Summary {
    pub path: PathBuf,
    /// Names of the descriptive columns (scenario, policy, the swept keys).
    pub key_names: Vec<String>,
    /// Index into `key_names` of `policy`.
    pub policy_col: usize,
    /// Index into `key_names` of `scenario`, when there is one.
    pub scenario_col: Option<usize>,
    /// Names of the numeric columns, `reps` first.
    pub value_names: Vec<String>,
    pub rows: Vec<Row>,
}

/// Largest `summary.csv` `plot` reads (256 MiB, about 300 000 rows: more
/// points than a figure can show).
pub const MAX_SUMMARY_BYTES: u64 = 256 << 20;

impl Summary {
    /// Read and check a summary file. Every problem is an input error naming
    /// the file and the line or column.
    pub fn load(path: &Path) -> anyhow::Result<Summary> {
        let shown = path.display().to_string();
        if !path.exists() {
            return Err(bad(format!("{shown}: no such file")));
        }
        let file = crate::files::open_input(path)
            .map_err(|e| bad(format!("{shown}: cannot open: {e}")))?;
        let len = file
            .metadata()
            .map_err(|e| bad(format!("{shown}: cannot open: {e}")))?
            .len();
        if len > MAX_SUMMARY_BYTES {
            return Err(bad(format!(
                "{shown}: {len} bytes, larger than the {} MiB herdsim plots from a summary \
                 (docs/limits.md); plot part of the sweep (`herdsim run --shard`, or a \
                 smaller sweep)",
                MAX_SUMMARY_BYTES >> 20
            )));
        }
        // Read no further than the bound, should the file grow meanwhile.
        Self::from_reader(std::io::Read::take(file, MAX_SUMMARY_BYTES), path)
    }

    /// Parse a summary from any reader; `path` is only used in messages.
    pub fn from_reader<R: std::io::Read>(reader: R, path: &Path) -> anyhow::Result<Summary> {
        let shown = path.display().to_string();
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(false)
            .from_reader(reader);
        let headers = rdr
            .headers()
            .map_err(|e| bad(format!("{shown}: line 1: bad CSV header: {e}")))?
            .clone();
        let names: Vec<String> = headers.iter().map(|h| h.trim().to_string()).collect();
        let (policy, reps) = check_header(&names, &shown)?;
        let key_names = names[..reps].to_vec();
        let value_names = names[reps..].to_vec();
        let scenario_col = key_names.iter().position(|n| n == "scenario");
        let mut rows = Vec::new();
        for rec in rdr.records() {
            let rec = rec.map_err(|e| {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                match e.kind() {
                    csv::ErrorKind::UnequalLengths {
                        expected_len, len, ..
                    } => bad(format!(
                        "{shown}: line {line}: {len} fields, the header has {expected_len}"
                    )),
                    _ => bad(format!("{shown}: line {line}: bad CSV: {e}")),
                }
            })?;
            rows.push(parse_row(&rec, reps, &value_names, &shown)?);
        }
        if rows.is_empty() {
            return Err(bad(format!("{shown}: no data rows after the header")));
        }
        Ok(Summary {
            path: path.to_path_buf(),
            key_names,
            policy_col: policy,
            scenario_col,
            value_names,
            rows,
        })
    }

    /// The swept keys: the columns between `policy` and `reps`.
    pub fn param_cols(&self) -> std::ops::Range<usize> {
        self.policy_col + 1..self.key_names.len()
    }

    /// Metric names (each has a `<name>_mean` column), in file order.
    pub fn metrics(&self) -> Vec<String> {
        self.value_names
            .iter()
            .filter_map(|n| n.strip_suffix("_mean"))
            .map(str::to_string)
            .collect()
    }

    /// Column indices (into `values`) of a metric's mean and, when present,
    /// its 95% CI half-width. Accepts `name`, `name_mean`.
    pub fn metric_cols(&self, metric: &str) -> Option<(usize, Option<usize>)> {
        let base = metric.strip_suffix("_mean").unwrap_or(metric);
        let mean = self
            .value_names
            .iter()
            .position(|n| *n == format!("{base}_mean"))?;
        let ci = self
            .value_names
            .iter()
            .position(|n| *n == format!("{base}_ci95"));
        Some((mean, ci))
    }

    /// Find a descriptive column by name: exact, else the unique column whose
    /// dotted name ends with `.name`.
    pub fn key_col(&self, name: &str) -> Option<usize> {
        if let Some(i) = self.key_names.iter().position(|n| n == name) {
            return Some(i);
        }
        let suffix = format!(".{name}");
        let hits: Vec<usize> = (0..self.key_names.len())
            .filter(|&i| self.key_names[i].ends_with(&suffix))
            .collect();
        if hits.len() == 1 { Some(hits[0]) } else { None }
    }

    /// Distinct values of a descriptive column, in order of first appearance.
    pub fn distinct(&self, col: usize) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.rows {
            if !out.contains(&r.keys[col]) {
                out.push(r.keys[col].clone());
            }
        }
        out
    }

    /// True when every value of the column is a finite number.
    pub fn is_numeric(&self, col: usize) -> bool {
        self.rows
            .iter()
            .all(|r| r.keys[col].parse::<f64>().is_ok_and(f64::is_finite))
    }

    /// The scenario name(s), for titles.
    pub fn scenario_label(&self) -> Option<String> {
        let col = self.scenario_col?;
        let names = self.distinct(col);
        if names.is_empty() || names.iter().all(|n| n.is_empty()) {
            None
        } else {
            Some(names.join(", "))
        }
    }

    /// Mean replications per row, for subtitles.
    pub fn reps_label(&self) -> Option<String> {
        let reps: Vec<f64> = self
            .rows
            .iter()
            .map(|r| r.values[0])
            .filter(|v| v.is_finite())
            .collect();
        let min = reps.iter().copied().fold(f64::INFINITY, f64::min);
        let max = reps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !min.is_finite() {
            None
        } else if min == max {
            Some(format!("{min:.0}"))
        } else {
            Some(format!("{min:.0}-{max:.0}"))
        }
    }
}

/// Check the header's column names; return the indices of `policy` and
/// `reps`.
fn check_header(names: &[String], shown: &str) -> anyhow::Result<(usize, usize)> {
    if names.iter().all(|n| n.is_empty()) {
        return Err(bad(format!("{shown}: empty file (no CSV header)")));
    }
    let find = |want: &str| {
        names.iter().position(|n| n == want).ok_or_else(|| {
            bad(format!(
                "{shown}: line 1: the header has no `{want}` column"
            ))
        })
    };
    let (policy, reps) = (find("policy")?, find("reps")?);
    if reps < policy {
        return Err(bad(format!(
            "{shown}: line 1: `reps` must come after `policy` and the swept keys"
        )));
    }
    for (i, n) in names.iter().enumerate() {
        if n.is_empty() {
            return Err(bad(format!(
                "{shown}: line 1: column {} has no name",
                i + 1
            )));
        }
        if names[..i].contains(n) {
            return Err(bad(format!("{shown}: line 1: column `{n}` appears twice")));
        }
    }
    Ok((policy, reps))
}

/// One data row: the first `reps` fields as text, the others as numbers
/// (NaN when empty).
fn parse_row(
    rec: &csv::StringRecord,
    reps: usize,
    value_names: &[String],
    shown: &str,
) -> anyhow::Result<Row> {
    let line = rec.position().map(|p| p.line()).unwrap_or(0);
    let keys: Vec<String> = rec
        .iter()
        .take(reps)
        .map(|s| s.trim().to_string())
        .collect();
    let mut values = Vec::with_capacity(value_names.len());
    for (j, field) in rec.iter().skip(reps).enumerate() {
        let field = field.trim();
        let v = if field.is_empty() {
            f64::NAN
        } else {
            field.parse::<f64>().map_err(|_| {
                bad(format!(
                    "{shown}: line {line}: column `{}`: `{field}` is not a number",
                    value_names[j]
                ))
            })?
        };
        values.push(v);
    }
    Ok(Row { line, keys, values })
}

#[cfg(test)]
mod tests {
    use super::super::is_input_error;
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Summary> {
        Summary::from_reader(text.as_bytes(), Path::new("s.csv"))
    }

    #[test]
    fn columns_are_classified() {
        let s = parse(
            "scenario,policy,agents.0.csma.max_ms,ttl_ms,reps,duplicate_rate_mean,duplicate_rate_ci95,events_mean,events_ci95\n\
             d,spec,2000,45000,20,0.1,0.01,100,2\n\
             d,none,2000,45000,20,0.3,,100,2\n",
        )
        .expect("parses");
        assert_eq!(s.param_cols(), 2..4);
        assert_eq!(s.metrics(), vec!["duplicate_rate", "events"]);
        assert_eq!(s.metric_cols("duplicate_rate"), Some((1, Some(2))));
        assert_eq!(s.metric_cols("duplicate_rate_mean"), Some((1, Some(2))));
        assert_eq!(s.metric_cols("nope"), None);
        assert_eq!(s.key_col("csma.max_ms"), Some(2));
        assert_eq!(s.key_col("max_ms"), Some(2));
        assert_eq!(s.key_col("ttl_ms"), Some(3));
        assert!(s.rows[1].values[2].is_nan());
        assert_eq!(s.rows[1].line, 3);
        assert_eq!(s.distinct(1), vec!["spec", "none"]);
        assert!(s.is_numeric(2));
        assert!(!s.is_numeric(1));
        assert_eq!(s.scenario_label().as_deref(), Some("d"));
        assert_eq!(s.reps_label().as_deref(), Some("20"));
    }

    #[test]
    fn bad_number_names_line_and_column() {
        let e = parse("scenario,policy,reps,x_mean,x_ci95\nd,spec,20,0.1,0.0\nd,none,20,oops,0\n")
            .expect_err("fails");
        assert!(is_input_error(&e));
        let msg = e.to_string();
        assert!(msg.contains("s.csv: line 3"), "{msg}");
        assert!(msg.contains("x_mean"), "{msg}");
    }

    #[test]
    fn ragged_line_is_reported() {
        let e = parse("scenario,policy,reps,x_mean,x_ci95\nd,spec,20,0.1\n").expect_err("fails");
        let msg = e.to_string();
        assert!(msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn missing_columns_are_reported() {
        let e = parse("scenario,reps,x_mean\nd,1,2\n").expect_err("fails");
        assert!(e.to_string().contains("`policy`"));
        let e = parse("scenario,policy,x_mean\nd,spec,2\n").expect_err("fails");
        assert!(e.to_string().contains("`reps`"));
        let e = parse("scenario,policy,reps,x_mean\n").expect_err("fails");
        assert!(e.to_string().contains("no data rows"));
    }
}
