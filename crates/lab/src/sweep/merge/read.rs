//! One shard's results folder read back: `shard.toml` checked against the
//! plan it records, every row of `runs.csv` against that plan, and
//! `summary.csv` against those rows.

use crate::floor::PolicyKind;
use crate::report::{self, FolderLock};
use crate::scenario::validate::{check_name, sweep_table};
use crate::scenario::{Axis, AxisLabels, MAX_POINTS, Scenario, csv_value, grid_picks};
use crate::sweep::journal::{self, JOURNAL_FILE};
use crate::sweep::shard::{SHARD_FILE, SHARD_FORMAT, ShardMeta};
use crate::sweep::{Error, Job, Row, Shard, parse_metrics, rep_seed};
use std::path::{Path, PathBuf};

/// Largest `shard.toml` read (it holds the resolved scenario: 64 MiB).
const MAX_SHARD_FILE_BYTES: u64 = 64 << 20;

/// One shard's files, read and checked against the plan they record.
pub struct ShardData {
    /// The folder holding `shard.toml`.
    pub dir: PathBuf,
    pub meta: ShardMeta,
    pub plan: PlanView,
    /// runs.csv, row by row, each checked.
    pub rows: Vec<Row>,
    /// Shared lock on the shard's folder while it is read.
    _lock: Option<FolderLock>,
}

/// What a shard's recorded resolved scenario says about the rows: the
/// name, master seed, replications, policies and sweep axes (values as
/// the CSVs write them).
pub struct PlanView {
    pub name: String,
    pub seed: u64,
    pub reps: u32,
    pub policies: Vec<PolicyKind>,
    pub axes: Vec<(String, Vec<String>)>,
    /// The labels the scenario gives its axes (for `labels.toml`).
    pub labels: Vec<AxisLabels>,
}

impl PlanView {
    fn from_resolved(text: &str) -> Result<PlanView, String> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| e.message().trim().to_string())?;
        let table = s.sweep.take().unwrap_or_default();
        let parsed = sweep_table(table).map_err(|(key, m)| format!("`{key}`: {m}"))?;
        let labels = parsed.iter().filter_map(Axis::labels).collect();
        let axes = parsed
            .into_iter()
            .map(|a| (a.key, a.values.iter().map(csv_value).collect()))
            .collect();
        let policies = s.policy_kinds();
        if policies.len() != s.policies.len() || policies.is_empty() {
            return Err(format!("policies {:?} are not all known", s.policies));
        }
        Ok(PlanView {
            name: s.name,
            seed: s.seed,
            reps: s.reps,
            policies,
            axes,
            labels,
        })
    }

    /// Points in the grid (saturating).
    fn points(&self) -> usize {
        self.axes
            .iter()
            .fold(1usize, |n, (_, v)| n.saturating_mul(v.len()))
    }

    /// The parameter columns of `point`.
    pub fn params(&self, point: usize) -> Vec<(String, String)> {
        let lens: Vec<usize> = self.axes.iter().map(|(_, v)| v.len()).collect();
        grid_picks(&lens, point)
            .iter()
            .zip(&self.axes)
            .map(|(pick, (k, v))| (k.clone(), v[*pick].clone()))
            .collect()
    }
}

fn bad(msg: String) -> Error {
    Error::Input(msg)
}

/// `:line:col` of the value of top-level `key` in `shard.toml` text.
fn key_pos(text: &str, key: &str) -> String {
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix(key)
            && let Some(value) = rest.trim_start().strip_prefix('=')
        {
            let col = line.len() - value.trim_start().len() + 1;
            return format!(":{}:{col}", i + 1);
        }
    }
    String::new()
}

/// The folder holding `shard.toml`: `dir` itself, or its only subfolder
/// that has one.
fn shard_dir(dir: &Path) -> Result<PathBuf, Error> {
    if dir.join(SHARD_FILE).is_file() {
        return Ok(dir.to_path_buf());
    }
    let mut subfolders: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    subfolders.sort();
    let mut found: Vec<PathBuf> = subfolders
        .iter()
        .filter(|p| p.join(SHARD_FILE).is_file())
        .cloned()
        .collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => {
            // A shard stopped part-way left its journal (in `dir`, or in
            // the scenario's folder under the `--out` given).
            let journal = std::iter::once(dir.to_path_buf())
                .chain(subfolders)
                .map(|d| d.join(JOURNAL_FILE))
                .find(|j| j.is_file());
            let why = match &journal {
                Some(j) => unfinished(j),
                None if !dir.exists() => "no such folder".to_string(),
                None => {
                    "not the results folder of a finished `herdsim run --shard K/N`".to_string()
                }
            };
            let at = journal.as_deref().and_then(Path::parent).unwrap_or(dir);
            Err(bad(format!("{}: no {SHARD_FILE}: {why}", at.display())))
        }
        _ => Err(bad(format!(
            "{}: holds several shard results ({}); name one of them",
            dir.display(),
            found
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Why a folder with a journal and no `shard.toml` cannot be merged: the
/// shard (from the journal) and how far it got.
fn unfinished(journal: &Path) -> String {
    match journal::read(journal) {
        Ok(c) => {
            let shard = c.header.shard.map_or_else(
                || "the run (not a shard)".to_string(),
                |s| format!("shard {s}"),
            );
            let resume = c
                .header
                .shard
                .map_or_else(String::new, |s| format!(" --shard {s}"));
            format!(
                "{shard} has not finished ({} of {} replications are saved in its journal): \
                 complete it with `herdsim run ...{resume} --resume`",
                c.rows.len(),
                c.header.jobs
            )
        }
        Err(_) => "the shard has not finished: complete it with `herdsim run ... --shard K/N \
                   --resume`"
            .to_string(),
    }
}

/// Bytes a row of a results CSV may take per column (a number takes at
/// most 24; room for quoting).
pub const CSV_COLUMN_BYTES: u64 = 64;

/// The most bytes `runs.csv` or `summary.csv` of `rows` rows under
/// `columns` can take, parameters included: the file is refused unread
/// beyond it (docs/limits.md, "Result files").
fn csv_bound(plan: &PlanView, columns: &[String], rows: usize) -> u64 {
    let params: u64 = plan
        .axes
        .iter()
        .map(|(_, values)| 2 * values.iter().map(String::len).max().unwrap_or(0) as u64 + 2)
        .sum();
    let header: u64 = columns.iter().map(|c| c.len() as u64 + 3).sum();
    let row = CSV_COLUMN_BYTES * columns.len() as u64 + params;
    header.saturating_add((rows as u64).saturating_mul(row))
}

fn read_csv(
    path: &Path,
    expected_header: &[String],
    max: u64,
) -> Result<Vec<csv::StringRecord>, Error> {
    let bytes = crate::files::read_input(path, max)
        .map_err(|e| bad(format!("{}: cannot read: {e}", path.display())))?;
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bytes.as_slice());
    let header = r
        .headers()
        .map_err(|e| bad(format!("{}: {e}", path.display())))?
        .clone();
    if header.iter().ne(expected_header.iter().map(String::as_str)) {
        return Err(bad(format!(
            "{}: line 1: the header is not the one this herdsim writes for these sweep keys \
             (another herdsim version, or an edited file?)",
            path.display()
        )));
    }
    r.records()
        .map(|rec| rec.map_err(|e| bad(format!("{}: {e}", path.display()))))
        .collect()
}

/// Read and check the shard in `dir` (its results folder, or the `--out`
/// folder holding it).
pub fn read_shard(dir: &Path) -> Result<ShardData, Error> {
    let dir = shard_dir(dir)?;
    // A shard being (re)run right now is not finished: refuse it.
    let lock = FolderLock::shared(&dir).map_err(|e| bad(e.to_string()))?;
    let meta_path = dir.join(SHARD_FILE);
    let text = crate::files::read_input(&meta_path, MAX_SHARD_FILE_BYTES)
        .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other))
        .map_err(|e| bad(format!("{}: cannot read: {e}", meta_path.display())))?;
    let at = |key: &str| {
        format!(
            "{}{}: key `{key}`",
            meta_path.display(),
            key_pos(&text, key)
        )
    };
    let meta = parse_meta(&text, &meta_path, &at)?;
    let plan = PlanView::from_resolved(&meta.resolved)
        .map_err(|m| bad(format!("{}: {m}", at("resolved"))))?;
    check_against_plan(&meta, &plan, &at)?;
    let rows = read_rows(&dir.join("runs.csv"), &meta, &plan)?;
    check_summary(&dir.join("summary.csv"), &meta, &plan, &rows)?;
    Ok(ShardData {
        dir,
        meta,
        plan,
        rows,
        _lock: lock,
    })
}

/// `shard.toml` parsed, its format, name, shard, size, fingerprint and
/// build checked.
fn parse_meta(text: &str, path: &Path, at: &dyn Fn(&str) -> String) -> Result<ShardMeta, Error> {
    // The format first: an older file lacks fields the parser wants.
    let format = toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| t.get("format").and_then(toml::Value::as_integer));
    if let Some(f) = format.filter(|f| *f != i64::from(SHARD_FORMAT)) {
        return Err(bad(format!(
            "{}: format {f}, but this herdsim reads format {SHARD_FORMAT}: run the shard \
             again with this herdsim",
            at("format")
        )));
    }
    let meta: ShardMeta = toml::from_str(text).map_err(|e| {
        let pos = e
            .span()
            .map(|s| {
                let (l, c) = crate::scenario::line_col(text, s.start);
                format!(":{l}:{c}")
            })
            .unwrap_or_default();
        bad(format!("{}{pos}: {}", path.display(), e.message().trim()))
    })?;
    // It becomes a folder name under --out: the rule of a scenario's `name`.
    check_name(&meta.scenario).map_err(|m| bad(format!("{}: {m}", at("scenario"))))?;
    if meta.shards == 0 || meta.shards > MAX_POINTS || meta.shard >= meta.shards {
        return Err(bad(format!(
            "{}: shard {} of {} is not a shard K/N with 0 <= K < N <= {MAX_POINTS}",
            at("shards"),
            meta.shard,
            meta.shards
        )));
    }
    if meta.points_total > MAX_POINTS {
        return Err(bad(format!(
            "{}: {} is more than the {MAX_POINTS} points a sweep may have",
            at("points_total"),
            meta.points_total
        )));
    }
    // The recorded parts must give the recorded fingerprint.
    if journal::fingerprint_of(&meta.build, &meta.resolved, &meta.data) != meta.fingerprint {
        return Err(bad(format!(
            "{}: does not match the build, scenario and data the file records (an edited \
             file?); run the shard again",
            at("fingerprint")
        )));
    }
    if meta.build != crate::BUILD {
        return Err(bad(format!(
            "{}: the shard was computed by another build of herdsim (build {}, this is build \
             {}); merge with the herdsim that ran the shards, or run them again with this one",
            at("build"),
            meta.build,
            crate::BUILD
        )));
    }
    Ok(meta)
}

/// The fields of `shard.toml` must say what its resolved scenario says.
fn check_against_plan(
    meta: &ShardMeta,
    plan: &PlanView,
    at: &dyn Fn(&str) -> String,
) -> Result<(), Error> {
    let names: Vec<&str> = plan.policies.iter().map(|p| p.name()).collect();
    let keys: Vec<&String> = plan.axes.iter().map(|(k, _)| k).collect();
    let mismatch = if plan.name != meta.scenario {
        Some("scenario")
    } else if plan.reps != meta.reps {
        Some("reps")
    } else if names != meta.policies {
        Some("policies")
    } else if keys != meta.sweep_keys.iter().collect::<Vec<_>>() {
        Some("sweep_keys")
    } else if plan.points() != meta.points_total {
        Some("points_total")
    } else {
        None
    };
    if let Some(key) = mismatch {
        return Err(bad(format!(
            "{}: does not match the resolved scenario recorded in the same file (an edited \
             file?)",
            at(key)
        )));
    }
    let expected = Shard {
        index: meta.shard,
        count: meta.shards,
    };
    if meta.points != expected.points(meta.points_total) {
        return Err(bad(format!(
            "{}: not the points of shard {expected}",
            at("points")
        )));
    }
    Ok(())
}

/// runs.csv: every row's scenario, policy, parameters, replication and
/// seed must be the ones the plan puts there.
fn read_rows(path: &Path, meta: &ShardMeta, plan: &PlanView) -> Result<Vec<Row>, Error> {
    let columns = report::runs_header(&meta.sweep_keys);
    let (p, reps) = (plan.policies.len(), plan.reps as usize);
    let want = meta.points.len() * p * reps;
    let records = read_csv(path, &columns, csv_bound(plan, &columns, want))?;
    if records.len() != want {
        return Err(bad(format!(
            "{}: {} rows, but {} points x {p} policies x {reps} replications make {want}",
            path.display(),
            records.len(),
            meta.points.len()
        )));
    }
    let mut rows = Vec::with_capacity(want);
    let nk = plan.axes.len();
    for (i, rec) in records.iter().enumerate() {
        let (point, rep) = (meta.points[i / (p * reps)], (i % reps) as u32);
        let job = Job {
            point,
            policy: plan.policies[(i / reps) % p],
            rep,
            seed: rep_seed(plan.seed, point, rep),
        };
        let line = i + 2;
        let mut expect: Vec<String> = vec![plan.name.clone(), job.policy.name().to_string()];
        expect.extend(plan.params(job.point).into_iter().map(|(_, v)| v));
        expect.push(job.rep.to_string());
        expect.push(job.seed.to_string());
        for (c, want) in expect.iter().enumerate() {
            let got = rec.get(c).unwrap_or("");
            if got != want {
                return Err(bad(format!(
                    "{}: line {line}: column {} is `{got}`, but the run's plan (point {}, \
                     {}, replication {}) puts `{want}` there: the rows are out of order, \
                     edited, or from another run",
                    path.display(),
                    columns[c],
                    job.point,
                    job.policy.name(),
                    job.rep
                )));
            }
        }
        let result = parse_metrics(rec.iter().skip(4 + nk)).map_err(|m| {
            bad(format!(
                "{}: line {line}: `{}` in column {} is not a number",
                path.display(),
                rec.get(4 + nk + m).unwrap_or(""),
                columns.get(4 + nk + m).map_or("", String::as_str)
            ))
        })?;
        rows.push(Row { job, result });
    }
    Ok(rows)
}

/// summary.csv must be the summary of `rows`.
fn check_summary(
    path: &Path,
    meta: &ShardMeta,
    plan: &PlanView,
    rows: &[Row],
) -> Result<(), Error> {
    let params = |point: usize| plan.params(point);
    let recomputed = report::summary_csv(
        &plan.name,
        &meta.sweep_keys,
        &report::summarise(rows, &params),
    )?;
    // It must be the recomputed summary, byte for byte: nothing longer is read.
    let on_disk = crate::files::read_input(path, recomputed.len() as u64)
        .map_err(|e| bad(format!("{}: cannot read: {e}", path.display())))?;
    if on_disk == recomputed {
        return Ok(());
    }
    let lines = |b: &[u8]| b.split(|c| *c == b'\n').count();
    let line = on_disk
        .split(|b| *b == b'\n')
        .zip(recomputed.split(|b| *b == b'\n'))
        .position(|(a, b)| a != b)
        .map_or_else(|| lines(&on_disk).min(lines(&recomputed)), |i| i + 1);
    Err(bad(format!(
        "{}: line {line}: does not match the replications in runs.csv beside it (edited, \
         or from another run?)",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "name = \"s\"\nseed = 1\nreps = 2\npolicies = [\"spec\"]\n";

    #[test]
    fn a_recorded_plan_reads_plain_and_labelled_axes_as_a_scenario_does() {
        let text = format!(
            "{HEAD}[sweep]\n\"server.ttl_ms\" = [1000, 2000]\n\
             \"agents.0.respond_p\" = {{ values = [1.0, 0.2], label = \"who\", \
             labels = [\"all\", \"few\"] }}\n"
        );
        let plan = PlanView::from_resolved(&text).expect("reads");
        let keys: Vec<&str> = plan.axes.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["server.ttl_ms", "agents.0.respond_p"]);
        assert_eq!(plan.axes[1].1, ["1", "0.2"]);
        assert_eq!(plan.labels.len(), 1);
        assert_eq!(plan.labels[0].label.as_deref(), Some("who"));
        assert_eq!(
            plan.labels[0].values,
            [("1".into(), "all".into()), ("0.2".into(), "few".into())]
        );
        // Checked as the scenario loader checks it: one label per value.
        let bad = format!(
            "{HEAD}[sweep]\n\"server.ttl_ms\" = {{ values = [1000, 2000], labels = [\"a\"] }}\n"
        );
        let e = PlanView::from_resolved(&bad).err().expect("refused");
        assert!(
            e.contains("sweep.server.ttl_ms") && e.contains("one label per value"),
            "{e}"
        );
    }
}
