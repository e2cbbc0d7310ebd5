//! `summary.csv` (one row per sweep point and policy) and `runs.csv` (one
//! row per replication), byte-for-byte deterministic.

use crate::metrics::METRICS;
use crate::metrics::Row;
use crate::metrics::stats::Summary;

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

/// Format a number the same way on every machine: the shortest decimal
/// that parses back to the same `f64` (Rust's `Display`), so CSV and
/// journal values re-read bit for bit (`-0` is written `0`; NaN `NaN`).
/// `--resume` and `herdsim merge` rely on this: keep it so.
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

/// The header of `summary.csv` for sweep keys `keys`.
pub fn summary_header(keys: &[String]) -> Vec<String> {
    let mut tail = vec!["reps".to_string()];
    for m in METRICS {
        tail.push(format!("{m}_mean"));
        tail.push(format!("{m}_ci95"));
    }
    header(keys, &tail)
}

/// The header of `runs.csv` for sweep keys `keys`.
pub fn runs_header(keys: &[String]) -> Vec<String> {
    let mut tail = vec!["rep".to_string(), "seed".to_string()];
    tail.extend(METRICS.iter().map(|m| m.to_string()));
    header(keys, &tail)
}

/// The summary CSV text.
pub fn summary_csv(
    scenario: &str,
    keys: &[String],
    rows: &[SummaryRow],
) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(summary_header(keys))?;
    for r in rows {
        let mut rec = vec![scenario.to_string(), r.policy.clone()];
        rec.extend(r.params.iter().map(|(_, v)| v.clone()));
        rec.push(r.reps.to_string());
        for s in &r.stats {
            rec.push(num(s.mean));
            // Fewer than two values: the CI is unknown, not zero.
            rec.push(if s.n >= 2 { num(s.ci95) } else { String::new() });
        }
        w.write_record(rec)?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}

/// The per-replication CSV text.
pub fn runs_csv(
    scenario: &str,
    keys: &[String],
    rows: &[Row],
    params: &dyn Fn(usize) -> Vec<(String, String)>,
) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(runs_header(keys))?;
    for r in rows {
        let mut rec = vec![scenario.to_string(), r.job.policy.name().to_string()];
        rec.extend(params(r.job.point).into_iter().map(|(_, v)| v));
        rec.push(r.job.rep.to_string());
        rec.push(r.job.seed.to_string());
        rec.extend(r.result.values.iter().map(|x| num(*x)));
        w.write_record(rec)?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::num;

    #[test]
    fn num_round_trips_bit_for_bit() {
        let mut x: f64 = 0.1;
        let mut cases = vec![
            0.0,
            1.0,
            0.1 + 0.2,
            1.0 / 3.0,
            5e-324,
            f64::MIN_POSITIVE,
            f64::MAX,
            1e21,
            123_456_789.123_456_78,
            f64::INFINITY,
        ];
        for _ in 0..200 {
            x = x * 1.618_033_988_749_895 + 0.000_123;
            cases.push(x);
            cases.push(1.0 / x);
        }
        for c in cases {
            let back: f64 = num(c).parse().expect("parses");
            assert_eq!(back.to_bits(), c.to_bits(), "{c} -> {}", num(c));
        }
        assert!(num(f64::NAN).parse::<f64>().expect("NaN").is_nan());
        assert_eq!(num(-0.0), "0");
    }
}
