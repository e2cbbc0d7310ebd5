//! The readable summary table `herdsim run` prints on stdout, and the one
//! way every printed table and figure shows a metric (from the metric
//! catalogue, `crate::metrics::CATALOGUE`: rates in %, times in s).
//!
//! It fits the terminal (80 columns when stdout is not one): a few metrics
//! (the CSV has them all), swept keys headed by the shortest unambiguous
//! end of their dotted name, numbers to the precision their confidence
//! interval supports, and, should the columns still not fit, the metrics
//! split over several blocks that each repeat the policy and the keys.

use super::csv_out::SummaryRow;
use crate::metrics::METRICS;

/// The width a table is laid out for when stdout is not a terminal.
pub const WIDTH: usize = 80;

/// Gap between columns.
const GAP: usize = 2;

// How a metric is shown to a reader, wherever it is printed or drawn:
// its short label, unit and scale come from the metric catalogue
// (`crate::metrics::CATALOGUE`). Rates are shares of messages or of
// inference time, shown in %; times are stored in ms and shown in s.

/// The metrics of the printed table, in column order: the answers first
/// (duplicates, unanswered, waste, latency), then how they came about,
/// then the inference bill (what an answer cost).
const COLS: [&str; 9] = [
    "duplicate_rate",
    "unanswered_rate",
    "wasted_inference_rate",
    "ttfr_p95_ms",
    "responses_per_msg",
    "starters_per_msg",
    "single_starter_rate",
    "inference_calls_per_msg",
    "inference_s_per_msg",
];

/// The unit a metric is shown in and the factor from its stored value:
/// from the catalogue, else from its name (a `_rate` in %, a `_ms` in s).
pub fn unit(metric: &str) -> (&'static str, f64) {
    if let Some(m) = crate::metrics::metric(metric) {
        (m.unit, m.scale)
    } else if metric.ends_with("_rate") {
        ("%", 100.0)
    } else if metric.ends_with("_ms") {
        ("s", 0.001)
    } else {
        ("", 1.0)
    }
}

/// A metric's column header: its short name and unit (`dup %`, `p95 s`),
/// or its own name and unit when it has no short name.
pub fn header(metric: &str) -> String {
    let (u, _) = unit(metric);
    let name = label(metric).unwrap_or(metric);
    if u.is_empty() {
        name.to_string()
    } else {
        format!("{name} {u}")
    }
}

/// A metric's short label in the catalogue (`dup`), if it has one.
pub fn label(metric: &str) -> Option<&'static str> {
    crate::metrics::metric(metric).and_then(|m| m.label)
}

/// The key under a table: `short: csv_column` for each metric shown with
/// a short name, wrapped to `width`.
pub fn legend(metrics: &[&str], lead: &str, tail: &str, width: usize) -> String {
    let mut parts: Vec<String> = vec![lead.to_string()];
    let named: Vec<String> = metrics
        .iter()
        .filter_map(|m| label(m).map(|l| (l, *m)))
        // A pair stays on one line: no break inside it (see `wrap`).
        .map(|(l, m)| format!("{l}: {m}").replace(' ', "\u{a0}"))
        .collect();
    if !named.is_empty() {
        parts.push(format!("{}.", named.join("; ")));
    }
    if !tail.is_empty() {
        parts.push(tail.to_string());
    }
    wrap(&parts.join(" "), width)
}

/// `text` broken into lines of at most `width` characters at spaces (a
/// word longer than that gets a line of its own), each ending in `\n`; a
/// no-break space joins words that stay together and prints as a space.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&line);
        out.push('\n');
    }
    out.replace('\u{a0}', " ")
}

/// The width tables are laid out for: the terminal's when stdout is one,
/// else [`WIDTH`].
pub fn terminal_width() -> usize {
    terminal_size::terminal_size_of(std::io::stdout())
        .map_or(WIDTH, |(w, _)| usize::from(w.0).max(40))
}

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

/// The range a metric's value can take, as shown (after [`unit`]'s
/// scale): 0 to 100 % for a share (`*_rate`), none for the others.
pub fn bounds(metric: &str) -> Option<(f64, f64)> {
    metric.ends_with("_rate").then_some((0.0, 100.0))
}

/// [`mean_ci`] for a value bounded to `bounds`: when `mean ±ci` would
/// reach past an end (a share near 0 or 100 % over few replications), the
/// interval is printed clipped to the range instead, `75 (11..100)`, to
/// the same precision. Clipping loses no coverage: the true mean lies in
/// the range (docs/metrics.md, "The printed table").
pub fn mean_ci_in(mean: f64, ci: Option<f64>, bounds: Option<(f64, f64)>) -> String {
    let plain = mean_ci(mean, ci);
    let (Some(c), Some((lo, hi))) = (ci, bounds) else {
        return plain;
    };
    if mean.is_nan() || !c.is_finite() || (mean - c >= lo && mean + c <= hi) {
        return plain;
    }
    let d = decimals(mean, ci);
    let m = plain.split(' ').next().unwrap_or_default();
    let end = |x: f64| {
        let t = format!("{x:.d$}");
        if t.trim_start_matches(['-', '0', '.']).is_empty() {
            t.trim_start_matches('-').to_string()
        } else {
            t
        }
    };
    format!(
        "{m} ({}..{})",
        end((mean - c).max(lo)),
        end((mean + c).min(hi))
    )
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

/// Columns of widths `widths` (after an id part `id_width` wide) in
/// blocks of consecutive columns no wider than `max` with their gaps: as
/// few blocks as fit, each with at most as many columns as an even split
/// gives (7 columns in two blocks: 4 and 3, not 6 and 1). A column too
/// wide for any block gets one of its own.
fn pack(widths: &[usize], id_width: usize, max: usize) -> Vec<Vec<usize>> {
    let greedy = |cap: usize| {
        let mut blocks: Vec<Vec<usize>> = vec![Vec::new()];
        let mut used = id_width;
        for (c, w) in widths.iter().enumerate() {
            let w = GAP + w;
            let block = blocks.last_mut().expect("one block at least");
            if !block.is_empty() && (used + w > max || block.len() >= cap) {
                blocks.push(vec![c]);
                used = id_width + w;
            } else {
                block.push(c);
                used += w;
            }
        }
        blocks
    };
    let fewest = greedy(usize::MAX);
    let n = fewest.len();
    (widths.len().div_ceil(n)..=widths.len())
        .map(greedy)
        .find(|b| b.len() == n)
        .unwrap_or(fewest)
}

/// Render rows as aligned text tables for the terminal stdout is (or
/// [`WIDTH`] columns): [`render_width`].
pub fn render(keys: &[String], rows: &[SummaryRow]) -> String {
    render_width(keys, rows, terminal_width())
}

/// Render rows as aligned text tables, mean ± 95% CI half-width, no line
/// wider than `max` (unless one metric beside the keys cannot fit).
pub fn render_width(keys: &[String], rows: &[SummaryRow], max: usize) -> String {
    let mut head: Vec<String> = vec!["policy".into()];
    head.extend(short_keys(keys));
    let ids = head.len();
    for metric in &COLS {
        head.push(header(metric));
    }
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut line = vec![r.policy.clone()];
            line.extend(r.params.iter().map(|(_, v)| v.clone()));
            for metric in &COLS {
                let (_, scale) = unit(metric);
                let s = &r.stats[idx(metric)];
                let ci = (s.n >= 2).then_some(s.ci95 * scale);
                line.push(mean_ci_in(s.mean * scale, ci, bounds(metric)));
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
    // Pack the metric columns into as few blocks as fit, as even as can be.
    let id_width: usize = width[..ids].iter().sum::<usize>() + GAP * (ids - 1);
    let metric_widths: Vec<usize> = width[ids..].to_vec();
    let blocks: Vec<Vec<usize>> = pack(&metric_widths, id_width, max)
        .into_iter()
        .map(|b| b.into_iter().map(|c| c + ids).collect())
        .collect();
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
    let clipped = body
        .iter()
        .any(|l| l[ids..].iter().any(|c| c.ends_with(')')));
    let lead = if clipped {
        format!("{LEAD} {CLIPPED}")
    } else {
        LEAD.to_string()
    };
    out.push_str(&legend(&COLS, &lead, TAIL, max));
    out
}

/// The legend's first and last sentences.
const LEAD: &str =
    "mean ± 95% CI over replications (n/a: nothing measured; ±n/a: one replication).";
/// Said after [`LEAD`] when a cell shows a clipped interval ([`mean_ci_in`]).
pub const CLIPPED: &str = "A % whose CI would pass 0 or 100 shows it clipped: mean (low..high).";
const TAIL: &str = "Every column of summary.csv: docs/metrics.md";

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

    /// A wrapped line keeps every word in order and fits its width (but
    /// for a word longer than the width), wherever a path of any length
    /// from 1 to 120 characters puts the breaks: what a report says does
    /// not depend on the folder its input is in, only where its lines
    /// break does (tests compare whitespace-flattened text).
    #[test]
    fn wrapping_keeps_the_words_for_a_path_of_any_length() {
        for n in 1..=120 {
            let path = format!("/{}", "d".repeat(n - 1));
            let line = format!(
                "herdsim calibrate: {path} (a chat export, channel general); a no-break\u{a0}pair"
            );
            for width in [40, 78, 80] {
                let wrapped = wrap(&line, width);
                let words: Vec<&str> = wrapped.split_whitespace().collect();
                assert_eq!(
                    words,
                    line.replace('\u{a0}', " ")
                        .split_whitespace()
                        .collect::<Vec<_>>(),
                    "path of {n}, width {width}"
                );
                assert!(wrapped.contains("no-break pair"), "{wrapped}");
                for l in wrapped.lines() {
                    assert!(
                        l.chars().count() <= width || !l.contains(' '),
                        "path of {n}, width {width}: {l:?}"
                    );
                }
            }
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
    }

    /// A share's interval never reads past 0 or 100 %: `1 starter %  75
    /// ±64` and `75 ±191` (issue 39) print as clipped ranges; one inside
    /// the range, and an unbounded metric, stay `mean ±ci`.
    #[test]
    fn a_share_ci_is_clipped_to_0_100() {
        let pct = bounds("single_starter_rate");
        assert_eq!(mean_ci_in(75.0, Some(64.0), pct), "75 (11..100)");
        assert_eq!(mean_ci_in(75.0, Some(191.0), pct), "75 (0..100)");
        assert_eq!(mean_ci_in(2.5, Some(4.1), pct), "2.5 (0.0..6.6)");
        assert_eq!(mean_ci_in(50.0, Some(20.0), pct), "50 ±20");
        assert_eq!(mean_ci_in(75.0, None, pct), "75.0 ±n/a");
        assert_eq!(
            mean_ci_in(75.0, Some(191.0), bounds("ttfr_p95_ms")),
            "75 ±191"
        );
        assert_eq!(mean_ci_in(f64::NAN, Some(1.0), pct), "n/a");
        assert_eq!(mean_ci(16.46, Some(0.0004)), "16.5 ±0.0");
        assert_eq!(mean_ci(2.5, None), "2.50 ±n/a");
        assert_eq!(mean_ci(f64::NAN, None), "n/a");
        assert_eq!(mean_ci(-0.0001, Some(0.3)), "0.00 ±0.30");
    }

    /// Issue 47: every metric of summary.csv has one catalogue entry, and
    /// every column a table heads is a catalogue label with its unit.
    #[test]
    fn every_metric_and_every_label_is_in_the_catalogue() {
        use crate::metrics::{CATALOGUE, metric};
        let head = super::super::csv_out::summary_csv("s", &[], &[]).expect("csv");
        let head = String::from_utf8(head).expect("utf8");
        let metrics: Vec<&str> = head
            .trim_end()
            .split(',')
            .filter_map(|c| c.strip_suffix("_mean"))
            .collect();
        assert_eq!(metrics.len(), METRICS.len(), "{head}");
        for m in &metrics {
            assert!(metric(m).is_some(), "{m} has no catalogue entry");
        }
        let names: Vec<&str> = CATALOGUE.iter().map(|m| m.name).collect();
        assert_eq!(names, METRICS, "one entry per metric, in CSV order");
        for m in COLS {
            let c = metric(m).expect("in the catalogue");
            let want = match (c.label, c.unit) {
                (Some(l), "") => l.to_string(),
                (Some(l), u) => format!("{l} {u}"),
                (None, _) => panic!("{m}: a table column needs a catalogue label"),
            };
            assert_eq!(header(m), want);
        }
    }

    #[test]
    fn units_and_headers() {
        assert_eq!(unit("duplicate_rate"), ("%", 100.0));
        assert_eq!(unit("ttfr_p99_ms"), ("s", 0.001));
        assert_eq!(unit("claims"), ("", 1.0));
        assert_eq!(header("duplicate_rate"), "dup %");
        assert_eq!(header("ttfr_p95_ms"), "p95 s");
        assert_eq!(header("ttfr_p99_ms"), "ttfr_p99_ms s");
        assert_eq!(header("responses_per_msg"), "resp/msg");
    }

    #[test]
    fn blocks_are_few_and_even() {
        // 7 columns of 10 after 10 of ids: 6 fit in 80, but 4 + 3 read better.
        let b = pack(&[10; 7], 10, 80);
        assert_eq!(b, vec![vec![0, 1, 2, 3], vec![4, 5, 6]]);
        assert_eq!(pack(&[10; 7], 10, 200), vec![(0..7).collect::<Vec<_>>()]);
        // A column wider than the line gets a block of its own.
        assert_eq!(
            pack(&[10, 100, 10], 10, 50),
            vec![vec![0], vec![1], vec![2]]
        );
    }

    #[test]
    fn text_wraps_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5), "aa bb\ncc\n");
        assert_eq!(wrap("a verylongword b", 4), "a\nverylongword\nb\n");
        assert_eq!(wrap("", 4), "");
        assert_eq!(wrap("a b\u{a0}c", 4), "a\nb c\n");
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
        let t = render_width(&[], &rows, WIDTH);
        assert!(t.contains("±n/a"), "{t}");
        assert!(t.contains("0.061 ±0.010"), "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= WIDTH), "{t}");
        // A wide terminal gets one block.
        let wide = render_width(&[], &rows, 200);
        assert_eq!(wide.matches("agentchat-0.36").count(), 1, "{wide}");
    }

    /// The inference bill is in the printed table, with its legend.
    #[test]
    fn the_bill_is_printed() {
        let rows = vec![row("none", &[("schemes.scheme", "owner")], 1.0, 0.0, 20)];
        let t = render_width(&["schemes.scheme".to_string()], &rows, WIDTH);
        assert!(t.contains("calls/msg") && t.contains("infer s/msg"), "{t}");
        assert!(t.contains("calls/msg: inference_calls_per_msg"), "{t}");
        assert!(t.contains("infer s/msg: inference_s_per_msg"), "{t}");
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
        let t = render_width(&keys, &rows, WIDTH);
        assert!(t.lines().all(|l| l.chars().count() <= WIDTH), "{t}");
        // Every block repeats the ids.
        assert!(t.matches("agentchat-0.36").count() >= 2, "{t}");
    }
}
