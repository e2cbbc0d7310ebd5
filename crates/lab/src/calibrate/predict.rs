//! The loop closed: the fitted scenario, read back from its file and
//! simulated, against what the member observed.

use super::fit::Outcome;
use crate::error::Error;
use crate::floor::PolicyKind;
use crate::metrics::RunResult;
use crate::metrics::stats::Summary;
use crate::model::Prepared;
use crate::progress::Observer;
use crate::scenario::Loaded;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;

/// One metric, observed against predicted.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub metric: &'static str,
    pub observed: f64,
    pub observed_ci: (f64, f64),
    /// Questions behind the observed value.
    pub samples: usize,
    /// The simulated replications' mean and 95% CI.
    pub predicted: Summary,
    /// The predicted mean lies in the observed value's interval.
    pub agree: bool,
}

/// The fitted scenario's prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub policy: PolicyKind,
    pub reps: u32,
    pub lines: Vec<Line>,
}

/// Simulate the scenario at `path` (its first policy) for `reps`
/// replications from `seed` on `jobs` threads, and set it beside `o`.
pub fn predict(
    path: &Path,
    o: &Outcome,
    reps: u32,
    seed: u64,
    jobs: usize,
    obs: &dyn Observer,
    stop: &AtomicBool,
) -> Result<Prediction, Error> {
    let loaded = Loaded::from_file(path)?;
    let s = loaded.base()?;
    let policy = s
        .policies
        .first()
        .and_then(|p| PolicyKind::from_str(p).ok())
        .unwrap_or(PolicyKind::Spec);
    let base = path.parent().unwrap_or(Path::new("."));
    let prepared =
        Prepared::new(&s, base).map_err(|e| Error::bad(format!("{}: {e}", path.display())))?;
    let jobs_list = crate::sweep::plan(seed, &[0], &[policy], reps);
    let pool = crate::sweep::pool(jobs).map_err(Error::bad)?;
    let done = |_: &crate::sweep::Row| {
        obs.advance(1);
        Ok(())
    };
    let rows = crate::sweep::execute(&jobs_list, &|_| Some(&prepared), &pool, &done, stop)?;
    let results: Vec<RunResult> = rows.into_iter().map(|r| r.result).collect();
    let w = o.wanted as f64;
    let share = |x: u64| if w > 0.0 { x as f64 / w } else { f64::NAN };
    let lines = vec![
        line(
            "duplicate_rate",
            share(o.duplicated),
            o.dup_ci,
            o.wanted as usize,
            &results,
        ),
        line(
            "unanswered_rate",
            share(o.unanswered),
            o.unans_ci,
            o.wanted as usize,
            &results,
        ),
        line("ttfr_p50_ms", o.p50, o.p50_ci, o.ttfr.len(), &results),
        line("ttfr_p95_ms", o.p95, o.p95_ci, o.ttfr.len(), &results),
    ];
    Ok(Prediction {
        policy,
        reps: results.len() as u32,
        lines,
    })
}

fn line(
    metric: &'static str,
    observed: f64,
    ci: (f64, f64),
    samples: usize,
    rs: &[RunResult],
) -> Line {
    let vals: Vec<f64> = rs
        .iter()
        .filter_map(|r| r.get(metric))
        .filter(|x| !x.is_nan())
        .collect();
    let predicted = Summary::of(&vals);
    let agree = predicted.mean.is_finite() && ci.0 <= predicted.mean && predicted.mean <= ci.1;
    Line {
        metric,
        observed,
        observed_ci: ci,
        samples,
        predicted,
        agree,
    }
}
