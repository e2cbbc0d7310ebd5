//! The journal: finished replications of a run in progress, one complete
//! line each, so that a sweep stopped half-way (Ctrl-C, kill, a batch
//! system's time limit) keeps them and `--resume` completes it.
//!
//! `<out>/<name>/runs.journal` is plain text. A header of `#` lines says
//! what run it belongs to; then one line per finished replication, in the
//! order they finished, its fields separated by tabs (spaces below):
//!
//! ```text
//! # herdsim-journal 1
//! # herdsim 0.1.0
//! # build 9c1f0e2d3b4a5968
//! # fingerprint 3f0c9a1b2d4e5f60
//! # shard all
//! # jobs 120
//! # data cbf29ce484222325
//! # columns point policy rep seed duplicate_rate ... check
//! #| name = "csma-window"
//! #| ...the resolved scenario, as `herdsim validate` prints it...
//! 0 none 0 1234567890 0.25 ... 9a8b7c6d5e4f3a2b
//! ```
//!
//! A row is `point`, `policy`, `rep`, `seed`, every metric in `METRICS`
//! order (formatted by [`num`], the shortest string that parses
//! back to the same bits, so resumed rows are bit-identical to computed
//! ones), and `check`, the FNV-1a hash of the line before its last tab.
//! Each row is written with one `write` call as soon as its replication
//! finishes; a torn last line (no newline, or a bad check) is dropped on
//! resume and its replication runs again. The journal is removed once
//! `summary.csv` and `runs.csv` are written.

use super::{Fnv, Job, Row, Shard};
use crate::floor::PolicyKind;
use crate::metrics::METRICS;
use crate::report::{num, write_atomic};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use toml::Value;

/// File name of the journal inside the results folder.
pub const JOURNAL_FILE: &str = "runs.journal";

/// Version of the journal format.
pub const JOURNAL_FORMAT: u32 = 1;

/// What run a journal belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// herdsim version that wrote it.
    pub herdsim: String,
    /// [`crate::BUILD`] of the herdsim that wrote it (`unknown` in a
    /// journal written before builds were recorded).
    pub build: String,
    /// [`fingerprint`] of the scenario, plan and data.
    pub fingerprint: String,
    /// `--shard`, if any.
    pub shard: Option<Shard>,
    /// Jobs in the run (points x policies x reps).
    pub jobs: usize,
    /// Hash of the empirical data files the scenario reads ([`data_hash`]).
    pub data: String,
    /// The resolved scenario (sweep included), as `herdsim validate` prints it.
    pub scenario: String,
}

/// Fingerprint of a run: herdsim version and build, metric columns, the
/// resolved scenario (every default filled in, `--set`, `--seed` and
/// `--reps` applied, sweep axes expanded: this fixes the points, policies,
/// reps and seeds) and the empirical data it reads. Shards of one run
/// share it.
pub fn fingerprint(scenario_toml: &str, data: &str) -> String {
    fingerprint_of(crate::BUILD, scenario_toml, data)
}

/// [`fingerprint`] as the herdsim build `build` computes it (`merge`
/// checks a shard's recorded fingerprint against its recorded parts).
pub fn fingerprint_of(build: &str, scenario_toml: &str, data: &str) -> String {
    let mut h = Fnv::default();
    h.part(b"herdsim run");
    h.part(env!("CARGO_PKG_VERSION").as_bytes());
    h.part(build.as_bytes());
    for m in METRICS {
        h.part(m.as_bytes());
    }
    h.part(scenario_toml.as_bytes());
    h.part(data.as_bytes());
    h.hex()
}

/// Every empirical data file the resolved scenario (sweep values
/// included) names: a table with `kind = "empirical"` and a `path`, or a
/// swept `....path` string; as written, relative to the scenario's folder,
/// sorted, each once.
pub fn data_files(resolved: &toml::Table) -> Vec<String> {
    fn walk(v: &Value, key: &str, paths: &mut Vec<String>) {
        match v {
            Value::Table(t) => {
                let empirical = t.get("kind").and_then(Value::as_str) == Some("empirical");
                if let Some(p) = t.get("path").and_then(Value::as_str).filter(|_| empirical) {
                    paths.push(p.to_string());
                }
                for (k, v) in t {
                    // A labelled sweep axis keeps its values under `values`.
                    let k = if k == "values" && key.ends_with(".path") {
                        key
                    } else {
                        k
                    };
                    walk(v, k, paths);
                }
            }
            Value::Array(items) => {
                for item in items {
                    if let Some(p) = item.as_str().filter(|_| key.ends_with(".path")) {
                        paths.push(p.to_string());
                    }
                    walk(item, key, paths);
                }
            }
            _ => {}
        }
    }
    let mut paths = Vec::new();
    walk(&Value::Table(resolved.clone()), "", &mut paths);
    paths.sort();
    paths.dedup();
    paths
}

/// Hash of every empirical data file the resolved scenario names
/// ([`data_files`]). Paths are relative to `base_dir`.
pub fn data_hash(resolved: &toml::Table, base_dir: &Path) -> Result<String, String> {
    let mut h = Fnv::default();
    for p in &data_files(resolved) {
        let bytes = crate::files::read_input(&base_dir.join(p), crate::limits::MAX_EMPIRICAL_BYTES)
            .map_err(|e| format!("cannot read `{}`: {e}", base_dir.join(p).display()))?;
        h.part(p.as_bytes());
        h.part(&bytes);
    }
    Ok(h.hex())
}

impl Header {
    fn to_text(&self) -> String {
        let mut s = format!(
            "# herdsim-journal {JOURNAL_FORMAT}\n# herdsim {}\n# build {}\n# fingerprint {}\n# shard {}\n# jobs {}\n# data {}\n# columns point policy rep seed {} check\n",
            self.herdsim,
            self.build,
            self.fingerprint,
            self.shard
                .map_or_else(|| "all".to_string(), |s| s.to_string()),
            self.jobs,
            self.data,
            METRICS.join(" "),
        );
        for line in self.scenario.lines() {
            s.push_str("#| ");
            s.push_str(line);
            s.push('\n');
        }
        s
    }
}

/// One journal row: the fields, tab-separated, then the check.
pub fn line(row: &Row) -> String {
    let mut s = format!(
        "{}\t{}\t{}\t{}",
        row.job.point,
        row.job.policy.name(),
        row.job.rep,
        row.job.seed
    );
    for v in &row.result.values {
        s.push('\t');
        s.push_str(&num(*v));
    }
    let mut h = Fnv::default();
    h.write(s.as_bytes());
    s.push('\t');
    s.push_str(&h.hex());
    s.push('\n');
    s
}

fn parse_line(line: &str) -> Option<Row> {
    let (body, check) = line.rsplit_once('\t')?;
    let mut h = Fnv::default();
    h.write(body.as_bytes());
    if h.hex() != check {
        return None;
    }
    let mut fields = body.split('\t');
    let job = Job {
        point: fields.next()?.parse().ok()?,
        policy: fields.next()?.parse().ok()?,
        rep: fields.next()?.parse().ok()?,
        seed: fields.next()?.parse().ok()?,
    };
    let result = super::parse_metrics(fields).ok()?;
    Some(Row { job, result })
}

/// A journal as read back.
#[derive(Debug, Clone)]
pub struct Contents {
    pub header: Header,
    /// Finished replications, first occurrence of each job, file order.
    pub rows: Vec<Row>,
    /// Lines dropped: torn or damaged (bad check), or repeated jobs.
    pub dropped: usize,
}

/// Longest line a journal may have: a row takes well under 4 KiB, a `#| `
/// line is a line of the resolved scenario (a scenario file is at most
/// [`crate::limits::MAX_SCENARIO_BYTES`]).
pub const MAX_LINE_BYTES: u64 = crate::limits::MAX_SCENARIO_BYTES + 64;
/// Most bytes of resolved scenario a journal's `#| ` lines may hold (64
/// MiB: the file's 16 MiB with its sweep axes expanded to lists).
pub const MAX_SCENARIO_TEXT: usize = 64 << 20;

/// Read a journal, a line at a time: what it holds stays bounded (no line
/// longer than [`MAX_LINE_BYTES`], no more rows than its `# jobs` line
/// lists, at most [`MAX_SCENARIO_TEXT`] of scenario), whatever the size of
/// the file. The error says what is wrong with the file (the caller names
/// it).
pub fn read(path: &Path) -> Result<Contents, String> {
    use std::io::{BufRead, Read};
    let file = crate::files::open_input(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut reader = std::io::BufReader::new(file);
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut scenario = String::new();
    let mut rows: Vec<Row> = Vec::new();
    let mut seen: BTreeSet<(usize, PolicyKind, u32)> = BTreeSet::new();
    let mut dropped = 0;
    let mut jobs_line: Option<usize> = None;
    let mut bytes = Vec::new();
    for number in 1usize.. {
        bytes.clear();
        let got = (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut bytes)
            .map_err(|e| format!("cannot read: {e}"))?;
        if got == 0 {
            break;
        }
        if bytes.last() != Some(&b'\n') {
            if got as u64 > MAX_LINE_BYTES {
                return Err(format!(
                    "line {number}: longer than {MAX_LINE_BYTES} bytes, which no journal line \
                     is: not a herdsim journal"
                ));
            }
            dropped += 1; // a torn last line
            break;
        }
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        let line = String::from_utf8_lossy(&bytes);
        if let Some(rest) = line.strip_prefix("#| ") {
            scenario.push_str(rest);
            scenario.push('\n');
        } else if line == "#|" {
            scenario.push('\n');
        } else if let Some(rest) = line.strip_prefix("# ") {
            if let Some((k, v)) = rest.split_once(' ') {
                if k == "jobs" {
                    jobs_line = v.parse().ok();
                }
                fields.push((k.to_string(), v.to_string()));
            }
        } else if let Some(row) = parse_line(&line) {
            let Some(jobs) = jobs_line else {
                return Err(format!(
                    "line {number}: a row before the `# jobs` header line: not a herdsim journal"
                ));
            };
            if !seen.insert((row.job.point, row.job.policy, row.job.rep)) {
                dropped += 1;
            } else if rows.len() >= jobs {
                return Err(format!(
                    "line {number}: more rows than the {jobs} replications of its `# jobs` line"
                ));
            } else {
                rows.push(row);
            }
        } else {
            dropped += 1;
        }
        if scenario.len() > MAX_SCENARIO_TEXT || fields.len() > 1000 {
            return Err(format!(
                "line {number}: more header than a journal holds ({} MiB of scenario, 1000 \
                 `# ` lines at most): not a herdsim journal",
                MAX_SCENARIO_TEXT >> 20
            ));
        }
    }
    let get = |k: &str| -> Result<String, String> {
        fields
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("not a herdsim journal (no `# {k}` header line)"))
    };
    let format = get("herdsim-journal")?;
    if format != JOURNAL_FORMAT.to_string() {
        return Err(format!(
            "journal format {format}; this herdsim reads format {JOURNAL_FORMAT}"
        ));
    }
    let version = get("herdsim")?;
    let shard = match get("shard")?.as_str() {
        "all" => None,
        s => Some(
            s.parse::<Shard>()
                .map_err(|e| format!("bad `# shard` line: {e}"))?,
        ),
    };
    let jobs = get("jobs")?
        .parse()
        .map_err(|_| "bad `# jobs` line".to_string())?;
    Ok(Contents {
        header: Header {
            herdsim: version,
            build: get("build").unwrap_or_else(|_| "unknown".to_string()),
            fingerprint: get("fingerprint")?,
            shard,
            jobs,
            data: get("data")?,
            scenario,
        },
        rows,
        dropped,
    })
}

/// Appends finished rows to a journal, one complete line per `write`.
pub struct Writer {
    file: Mutex<std::fs::File>,
}

impl Writer {
    /// (Re)write the journal at `path` with `header` and the rows already
    /// finished (atomically: the old journal stays whole until the new one
    /// replaces it), then open it for appending.
    pub fn create(path: &Path, header: &Header, rows: &[Row]) -> std::io::Result<Writer> {
        let mut text = header.to_text();
        for r in rows {
            text.push_str(&line(r));
        }
        write_atomic(path, text.as_bytes())?;
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Writer {
            file: Mutex::new(file),
        })
    }

    /// Append one finished replication.
    pub fn record(&self, row: &Row) -> std::io::Result<()> {
        let l = line(row);
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all(l.as_bytes())?;
        f.flush()
    }
}

/// The first key (dotted) where two resolved scenarios differ, with both
/// values as TOML (`absent` where a side has none).
pub fn first_difference(old: &toml::Table, new: &toml::Table) -> Option<(String, String, String)> {
    fn show(v: Option<&Value>) -> String {
        v.map_or_else(|| "absent".to_string(), |v| v.to_string())
    }
    fn go(old: &Value, new: &Value, path: &str) -> Option<(String, String, String)> {
        let join = |k: &str| {
            if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            }
        };
        match (old, new) {
            (Value::Table(a), Value::Table(b)) => {
                for (k, vb) in b {
                    match a.get(k) {
                        Some(va) => {
                            if let Some(d) = go(va, vb, &join(k)) {
                                return Some(d);
                            }
                        }
                        None => return Some((join(k), show(None), show(Some(vb)))),
                    }
                }
                a.iter()
                    .find(|(k, _)| !b.contains_key(*k))
                    .map(|(k, va)| (join(k), show(Some(va)), show(None)))
            }
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
                .iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (va, vb))| go(va, vb, &join(&i.to_string()))),
            _ if old == new => None,
            _ => Some((path.to_string(), show(Some(old)), show(Some(new)))),
        }
    }
    go(&Value::Table(old.clone()), &Value::Table(new.clone()), "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::RunResult;

    fn row(point: usize, rep: u32, x: f64) -> Row {
        let mut values = [0.0; METRICS.len()];
        values[0] = x;
        values[1] = f64::NAN;
        values[2] = 1.0 / 3.0;
        values[3] = 5e-324;
        values[4] = 1e300;
        Row {
            job: Job {
                point,
                policy: PolicyKind::Spec,
                rep,
                seed: 18_446_744_073_709_551_615,
            },
            result: RunResult { values },
        }
    }

    fn header() -> Header {
        Header {
            herdsim: env!("CARGO_PKG_VERSION").into(),
            build: crate::BUILD.into(),
            fingerprint: fingerprint("reps = 2\n", "x"),
            shard: Some(Shard { index: 1, count: 3 }),
            jobs: 4,
            data: "x".into(),
            scenario: "reps = 2\n\n[server]\nttl_ms = 1.5\n".into(),
        }
    }

    #[test]
    fn rows_round_trip_bit_for_bit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(JOURNAL_FILE);
        let w = Writer::create(&path, &header(), &[row(0, 0, 0.1)]).expect("create");
        w.record(&row(3, 1, 0.1 + 0.2)).expect("record");
        drop(w);
        let c = read(&path).expect("read");
        assert_eq!(c.header, header());
        assert_eq!(c.dropped, 0);
        assert_eq!(c.rows.len(), 2);
        let (a, b) = (&c.rows[1], row(3, 1, 0.1 + 0.2));
        assert_eq!(a.job, b.job);
        for (x, y) in a.result.values.iter().zip(&b.result.values) {
            assert!(
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                "{x} vs {y}"
            );
        }
    }

    #[test]
    fn torn_and_damaged_lines_are_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(JOURNAL_FILE);
        let w =
            Writer::create(&path, &header(), &[row(0, 0, 0.5), row(0, 1, 0.5)]).expect("create");
        drop(w);
        let mut text = std::fs::read_to_string(&path).expect("read");
        text = text.replacen("\t0.5\t", "\t0.6\t", 1); // damage the first row
        text.push_str(&line(&row(3, 0, 0.5))[..20]); // a torn last line
        std::fs::write(&path, text).expect("write");
        let c = read(&path).expect("read");
        assert_eq!(c.rows.len(), 1);
        assert_eq!(c.rows[0].job.rep, 1);
        assert_eq!(c.dropped, 2);
    }

    /// What a journal holds stays bounded whatever its size: more rows
    /// than its `# jobs` line lists, or a line longer than any journal
    /// line, are refused (tests/hardening_files.rs: a 4 GiB one).
    #[test]
    fn a_journal_is_read_within_bounds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(JOURNAL_FILE);
        let rows: Vec<Row> = (0..5).map(|r| row(r, 0, 0.5)).collect();
        drop(Writer::create(&path, &header(), &rows).expect("create"));
        let e = read(&path).expect_err("5 rows, 4 jobs");
        assert!(e.contains("more rows than the 4 replications"), "{e}");
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str(&"x".repeat(MAX_LINE_BYTES as usize + 1));
        std::fs::write(&path, text).expect("write");
        let e = read(&path).expect_err("a long line");
        assert!(e.contains("more rows") || e.contains("longer than"), "{e}");
        drop(Writer::create(&path, &header(), &rows[..4]).expect("create"));
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str(&"x".repeat(MAX_LINE_BYTES as usize + 1));
        std::fs::write(&path, text).expect("write");
        let e = read(&path).expect_err("a long line");
        assert!(e.contains("longer than 16777280 bytes"), "{e}");
    }

    #[test]
    fn not_a_journal_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(JOURNAL_FILE);
        std::fs::write(&path, "hello\n").expect("write");
        assert!(read(&path).is_err());
    }

    #[test]
    fn difference_names_the_first_changed_key() {
        let a: toml::Table = toml::from_str("reps = 2\n[server]\nttl_ms = 1\n").expect("toml");
        let b: toml::Table = toml::from_str("reps = 2\n[server]\nttl_ms = 2\n").expect("toml");
        assert_eq!(
            first_difference(&a, &b),
            Some(("server.ttl_ms".into(), "1".into(), "2".into()))
        );
        assert_eq!(first_difference(&a, &a), None);
    }
}
