//! `summary.csv` (one row per sweep point and policy) and `runs.csv` (one
//! row per replication), byte-for-byte deterministic.

use crate::metrics::METRICS;
use crate::metrics::stats::Summary;
use crate::sweep::Row;

/// A (point, policy) group of replications, summarised.
#[derive(Debug, Clone)]
pub struct SummaryRow {
    pub point: usize,
    pub params: Vec<(String, String)>,
    pub policy: String,
    pub reps: usize,
    /// One summary per metric, in [`METRICS`] order.
    pub stats: Vec<Summary>,
}

/// Group rows (already in plan order) by (point, policy) and summarise.
/// `params(point)` gives a point's parameter values.
pub fn summarise(rows: &[Row], params: &dyn Fn(usize) -> Vec<(String, String)>) -> Vec<SummaryRow> {
    let mut out: Vec<SummaryRow> = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let key = (rows[start].job.point, rows[start].job.policy);
        let end = rows[start..]
            .iter()
            .position(|r| (r.job.point, r.job.policy) != key)
            .map_or(rows.len(), |k| start + k);
        let group = &rows[start..end];
        let stats = (0..METRICS.len())
            .map(|i| {
                let xs: Vec<f64> = group
                    .iter()
                    .map(|r| r.result.values[i])
                    .filter(|x| !x.is_nan())
                    .collect();
                Summary::of(&xs)
            })
            .collect();
        out.push(SummaryRow {
            point: key.0,
            params: params(key.0),
            policy: key.1.name().to_string(),
            reps: group.len(),
            stats,
        });
        start = end;
    }
    out
}

/// Format a number the same way on every machine (shortest round trip).
pub fn num(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x == 0.0 {
        "0".into()
    } else {
        format!("{x}")
    }
}

fn header(keys: &[String], tail: &[String]) -> Vec<String> {
    let mut h = vec!["scenario".to_string(), "policy".to_string()];
    h.extend(keys.iter().cloned());
    h.extend(tail.iter().cloned());
    h
}

/// The summary CSV text.
pub fn summary_csv(scenario: &str, keys: &[String], rows: &[SummaryRow]) -> anyhow::Result<Vec<u8>> {
    let mut tail = vec!["reps".to_string()];
    for m in METRICS {
        tail.push(format!("{m}_mean"));
        tail.push(format!("{m}_ci95"));
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header(keys, &tail))?;
    for r in rows {
        let mut rec = vec![scenario.to_string(), r.policy.clone()];
        rec.extend(r.params.iter().map(|(_, v)| v.clone()));
        rec.push(r.reps.to_string());
        for s in &r.stats {
            rec.push(num(s.mean));
            rec.push(num(s.ci95));
        }
        w.write_record(rec)?;
    }
    Ok(w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?)
}

/// The per-replication CSV text.
pub fn runs_csv(
    scenario: &str,
    keys: &[String],
    rows: &[Row],
    params: &dyn Fn(usize) -> Vec<(String, String)>,
) -> anyhow::Result<Vec<u8>> {
    let mut tail = vec!["rep".to_string(), "seed".to_string()];
    tail.extend(METRICS.iter().map(|m| m.to_string()));
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header(keys, &tail))?;
    for r in rows {
        let mut rec = vec![scenario.to_string(), r.job.policy.name().to_string()];
        rec.extend(params(r.job.point).into_iter().map(|(_, v)| v));
        rec.push(r.job.rep.to_string());
        rec.push(r.job.seed.to_string());
        rec.extend(r.result.values.iter().map(|x| num(*x)));
        w.write_record(rec)?;
    }
    Ok(w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?)
}
