//! "Your channel under each scheme" (docs/exports.md, "What if"): the
//! fitted scenario, read back from its file, simulated under claims
//! (`spec`) and without (`none`), under each scheme the simulator has
//! ([`Scheme::ALL`]), with calibrate's `--reps` replications each, so a
//! reader sets the measured channel beside what the same channel would
//! have looked like under each.
//!
//! Deterministic: each (scheme, policy) runs the replications of
//! `--seed` (as the prediction), and the rows are summarised in
//! replication order whatever `--jobs` is.

use crate::agent::Scheme;
use crate::error::Error;
use crate::floor::PolicyKind;
use crate::metrics::stats::Summary;
use crate::model::Prepared;
use crate::progress::Observer;
use crate::scenario::Loaded;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// The file it is written to, beside calibrate's outputs.
pub const FILE: &str = "whatif.csv";

/// The policies each scheme runs under: with claims and without.
pub const POLICIES: [PolicyKind; 2] = [PolicyKind::Spec, PolicyKind::None];

/// Simulations per replication of calibrate's `--reps`: one per scheme and
/// policy (what a progress meter counts).
pub const RUNS_PER_REP: u64 = (Scheme::ALL.len() * POLICIES.len()) as u64;

/// The metrics of a row, as the simulator names them.
pub const METRICS: [&str; 6] = crate::metrics::SCHEME_METRICS;

/// One (scheme, policy): each metric's replications summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub scheme: Scheme,
    pub policy: PolicyKind,
    /// In [`METRICS`] order: mean and 95% CI half-width over the reps.
    pub values: Vec<Summary>,
    /// Why a row has no times (nobody answered), for the reader.
    pub note: Option<String>,
}

/// Simulate the scenario at `path` under each scheme and policy.
pub fn whatif(
    path: &Path,
    reps: u32,
    seed: u64,
    jobs: usize,
    obs: &dyn Observer,
    stop: &AtomicBool,
) -> Result<Vec<Row>, Error> {
    let loaded = Loaded::from_file(path)?;
    let fitted = loaded.base()?;
    let base = path.parent().unwrap_or(Path::new("."));
    let pool = crate::sweep::pool(jobs).map_err(Error::bad)?;
    let mut rows = Vec::new();
    let done = |_: &crate::sweep::Row| {
        obs.advance(1);
        Ok(())
    };
    for scheme in Scheme::ALL {
        let mut s = fitted.clone();
        s.schemes.scheme = scheme;
        let prepared =
            Prepared::new(&s, base).map_err(|e| Error::bad(format!("{}: {e}", path.display())))?;
        let mentioned = s.workload.mention_p > 0.0 || !s.schemes.default_agent.is_empty();
        for policy in POLICIES {
            let plan = crate::sweep::plan(seed, &[0], &[policy], reps);
            let mut out = crate::sweep::execute(&plan, &|_| Some(&prepared), &pool, &done, stop)?;
            out.sort_by_key(|r| r.job.rep);
            let values: Vec<Summary> = METRICS
                .iter()
                .map(|m| {
                    let v: Vec<f64> = out
                        .iter()
                        .filter_map(|r| r.result.get(m))
                        .filter(|x| !x.is_nan())
                        .collect();
                    Summary::of(&v)
                })
                .collect();
            let answered = values[2].n > 0 && values[1].mean < 1.0;
            let note = match (answered, scheme, mentioned) {
                (true, ..) => None,
                (false, Scheme::Mentions, false) => Some(
                    "no question mentions an agent and there is no default agent: \
                     nobody answers under mentions"
                        .to_string(),
                ),
                (false, ..) => Some("nobody answered in the simulation".to_string()),
            };
            rows.push(Row {
                scheme,
                policy,
                values,
                note,
            });
        }
    }
    Ok(rows)
}

/// `whatif.csv`: one line per scheme and policy, each metric's mean and
/// 95% CI half-width over the replications, and the note.
pub fn csv(rows: &[Row]) -> String {
    let num = crate::report::num;
    let mut s = String::from("scheme,policy,reps");
    for m in METRICS {
        let _ = write!(s, ",{m},{m}_ci95");
    }
    s.push_str(",note\n");
    for r in rows {
        let _ = write!(
            s,
            "{},{},{}",
            r.scheme.name(),
            r.policy.name(),
            r.values.first().map_or(0, |v| v.n)
        );
        for v in &r.values {
            if v.n == 0 {
                s.push_str(",,");
            } else {
                let _ = write!(s, ",{},{}", num(v.mean), num(v.ci95));
            }
        }
        let _ = writeln!(s, ",{}", r.note.as_deref().unwrap_or(""));
    }
    s
}

/// The report's section, under "Your channel today".
pub fn text(rows: &[Row], reps: u32) -> String {
    let pct = |v: &Summary| {
        if v.n == 0 {
            "-".to_string()
        } else {
            format!("{:.1}% ± {:.1}", 100.0 * v.mean, 100.0 * v.ci95)
        }
    };
    let ms = |v: &Summary| {
        if v.n == 0 {
            "-".to_string()
        } else {
            format!(
                "{} ± {}",
                crate::calibrate::report::t(v.mean),
                crate::calibrate::report::t(v.ci95)
            )
        }
    };
    let x = |v: &Summary| {
        if v.n == 0 {
            "-".to_string()
        } else {
            format!("{:.2} ± {:.2}", v.mean, v.ci95)
        }
    };
    let mut table = vec![vec![
        "scheme".to_string(),
        "policy".into(),
        "dup".into(),
        "unanswered".into(),
        "TTFR p50".into(),
        "TTFR p95".into(),
        "calls/q".into(),
        "inference s/q".into(),
    ]];
    for r in rows {
        let v = &r.values;
        let (p50, p95) = if r.note.is_some() {
            ("none answered".to_string(), "-".to_string())
        } else {
            (ms(&v[2]), ms(&v[3]))
        };
        table.push(vec![
            r.scheme.name().to_string(),
            r.policy.name().to_string(),
            pct(&v[0]),
            pct(&v[1]),
            p50,
            p95,
            x(&v[4]),
            x(&v[5]),
        ]);
    }
    let mut s = format!(
        "Your channel under each scheme (the fitted scenario, {reps} replications each;\n  \
         mean ± 95% CI half-width; compare with your channel today above):\n"
    );
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = table
                    .iter()
                    .map(|r| r[i].chars().count())
                    .max()
                    .unwrap_or(0);
                format!("{c:<w$}")
            })
            .collect();
        let _ = writeln!(s, "  {}", cells.join("  ").trim_end());
    }
    for r in rows {
        if let Some(n) = &r.note {
            let _ = writeln!(s, "  {} / {}: {n}", r.scheme.name(), r.policy.name());
        }
    }
    s.push('\n');
    s
}
