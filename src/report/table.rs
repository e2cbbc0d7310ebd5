//! The readable summary table `herdsim run` prints on stdout.
//!
//! It fits [`WIDTH`] columns: a few metrics (the CSV has them all), swept
//! keys headed by the shortest unambiguous end of their dotted name, numbers
//! to the precision their confidence interval supports, and, should the
//! columns still not fit, the metrics split over several blocks that each
//! repeat the policy and the keys.

use super::csv_out::SummaryRow;
use crate::metrics::METRICS;

/// The widest line the table prints.
pub const WIDTH: usize = 100;

/// Gap between columns.
const GAP: usize = 2;

/// (header, metric, scale): the metrics shown, in order.
const COLS: [(&str, &str, f64); 7] = [
    ("resp/msg", "responses_per_msg", 1.0),
    ("dup %", "duplicate_rate", 100.0),
    ("unans %", "unanswered_rate", 100.0),
    ("waste %", "wasted_inference_rate", 100.0),
    ("starters", "starters_per_msg", 1.0),
    ("1 starter %", "single_starter_rate", 100.0),
    ("p95 s", "ttfr_p95_ms", 0.001),
];

/// The line printed under the table.
pub const LEGEND: &str = "\
mean ± 95% CI over replications (n/a: one replication). resp/msg: responses_per_msg; dup:
duplicate_rate; unans: unanswered_rate; waste: wasted_inference_rate; starters: starters_per_msg;
1 starter: single_starter_rate; p95: ttfr_p95_ms. Every column of summary.csv: docs/metrics.md";

fn idx(name: &str) -> usize {
    METRICS.iter().position(|m| *m == name).unwrap_or(0)
}

/// Decimals that show `ci` to two significant digits, or `mean` to three
/// when there is no spread (or it is unknown); never more than three
/// significant digits of the mean, at most 6.
pub fn decimals(mean: f64, ci: Option<f64>) -> usize {
    let digits = |x: f64, sig: i32| -> i32 { sig - 1 - x.abs().log10().floor() as i32 };
    let mean_ok = mean.is_finite() && mean != 0.0;
    let d = match ci {
        Some(c) if c.is_finite() && c > 0.0 => {
            let d = digits(c, 2);
            if mean_ok { d.min(digits(mean, 3)) } else { d }
        }
        _ if mean_ok => digits(mean, 3),
        _ => 0,
    };
    d.clamp(0, 6) as usize
}

/// `mean ±ci`, the CI `n/a` when unknown (`ci` None), `n/a` alone when
/// there is no value at all.
pub fn mean_ci(mean: f64, ci: Option<f64>) -> String {
    if mean.is_nan() {
        return "n/a".into();
    }
    let d = decimals(mean, ci);
    let m = format!("{mean:.d$}");
    // `-0.00` reads as a sign error; a rounded zero is 0.
    let m = if m.trim_start_matches(['-', '0', '.']).is_empty() {
        m.trim_start_matches('-').to_string()
    } else {
        m
    };
    match ci {
        Some(c) => format!("{m} ±{c:.d$}"),
        None => format!("{m} ±n/a"),
    }
}

/// Column headers for the swept keys: the shortest end of each dotted name
/// (whole segments) that no other key ends with.
pub fn short_keys(keys: &[String]) -> Vec<String> {
    keys.iter()
        .map(|k| {
            let segs: Vec<&str> = k.split('.').collect();
            for n in 1..=segs.len() {
                let tail = segs[segs.len() - n..].join(".");
                let clash = keys
                    .iter()
                    .any(|o| o != k && (o == &tail || o.ends_with(&format!(".{tail}"))));
                if !clash {
                    return tail;
                }
            }
            k.clone()
        })
        .collect()
}

/// Render rows as aligned text tables, mean ± 95% CI half-width, no line
/// wider than [`WIDTH`] (unless one metric beside the keys cannot fit).
pub fn render(keys: &[String], rows: &[SummaryRow]) -> String {
    let mut head: Vec<String> = vec!["policy".into()];
    head.extend(short_keys(keys));
    let ids = head.len();
    for (label, _, _) in &COLS {
        head.push((*label).into());
    }
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut line = vec![r.policy.clone()];
            line.extend(r.params.iter().map(|(_, v)| v.clone()));
            for (_, metric, scale) in &COLS {
                let s = &r.stats[idx(metric)];
                let ci = (s.n >= 2).then_some(s.ci95 * scale);
                line.push(mean_ci(s.mean * scale, ci));
            }
            line
        })
        .collect();
    let width: Vec<usize> = (0..head.len())
        .map(|c| {
            body.iter()
                .map(|l| l[c].chars().count())
                .chain(std::iter::once(head[c].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Pack the metric columns into blocks that fit.
    let id_width: usize = width[..ids].iter().sum::<usize>() + GAP * (ids - 1);
    let mut blocks: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = id_width;
    for (c, cw) in width.iter().enumerate().skip(ids) {
        let w = GAP + cw;
        let block = blocks.last_mut().expect("one block at least");
        if !block.is_empty() && used + w > WIDTH {
            blocks.push(vec![c]);
            used = id_width + w;
        } else {
            block.push(c);
            used += w;
        }
    }
    let mut out = String::new();
    for (b, block) in blocks.iter().enumerate() {
        if b > 0 {
            out.push('\n');
        }
        let cols: Vec<usize> = (0..ids).chain(block.iter().copied()).collect();
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (k, &c) in cols.iter().enumerate() {
                let pad = width[c] - cells[c].chars().count();
                if k == 0 {
                    s.push_str(&cells[c]);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str(&" ".repeat(GAP + pad));
                    s.push_str(&cells[c]);
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&head, &mut out);
        let total: usize = cols.iter().map(|&c| width[c]).sum::<usize>() + GAP * (cols.len() - 1);
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for l in &body {
            line(l, &mut out);
        }
    }
    out.push_str(LEGEND);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::stats::Summary;

    fn row(policy: &str, params: &[(&str, &str)], mean: f64, ci: f64, n: usize) -> SummaryRow {
        SummaryRow {
            point: 0,
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            policy: policy.into(),
            reps: n,
            stats: vec![Summary { mean, ci95: ci, n }; METRICS.len()],
        }
    }

    #[test]
    fn significant_digits() {
        // spec's waste: 0.06% must not read 0.0.
        assert_eq!(mean_ci(0.0612, Some(0.0081)), "0.0612 ±0.0081");
        assert_eq!(mean_ci(79.4, Some(9.03)), "79.4 ±9.0");
        assert_eq!(mean_ci(85.4, Some(10.9)), "85 ±11");
        assert_eq!(mean_ci(1.0, Some(0.0)), "1.00 ±0.00");
        assert_eq!(mean_ci(0.0, Some(0.0)), "0 ±0");
        assert_eq!(mean_ci(16.46, Some(0.0004)), "16.5 ±0.0");
        assert_eq!(mean_ci(2.5, None), "2.50 ±n/a");
        assert_eq!(mean_ci(f64::NAN, None), "n/a");
        assert_eq!(mean_ci(-0.0001, Some(0.3)), "0.00 ±0.30");
    }

    #[test]
    fn short_key_names() {
        let k = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            short_keys(&k(&["server.ttl_ms", "agents.csma_tick_ms"])),
            k(&["ttl_ms", "csma_tick_ms"])
        );
        assert_eq!(
            short_keys(&k(&["agents.0.count", "agents.1.count"])),
            k(&["0.count", "1.count"])
        );
        assert_eq!(short_keys(&k(&["a.x", "x"])), k(&["a.x", "x"]));
    }

    #[test]
    fn one_replication_shows_na_and_lines_fit() {
        let rows = vec![
            row("agentchat-0.36", &[], 0.5, 0.0, 1),
            row("spec", &[], 0.000612, 0.0001, 20),
        ];
        let t = render(&[], &rows);
        assert!(t.contains("±n/a"), "{t}");
        assert!(t.contains("0.061 ±0.010"), "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= WIDTH), "{t}");
    }

    #[test]
    fn wide_keys_wrap_into_blocks() {
        let keys: Vec<String> = vec![
            "agents.0.inference.p99_ms".into(),
            "network.jitter.mean_ms".into(),
            "workload.reply_to_agent_p".into(),
        ];
        let p = [
            ("agents.0.inference.p99_ms", "123456.5"),
            ("network.jitter.mean_ms", "1000.25"),
            ("workload.reply_to_agent_p", "0.3333"),
        ];
        let rows = vec![row("agentchat-0.36", &p, 12.3456, 1.234, 10)];
        let t = render(&keys, &rows);
        assert!(t.lines().all(|l| l.chars().count() <= WIDTH), "{t}");
        // Every block repeats the ids.
        assert!(t.matches("agentchat-0.36").count() >= 2, "{t}");
    }
}
