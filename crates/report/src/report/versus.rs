//! Live versus simulated as the reports show it: the side-by-side table
//! `herdsim live --compare` prints, compare.csv and compare.png. The lines
//! (one per metric, with its test) are computed by `live::compare`; this is
//! the whole of what live uses of the reports' tables and figures.

use super::num;
pub use super::plot::versus::{Line, Test};
pub use super::plot::versus_figure as figure;
use crate::metrics::stats::Summary;

fn ci(s: &Summary) -> String {
    if s.n >= 2 { num(s.ci95) } else { String::new() }
}

/// compare.csv.
pub fn csv(scenario: &str, policy: &str, lines: &[Line]) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "scenario",
        "policy",
        "metric",
        "live_mean",
        "live_ci95",
        "live_reps",
        "sim_mean",
        "sim_ci95",
        "sim_reps",
        "test",
        "statistic",
        "p_value",
        "tolerance",
        "agree",
    ])?;
    for l in lines {
        w.write_record([
            scenario.to_string(),
            policy.to_string(),
            l.metric.to_string(),
            num(l.live.mean),
            ci(&l.live),
            l.live.n.to_string(),
            num(l.sim.mean),
            ci(&l.sim),
            l.sim.n.to_string(),
            match l.test {
                Test::Proportion => "two-proportion-z".into(),
                Test::Welch => "welch-t".into(),
            },
            num(l.stat),
            num(l.p),
            num(l.tolerance),
            l.agree.to_string(),
        ])?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}

/// The side-by-side table printed on stdout, each metric in the unit the
/// run table shows it in (rates in %, times in s), fitted to the terminal.
pub fn table(lines: &[Line]) -> String {
    table_width(lines, super::table::terminal_width())
}

/// [`table`] for a line width of `max`.
pub fn table_width(lines: &[Line], max: usize) -> String {
    use super::table::{bounds, header, legend, mean_ci_in, unit};
    let ci_of = |s: &Summary, scale: f64| (s.n >= 2).then_some(s.ci95 * scale);
    let mut rows = vec![[
        "metric".to_string(),
        "live".to_string(),
        "simulated".to_string(),
        "test".to_string(),
        "p".to_string(),
        "agree".to_string(),
    ]];
    for l in lines {
        let (_, scale) = unit(l.metric);
        rows.push([
            header(l.metric),
            mean_ci_in(l.live.mean * scale, ci_of(&l.live, scale), bounds(l.metric)),
            mean_ci_in(l.sim.mean * scale, ci_of(&l.sim, scale), bounds(l.metric)),
            match l.test {
                Test::Proportion => "z".into(),
                Test::Welch => "welch".into(),
            },
            if l.p.is_nan() {
                "n/a".into()
            } else {
                format!("{:.3}", l.p)
            },
            if l.agree { "yes" } else { "NO" }.into(),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * 5));
            out.push('\n');
        }
    }
    let metrics: Vec<&str> = lines.iter().map(|l| l.metric).collect();
    let clipped = rows
        .iter()
        .skip(1)
        .any(|r| r[1].ends_with(')') || r[2].ends_with(')'));
    let mut lead = "mean ± 95% CI over replications.".to_string();
    if clipped {
        lead = format!("{lead} {}", super::table::CLIPPED);
    }
    out.push_str(&legend(
        &metrics,
        &lead,
        "test: z = two-proportion z on pooled messages, welch = Welch t on replications; \
         agree: p >= 0.01 or |live - sim| within the metric's tolerance (compare.csv; \
         docs/live.md)",
        max,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_the_run_tables_units_and_fits() {
        let sum = |mean: f64, ci95: f64| Summary { mean, ci95, n: 3 };
        let line = |metric: &'static str, mean: f64, ci: f64| Line {
            metric,
            live: sum(mean, ci),
            sim: sum(mean, ci),
            test: Test::Welch,
            stat: 0.0,
            p: 1.0,
            tolerance: 0.0,
            agree: true,
        };
        let t = table_width(
            &[
                line("duplicate_rate", 0.751, 0.05),
                line("ttfr_p95_ms", 11742.0, 2925.0),
            ],
            80,
        );
        assert!(t.contains("dup %") && t.contains("75.1 ±5.0"), "{t}");
        assert!(t.contains("p95 s") && t.contains("11.7 ±2.9"), "{t}");
        assert!(t.contains("dup: duplicate_rate"), "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= 80), "{t}");
    }
}
