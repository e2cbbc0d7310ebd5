//! What calibrate writes: the fitted scenario (with the empirical CSVs
//! beside it), the estimates with their intervals, the questions and the
//! agents as the member saw them.

use super::fit::{ArrivalModel, Calibration, Written};
use super::read::Log;
use super::view::View;
use crate::floor::PolicyKind;
use std::fmt::Write as _;

/// A duration for a scenario file: ms, rounded to 0.1 ms, within the
/// scenario's bounds.
pub fn ms(x: f64) -> String {
    let x = if x.is_finite() {
        x.clamp(0.0, crate::limits::MAX_DURATION_MS)
    } else {
        0.0
    };
    let r = (x * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// A probability for a scenario file.
pub fn prob(p: f64) -> String {
    let p = if p.is_finite() {
        p.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let s = format!("{p:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() {
        "0".into()
    } else {
        s.to_string()
    }
}

/// An interval for a comment: `95% CI 1.2..3.4`.
fn ci(lo: f64, hi: f64, f: fn(f64) -> String) -> String {
    let end = |x: f64| {
        if x.is_finite() {
            f(x)
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    };
    format!("95% CI {}..{}", end(lo), end(hi))
}

/// A CSV file of values (ms), one per line under a header.
pub fn values_csv(column: &str, values: &[f64]) -> String {
    let mut s = format!("{column}\n");
    for v in values {
        let _ = writeln!(s, "{}", ms(*v));
    }
    s
}

/// A group's name in files: `group-0`.
pub fn group_name(i: usize) -> String {
    format!("group-{i}")
}

/// A distribution key's value for the scenario, and the CSV file it needs.
fn dist(w: &Written, file: &str, column: &str) -> (String, Option<(String, String)>) {
    match w {
        Written::Uniform { min, max } => (
            format!(
                "{{ kind = \"uniform\", min_ms = {}, max_ms = {} }}",
                ms(*min),
                ms(max.max(*min))
            ),
            None,
        ),
        Written::Lognormal { p50, p99 } => {
            let p50 = p50.max(0.1);
            (
                format!(
                    "{{ kind = \"lognormal\", p50_ms = {}, p99_ms = {} }}",
                    ms(p50),
                    ms(p99.max(p50))
                ),
                None,
            )
        }
        Written::Fixed { ms: x } => (format!("{{ kind = \"fixed\", ms = {} }}", ms(*x)), None),
        Written::Empirical { values } => (
            format!("{{ kind = \"empirical\", path = \"{file}\" }}"),
            Some((file.to_string(), values_csv(column, values))),
        ),
    }
}

/// The fitted scenario's TOML and the data files it names (file, text).
pub fn scenario(
    c: &Calibration,
    log: &Log,
    view: &View,
    name: &str,
) -> (String, Vec<(String, String)>) {
    let speed = c.settings.speed;
    let mut files = Vec::new();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Fitted by `herdsim calibrate` from {} ({}, channel {}, {} questions).",
        log.path.display(),
        log.format.name(),
        log.channel,
        view.questions.len()
    );
    let _ = writeln!(
        t,
        "# Every value is an estimate: its 95% interval and the samples behind it are in\n\
         # estimates.csv and report.txt beside this file. Durations are scenario ms\n\
         # (the log's times x {speed})."
    );
    let _ = writeln!(t, "name = \"{name}\"");
    let _ = writeln!(
        t,
        "description = \"Fitted from what a member of {} saw ({} questions)\"",
        log.channel,
        view.questions.len()
    );
    let _ = writeln!(t, "seed = {}", c.settings.seed);
    let _ = writeln!(t, "reps = 20");
    let _ = writeln!(t, "policies = [\"{}\"]", c.policy.name());
    let _ = writeln!(t);
    let _ = writeln!(t, "[server]");
    let _ = writeln!(
        t,
        "ttl_ms = {}    # the server's TTL (--ttl-ms{}), not estimated",
        ms(c.settings.ttl_ms * speed),
        if speed != 1.0 { " x --speed" } else { "" }
    );
    if c.policy == PolicyKind::Agentchat036 {
        let _ = writeln!(
            t,
            "rate_limit_ms = {}    # agentchat's one MSG per second per connection, in scenario time",
            ms(1000.0 * speed)
        );
        let _ = writeln!(
            t,
            "sweep_every_ms = {}    # its 5 s expiry sweep, in scenario time",
            ms(5000.0 * speed)
        );
    }
    let _ = writeln!(t);
    let _ = writeln!(t, "[network]");
    let _ = writeln!(
        t,
        "base_ms = {}    # one-way delay: {}",
        ms(c.link_ms * speed),
        c.link_source
    );
    if c.jitter_ms > 0.0 {
        let _ = writeln!(
            t,
            "jitter = {{ kind = \"exponential\", mean_ms = {} }}    # from the spread of the round trips",
            ms(c.jitter_ms * speed)
        );
    } else {
        let _ = writeln!(t, "jitter = {{ kind = \"fixed\", ms = 0 }}");
    }
    for (i, g) in c.groups.iter().enumerate() {
        let gname = group_name(i);
        let names: Vec<&str> = g.agents.iter().map(|&a| view.names[a].as_str()).collect();
        let _ = writeln!(t);
        let _ = writeln!(t, "[[agents]]    # {}", names.join(", "));
        let _ = writeln!(t, "name = \"{gname}\"");
        let _ = writeln!(t, "count = {}", g.agents.len());
        if valid_channel(&log.channel) && log.channel != "#general" {
            let _ = writeln!(t, "channels = [\"{}\"]", log.channel);
        }
        let opps: usize = g.wait.opps.len();
        let _ = writeln!(
            t,
            "respond_p = {}    # {}, {} opportunities",
            prob(g.respond_p),
            ci(g.respond_ci.0, g.respond_ci.1, prob),
            opps
        );
        let (csma, file) = dist(&g.wait.written, &format!("{gname}-csma.csv"), "wait_ms");
        files.extend(file);
        let csma_note = match (&g.wait.fit, &g.wait.written) {
            (_, Written::Empirical { values }) => format!(
                "the {} waits members saw (the uniform fit was rejected); shorter than the true \
                 waits (the late ones are hidden)",
                values.len()
            ),
            (Some(f), _) if f.pinned => "given (--csma-ms)".to_string(),
            (Some(f), _) => format!(
                "min {}, max {}, {} claims",
                ci(f.min_ci.0, f.min_ci.1, ms),
                ci(f.max_ci.0, f.max_ci.1, ms),
                f.claims
            ),
            (None, _) => "no claims: not observable".to_string(),
        };
        let _ = writeln!(t, "csma = {csma}    # {csma_note}");
        let (inf, file) = dist(
            &g.inference.written,
            &format!("{gname}-inference.csv"),
            "inference_ms",
        );
        files.extend(file);
        let inf_note = match &g.inference.written {
            Written::Empirical { values } => {
                format!(
                    "the {} measured times (the lognormal fit was rejected)",
                    values.len()
                )
            }
            _ => format!(
                "p50 {}, p99 {}, {} answered claims{}",
                ci(g.inference.p50_ci.0, g.inference.p50_ci.1, ms),
                ci(g.inference.p99_ci.0, g.inference.p99_ci.1, ms),
                g.inference.observed.len(),
                if g.inference.censored.is_empty() {
                    String::new()
                } else {
                    format!(", {} censored", g.inference.censored.len())
                }
            ),
        };
        let _ = writeln!(t, "inference = {inf}    # {inf_note}");
        match &c.skew {
            Some(s) => {
                let _ = writeln!(
                    t,
                    "clock_skew = {{ kind = \"normal\", mean_ms = 0, sd_ms = {} }}    # {}, {} offsets",
                    ms(s.sd),
                    ci(s.ci.0, s.ci.1, ms),
                    s.n
                );
            }
            None => {
                let _ = writeln!(
                    t,
                    "clock_skew = {{ kind = \"fixed\", ms = 0 }}    # not observable from this log"
                );
            }
        }
        if g.hangs > 0 {
            let (lo, hi) = super::stats::wilson(g.hangs, g.held);
            let _ = writeln!(
                t,
                "hang_p = {}    # claims never answered: {} of {}, {}",
                prob(g.hangs as f64 / g.held as f64),
                g.hangs,
                g.held,
                ci(lo, hi, prob)
            );
        }
    }
    let _ = writeln!(t);
    let _ = writeln!(t, "[workload]");
    let count = c
        .arrivals
        .as_ref()
        .map_or(view.questions.len(), |a| a.questions);
    match &c.arrivals {
        Some(a) => {
            let note = format!(
                "{} gaps, {}; Lilliefors p = {:.3}",
                a.gaps.len(),
                ci(a.mean_gap_ci.0, a.mean_gap_ci.1, ms),
                a.ks_p
            );
            match a.model {
                ArrivalModel::Poisson => {
                    let _ = writeln!(t, "arrivals = \"poisson\"");
                    let _ = writeln!(t, "mean_gap_ms = {}    # {note}", ms(a.mean_gap));
                }
                ArrivalModel::Fixed => {
                    let _ = writeln!(
                        t,
                        "arrivals = \"fixed\"    # the gaps vary by {:.1}% of their mean",
                        100.0 * a.cv
                    );
                    let _ = writeln!(t, "mean_gap_ms = {}    # {note}", ms(a.mean_gap));
                }
                ArrivalModel::Empirical => {
                    // The mean of the file's values as they are written.
                    let rounded: Vec<f64> = a
                        .gaps
                        .iter()
                        .map(|g| ms(*g).parse().unwrap_or(*g))
                        .collect();
                    let mean = rounded.iter().sum::<f64>() / rounded.len().max(1) as f64;
                    let _ = writeln!(
                        t,
                        "gap = {{ kind = \"empirical\", path = \"gaps.csv\" }}    # not Poisson: the measured gaps"
                    );
                    let _ = writeln!(t, "mean_gap_ms = {}    # their mean; {note}", ms(mean));
                    files.push(("gaps.csv".into(), values_csv("gap_ms", &a.gaps)));
                }
            }
        }
        None => {
            let _ = writeln!(
                t,
                "# too few questions to fit their arrivals: the default kept"
            );
        }
    }
    let _ = writeln!(t, "count = {}", count.max(1));
    if valid_channel(&log.channel) {
        let _ = writeln!(t, "channel = \"{}\"", log.channel);
    }
    if c.mention_p > 0.0 {
        let _ = writeln!(
            t,
            "mention_p = {}    # {}",
            prob(c.mention_p),
            ci(c.mention_ci.0, c.mention_ci.1, prob)
        );
    }
    (t, files)
}

/// A channel name the scenario accepts (`#` then letters, digits, `-`, `_`).
fn valid_channel(c: &str) -> bool {
    c.len() > 1
        && c.len() <= 32
        && c.starts_with('#')
        && c[1..]
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
}

/// `estimates.csv`: one row per estimate, with its interval and samples.
pub fn estimates_csv(c: &Calibration) -> String {
    let mut rows: Vec<[String; 8]> = Vec::new();
    let f = |x: f64| {
        if x.is_finite() {
            crate::report::num((x * 1e4).round() / 1e4)
        } else if x.is_nan() {
            "NaN".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    };
    let mut row = |g: &str, p: &str, v: f64, ci: (f64, f64), n: usize, method: &str| {
        rows.push([
            g.to_string(),
            p.to_string(),
            f(v),
            f(ci.0),
            f(ci.1),
            n.to_string(),
            method.to_string(),
            String::new(),
        ]);
    };
    if let Some(a) = &c.arrivals {
        let m = match a.model {
            ArrivalModel::Poisson => "mean of exponential gaps, chi-square interval",
            _ => "mean of the gaps, t interval",
        };
        row(
            "workload",
            "mean_gap_ms",
            a.mean_gap,
            a.mean_gap_ci,
            a.gaps.len(),
            m,
        );
        row(
            "workload",
            "questions_per_hour",
            a.rate_per_h,
            a.rate_ci,
            a.gaps.len(),
            m,
        );
        row(
            "workload",
            "gaps_cv",
            a.cv,
            (f64::NAN, f64::NAN),
            a.gaps.len(),
            "sd / mean",
        );
        row(
            "workload",
            "poisson_lilliefors_p",
            a.ks_p,
            (f64::NAN, f64::NAN),
            a.gaps.len(),
            "Lilliefors (Monte Carlo) on the gaps",
        );
    }
    row(
        "workload",
        "mention_p",
        c.mention_p,
        c.mention_ci,
        c.arrivals.as_ref().map_or(0, |a| a.questions),
        "share, Wilson interval",
    );
    for (i, g) in c.groups.iter().enumerate() {
        let gn = group_name(i);
        row(
            &gn,
            "respond_p",
            g.respond_p,
            g.respond_ci,
            g.wait.opps.len(),
            "profile likelihood",
        );
        if let Some(w) = &g.wait.fit {
            let m = if w.pinned {
                "given (--csma-ms)"
            } else {
                "profile likelihood (drop ln 40)"
            };
            row(&gn, "csma.min_ms", w.min, w.min_ci, w.claims, m);
            row(&gn, "csma.max_ms", w.max, w.max_ci, w.claims, m);
            row(
                &gn,
                "respond_p_per_s_of_window",
                w.rate,
                w.rate_ci,
                w.claims,
                "p / (max - min), along the profile of p",
            );
            row(
                &gn,
                "csma_first_claim_ks_p",
                g.wait.ks_p,
                (f64::NAN, f64::NAN),
                c.first_claims.waits.len(),
                "KS of the first claims under the fitted windows (all groups)",
            );
        }
        let inf = &g.inference;
        if let Some(fit) = inf.fit {
            let n = inf.observed.len() + inf.censored.len();
            row(
                &gn,
                "inference.p50_ms",
                fit.quantile(0.5),
                inf.p50_ci,
                n,
                "lognormal ML, bootstrap",
            );
            row(
                &gn,
                "inference.p99_ms",
                fit.quantile(0.99),
                inf.p99_ci,
                n,
                "lognormal ML, bootstrap",
            );
            row(
                &gn,
                "inference_lilliefors_p",
                inf.ks_p,
                (f64::NAN, f64::NAN),
                inf.observed.len(),
                "Lilliefors on the logs",
            );
        }
        if g.held > 0 {
            row(
                &gn,
                "hang_p",
                g.hangs as f64 / g.held as f64,
                super::stats::wilson(g.hangs, g.held),
                g.held as usize,
                "claims never answered, Wilson interval",
            );
        }
    }
    if let Some(s) = &c.skew {
        row(
            "agents",
            "clock_skew.sd_ms",
            s.sd,
            s.ci,
            s.n,
            "sd of the agents' offsets, chi-square",
        );
    }
    let o = &c.outcome;
    let w = o.wanted as usize;
    row(
        "observed",
        "duplicate_rate",
        o.duplicated as f64 / o.wanted.max(1) as f64,
        o.dup_ci,
        w,
        "Wilson",
    );
    row(
        "observed",
        "unanswered_rate",
        o.unanswered as f64 / o.wanted.max(1) as f64,
        o.unans_ci,
        w,
        "Wilson",
    );
    row(
        "observed",
        "ttfr_p50_ms",
        o.p50,
        o.p50_ci,
        o.ttfr.len(),
        "order statistics",
    );
    row(
        "observed",
        "ttfr_p95_ms",
        o.p95,
        o.p95_ci,
        o.ttfr.len(),
        "order statistics",
    );
    let mut s = String::from("group,parameter,estimate,ci_low,ci_high,samples,method,note\n");
    for r in rows {
        let cells: Vec<String> = r.iter().map(|x| csv_cell(x)).collect();
        let _ = writeln!(s, "{}", cells.join(","));
    }
    s
}

fn csv_cell(x: &str) -> String {
    if x.contains([',', '"', '\n']) {
        format!("\"{}\"", x.replace('"', "\"\""))
    } else {
        x.to_string()
    }
}

/// `questions.csv`: each question as the member saw it.
pub fn questions_csv(view: &View, speed: f64) -> String {
    let t0 = view.questions.first().map_or(0.0, |q| q.t);
    let mut s = String::from("question,t_ms,claims,answers,ttfr_ms,mention,open\n");
    for q in &view.questions {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{}",
            csv_cell(&q.id),
            ms((q.t - t0) * speed),
            q.claims.len(),
            q.answers.len(),
            q.ttfr().map_or(String::new(), |t| ms(t * speed)),
            q.mention,
            q.open
        );
    }
    s
}

/// `agents.csv`: each agent's counts and how its starts were read.
pub fn agents_csv(c: &Calibration, view: &View) -> String {
    let mut s = String::from(
        "agent,id,group,opportunities,claims,answers,first_claims,inference_samples,clock_pieces,clock_spread_ms,start_from\n",
    );
    for (a, st) in c.agents.iter().enumerate() {
        let group = c
            .groups
            .iter()
            .position(|g| g.agents.contains(&a))
            .map_or(String::new(), group_name);
        let clock = view.clocks.get(a).and_then(Option::as_ref);
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{}",
            csv_cell(&view.names[a]),
            csv_cell(&view.agents[a]),
            group,
            st.opps,
            st.claims,
            st.answers,
            st.first_claims,
            st.inference.len(),
            clock.map_or(0, |k| k.pieces.len()),
            clock.map_or(String::new(), |k| ms(k.spread)),
            match clock {
                Some(k) if k.use_stamp => "started_at",
                _ => "arrival",
            }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_for_a_scenario() {
        assert_eq!(ms(1234.56), "1234.6");
        assert_eq!(ms(2000.0), "2000");
        assert_eq!(ms(-3.0), "0");
        assert_eq!(ms(f64::NAN), "0");
        assert_eq!(prob(0.61234), "0.6123");
        assert_eq!(prob(1.0), "1");
        assert_eq!(prob(0.0), "0");
        assert_eq!(ci(1.0, f64::INFINITY, ms), "95% CI 1..inf");
        assert!(valid_channel("#general") && !valid_channel("general") && !valid_channel("#a b"));
    }
}
