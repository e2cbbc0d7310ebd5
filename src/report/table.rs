//! The readable summary table `herdsim run` prints on stdout.

use super::csv_out::SummaryRow;
use crate::metrics::METRICS;

fn idx(name: &str) -> usize {
    METRICS.iter().position(|m| *m == name).unwrap_or(0)
}

/// Render rows as an aligned text table, mean ± 95% CI half-width.
pub fn render(keys: &[String], rows: &[SummaryRow]) -> String {
    let cols: [(&str, &str, f64, usize); 8] = [
        ("duplicate", "duplicate_rate", 100.0, 1),
        ("resp/msg", "responses_per_msg", 1.0, 3),
        ("unanswered", "unanswered_rate", 100.0, 1),
        ("wasted inf.", "wasted_inference_rate", 100.0, 1),
        ("ttfr p50 s", "ttfr_p50_ms", 0.001, 2),
        ("ttfr p95 s", "ttfr_p95_ms", 0.001, 2),
        ("claims", "claims", 1.0, 0),
        ("yields", "yields", 1.0, 0),
    ];
    let mut head: Vec<String> = vec!["policy".into()];
    head.extend(keys.iter().cloned());
    for (label, metric, _, _) in &cols {
        let unit = if metric.ends_with("_rate") { " %" } else { "" };
        head.push(format!("{label}{unit}"));
    }
    let mut body: Vec<Vec<String>> = Vec::new();
    for r in rows {
        let mut line = vec![r.policy.clone()];
        line.extend(r.params.iter().map(|(_, v)| v.clone()));
        for (_, metric, scale, prec) in &cols {
            let s = &r.stats[idx(metric)];
            line.push(format!(
                "{:.prec$} ± {:.prec$}",
                s.mean * scale,
                s.ci95 * scale,
                prec = *prec
            ));
        }
        body.push(line);
    }
    let width: Vec<usize> = (0..head.len())
        .map(|c| {
            body.iter()
                .map(|l| l[c].chars().count())
                .chain(std::iter::once(head[c].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let fmt_line = |cells: &[String], out: &mut String| {
        for (c, cell) in cells.iter().enumerate() {
            let pad = width[c] - cell.chars().count();
            if c == 0 {
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str("  ");
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            }
        }
        out.push('\n');
    };
    fmt_line(&head, &mut out);
    let total: usize = width.iter().sum::<usize>() + 2 * (width.len() - 1);
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for l in &body {
        fmt_line(l, &mut out);
    }
    out
}
