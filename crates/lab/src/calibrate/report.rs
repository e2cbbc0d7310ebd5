//! The readable report of a calibration (stdout and `report.txt`).

use super::fit::{ArrivalModel, Calibration, Written};
use super::out::group_name;
use super::predict::Prediction;
use super::read::Log;
use super::view::View;
use std::fmt::Write as _;
use std::path::Path;

pub(crate) fn t(ms: f64) -> String {
    if !ms.is_finite() {
        return if ms > 0.0 { "inf".into() } else { "-".into() };
    }
    // Times in s, as every table of herdsim's (crates/report/src/report/table.rs).
    if ms.abs() >= 10_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms.abs() >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{:.3} s", ms / 1000.0)
    }
}

/// A predicted metric's name in the report.
pub(super) fn metric_name(metric: &str) -> &str {
    match metric {
        "duplicate_rate" => "duplicates",
        "unanswered_rate" => "unanswered",
        "ttfr_p50_ms" => "TTFR p50",
        "ttfr_p95_ms" => "TTFR p95",
        m => m,
    }
}

/// A metric's value as the report shows it (times in s, shares in %).
pub(super) fn value(metric: &str, x: f64) -> String {
    if metric.ends_with("_ms") {
        t(x)
    } else {
        pct(x)
    }
}

/// A share in %, as every table of herdsim's.
pub(super) fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.1}%", 100.0 * x)
    } else {
        "-".into()
    }
}

fn ci_pct(c: (f64, f64)) -> String {
    format!("(95% CI {}..{})", pct(c.0), pct(c.1))
}

/// Lines longer than the tables' width, wrapped at words; a continuation
/// is indented past the line's own indent and list mark.
fn fit_width(text: &str) -> String {
    let width = crate::report::table::WIDTH;
    let mut out = String::new();
    for line in text.lines() {
        // Tables (columns two spaces apart) are laid out to fit.
        // A command stays on one line, to be copied.
        if line.chars().count() <= width
            || line.trim().contains("  ")
            || line.trim_start().starts_with("herdsim tune ")
        {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let lead = line.len() - line.trim_start().len();
        let mark = 2;
        let first = &line[..lead];
        let rest = " ".repeat(lead + mark);
        let wrapped = crate::report::table::wrap(line.trim_start(), width - lead - mark);
        for (i, l) in wrapped.lines().enumerate() {
            out.push_str(if i == 0 { first } else { &rest });
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

fn p(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "-".into()
    }
}

fn ci_t(c: (f64, f64)) -> String {
    format!("(95% CI {}..{})", t(c.0), t(c.1))
}

fn ci_p(c: (f64, f64)) -> String {
    format!("(95% CI {}..{})", p(c.0), p(c.1))
}

/// Pad a table: each row's cells to their column's width.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|x| x.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, x)| format!("{x:<w$}", w = widths[i]))
            .collect();
        let _ = writeln!(s, "  {}", line.join("  ").trim_end());
    }
    s
}

/// The report. `scenario` is the fitted scenario's path (for the tune
/// command).
pub fn text(
    c: &Calibration,
    log: &Log,
    view: &View,
    pred: Option<&Prediction>,
    scenario: &Path,
) -> String {
    let mut s = String::new();
    let k = &log.skipped;
    let _ = writeln!(
        s,
        "herdsim calibrate: {} ({}, channel {})",
        log.path.display(),
        log.format.name(),
        log.channel
    );
    let read = log.what_was_read();
    let skipped: Vec<String> = [
        (k.replays, "replays"),
        (k.notices, "server notices"),
        (k.yields, "YIELDs"),
        (k.errors, "errors"),
        (k.other_channels, "of other channels"),
        (k.copies, "copies"),
        (k.malformed, "malformed"),
        (
            k.unrelayed,
            "posts the server refused (never relayed: not questions)",
        ),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    let _ = writeln!(s, "  read {read}");
    if !skipped.is_empty() {
        let _ = writeln!(s, "  skipped {}", skipped.join(", "));
    }
    let mentions = view.questions.iter().filter(|q| q.mention).count();
    let open = view.questions.iter().filter(|q| q.open).count();
    let _ = writeln!(
        s,
        "  {} questions ({} open at the end, {} @mentions), {} agents; times from {}",
        view.questions.len(),
        open,
        mentions,
        view.agents.len(),
        log.times()
    );
    let st = &c.settings;
    // The TTL is the server's, in its own (real) time: in scenario time
    // it lasts --speed times longer, as every other duration here.
    let ttl = if st.speed == 1.0 {
        format!("{} (--ttl-ms)", t(st.ttl_ms))
    } else {
        format!(
            "{} in scenario time (the server's --ttl-ms {} x speed {}: the log's durations are \
             all scaled alike)",
            t(st.ttl_ms * st.speed),
            t(st.ttl_ms),
            st.speed
        )
    };
    // Without claims the TTL (a claim's) plays no part.
    let ttl = if c.no_claims {
        String::new()
    } else {
        format!("; server TTL {ttl}")
    };
    let _ = writeln!(
        s,
        "  scenario time = the log's time x {}; link {} one way ({}){}; policy {} ({})",
        st.speed,
        t(c.link_ms * st.speed),
        c.link_source,
        ttl,
        c.policy.name(),
        if c.policy_from_wire {
            match view.announce {
                super::view::Announce::Granted => "read from the wire: FLOOR_CLAIMED grants",
                super::view::Announce::Relayed => {
                    "read from the wire: relayed claims (spec, tombstone and server-time look alike)"
                }
                super::view::Announce::Nothing => "read from the wire: no claims",
            }
        } else {
            "--policy"
        }
    );
    if log.cut_last_line {
        let _ = writeln!(
            s,
            "  the log's last line was cut short (a recording stopped mid-line): skipped"
        );
    }
    if let Some(r) = &log.end_reason {
        let _ = writeln!(s, "  the recording ended: {r}");
    }
    let _ = writeln!(s);
    match &c.arrivals {
        Some(a) => {
            let _ = writeln!(
                s,
                "Arrivals: {} questions, mean gap {} {}, {:.1} per hour; gaps' coefficient of variation {:.2}",
                a.questions,
                t(a.mean_gap),
                ci_t(a.mean_gap_ci),
                a.rate_per_h,
                a.cv
            );
            let verdict = match a.model {
                ArrivalModel::Poisson => {
                    "Poisson (not rejected): arrivals = \"poisson\"".to_string()
                }
                ArrivalModel::Fixed => {
                    "not Poisson; the gaps are regular: arrivals = \"fixed\"".to_string()
                }
                ArrivalModel::Empirical => {
                    "not Poisson: the scenario resamples the measured gaps (gaps.csv)".to_string()
                }
            };
            let _ = writeln!(
                s,
                "  Lilliefors test of exponential gaps: D = {:.3}, p = {:.3} (Monte Carlo): {verdict}",
                a.ks_d, a.ks_p
            );
        }
        None => {
            let _ = writeln!(s, "Arrivals: too few questions (fewer than 3) to fit");
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Agents: grouped while their {} per opportunity (two-proportion test) and {} \
         (two-sample KS) do not differ at the 1% level, Bonferroni-corrected",
        if c.no_claims { "answers" } else { "claims" },
        if c.no_claims {
            "times from question to answer"
        } else {
            "inference times"
        }
    );
    let mut rows = vec![vec![
        "agent".to_string(),
        "group".into(),
        "opps".into(),
        "claims".into(),
        "ans".into(),
        "first".into(),
        "inf".into(),
        "start from".into(),
    ]];
    for (a, st) in c.agents.iter().enumerate() {
        let g = c
            .groups
            .iter()
            .position(|g| g.agents.contains(&a))
            .map_or(String::new(), group_name);
        let clock = view.clocks.get(a).and_then(Option::as_ref);
        rows.push(vec![
            view.names[a].clone(),
            g,
            st.opps.to_string(),
            st.claims.to_string(),
            st.answers.to_string(),
            st.first_claims.to_string(),
            st.inference.len().to_string(),
            match clock {
                Some(k) if k.use_stamp => format!("started_at ({} pieces)", k.pieces.len()),
                Some(k) if !k.steady => "arrival (no clock)".into(),
                Some(_) => "arrival (finer)".into(),
                None => "arrival".into(),
            },
        ]);
    }
    if c.no_claims {
        // No claims: the claim columns (claims, first claims, where a
        // claim's start is read from) say nothing.
        // The inference column too: without a claim's start, an
        // answer's time from its question is all (the group's below).
        for r in &mut rows {
            r.truncate(5);
            r.remove(3);
        }
    }
    s.push_str(&table(&rows));
    if c.no_claims {
        let _ = writeln!(
            s,
            "  opps: questions it was present for; ans: questions it answered (its time from \
             the question to its first answer is in its group's inference below)"
        );
    } else {
        let _ = writeln!(
            s,
            "  opps: questions it was present for; ans: answers; first: questions it \
             claimed first; inf: inference times measured; start from: its started_at stamps (a \
             steady clock, in so many pieces between jumps), or its claims' arrival (no \
             clock: started_at does not keep the server's time; finer: the stamps' ms \
             are coarser than arrival at this --speed)"
        );
    }
    for (i, g) in c.groups.iter().enumerate() {
        let names: Vec<&str> = g.agents.iter().map(|&a| view.names[a].as_str()).collect();
        let _ = writeln!(s);
        let _ = writeln!(s, "{} ({}):", group_name(i), names.join(", "));
        let mut rows = vec![vec![
            "respond_p".to_string(),
            p(g.respond_p),
            ci_p(g.respond_ci),
            format!("{} opportunities", g.wait.opps.len()),
        ]];
        if let Some(f) = &g.wait.fit {
            let how = if f.pinned { "given (--csma-ms)" } else { "" };
            rows.push(vec![
                "csma min".into(),
                t(f.min),
                ci_t(f.min_ci),
                format!("{} claims {how}", f.claims),
            ]);
            rows.push(vec![
                "csma max".into(),
                t(f.max),
                ci_t(f.max_ci),
                String::new(),
            ]);
            rows.push(vec![
                "p / (max - min)".into(),
                format!("{:.3} /s", f.rate),
                format!("(95% CI {:.3}..{:.3})", f.rate_ci.0, f.rate_ci.1),
                "the part the data fix".into(),
            ]);
            rows.push(vec![
                "wait fit".into(),
                match g.wait.written {
                    Written::Empirical { .. } => "empirical".into(),
                    _ => "uniform".into(),
                },
                format!("first-claim KS p = {}", p(g.wait.ks_p)),
                if f.ridge {
                    "weak: see below".into()
                } else {
                    String::new()
                },
            ]);
        } else if matches!(g.wait.written, Written::Fixed { .. }) {
            rows.push(vec![
                "csma".into(),
                "0".into(),
                "not observable".into(),
                String::new(),
            ]);
        }
        let inf = &g.inference;
        if let Some(fit) = inf.fit {
            rows.push(vec![
                "inference p50".into(),
                t(fit.quantile(0.5)),
                ci_t(inf.p50_ci),
                format!(
                    "{} answered{}",
                    inf.observed.len(),
                    if inf.censored.is_empty() {
                        String::new()
                    } else {
                        format!(", {} censored", inf.censored.len())
                    }
                ),
            ]);
            rows.push(vec![
                "inference p99".into(),
                t(fit.quantile(0.99)),
                ci_t(inf.p99_ci),
                String::new(),
            ]);
            rows.push(vec![
                "inference fit".into(),
                match inf.written {
                    Written::Empirical { .. } => "empirical".into(),
                    _ => "lognormal".into(),
                },
                format!("Lilliefors p = {}", p(inf.ks_p)),
                String::new(),
            ]);
        } else {
            rows.push(vec![
                "inference".into(),
                "-".into(),
                if c.no_claims {
                    "fewer than 2 answers".into()
                } else {
                    "fewer than 2 answered claims".into()
                },
                String::new(),
            ]);
        }
        if g.held > 0 {
            rows.push(vec![
                "hangs".into(),
                format!("{} of {}", g.hangs, g.held),
                ci_pct(super::stats::wilson(g.hangs, g.held)),
                "first claims unanswered".into(),
            ]);
        }
        s.push_str(&table(&rows));
    }
    let _ = writeln!(s);
    match &c.skew {
        Some(k) => {
            let _ = writeln!(
                s,
                "Clock skew: sd {} {} from {} offsets (each agent's largest started_at minus arrival)",
                t(k.sd),
                ci_t(k.ci),
                k.n
            );
        }
        None if c.no_claims => {
            let _ = writeln!(
                s,
                "Clock skew: not observable (no claims: no agent's clock is on the wire)"
            );
        }
        None => {
            let _ = writeln!(
                s,
                "Clock skew: not observable (fewer than two agents whose started_at reads as a clock)"
            );
        }
    }
    let o = &c.outcome;
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Observed: {} questions someone {} ({} open at the end and {} nobody wanted are left out)",
        o.wanted,
        if c.no_claims {
            "answered"
        } else {
            "claimed or answered"
        },
        o.open,
        o.ignored
    );
    let share = |x: u64| {
        if o.wanted > 0 {
            x as f64 / o.wanted as f64
        } else {
            f64::NAN
        }
    };
    let mut rows = vec![
        vec![
            "duplicate rate".to_string(),
            pct(share(o.duplicated)),
            ci_pct(o.dup_ci),
            format!("{} of {}", o.duplicated, o.wanted),
        ],
        vec![
            "unanswered rate".to_string(),
            pct(share(o.unanswered)),
            ci_pct(o.unans_ci),
            format!("{} of {}", o.unanswered, o.wanted),
        ],
        vec![
            "TTFR p50".into(),
            t(o.p50),
            ci_t(o.p50_ci),
            format!("{} answered", o.ttfr.len()),
        ],
        vec!["TTFR p95".into(), t(o.p95), ci_t(o.p95_ci), String::new()],
    ];
    s.push_str(&table(&rows));
    rows.clear();
    if let Some(pr) = pred {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Predicted by the fitted scenario ({} replications under {}), against observed:",
            pr.reps,
            pr.policy.name()
        );
        let mut rows = vec![vec![
            "metric".to_string(),
            "observed (95% CI)".into(),
            "predicted (mean ± 95% CI)".into(),
            "within".into(),
        ]];
        for l in &pr.lines {
            let is_time = l.metric.ends_with("_ms");
            let f = |x: f64| if is_time { t(x) } else { pct(x) };
            rows.push(vec![
                metric_name(l.metric).to_string(),
                format!(
                    "{} ({}..{})",
                    f(l.observed),
                    f(l.observed_ci.0),
                    f(l.observed_ci.1)
                ),
                format!("{} ± {}", f(l.predicted.mean), f(l.predicted.ci95)),
                if l.agree { "yes".into() } else { "NO".into() },
            ]);
        }
        s.push_str(&table(&rows));
    }
    if !c.notes.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "What a member cannot see, and what it does to these figures:"
        );
        for n in &c.notes {
            let _ = writeln!(s, "  - {n}");
        }
    }
    let _ = writeln!(s);
    let budget = if o.p95.is_finite() {
        format!(" --max-ttfr-p95-ms {:.0}", o.p95)
    } else {
        String::new()
    };
    // tune's results go beside the calibration (its --out is this folder).
    let folder = scenario.parent().unwrap_or(Path::new("."));
    // An export's channel is tuned across schemes, with and without
    // claims (docs/exports.md, "From an export to a recommendation"); a
    // frame log's under the policy its server runs (docs/observe.md).
    let over = if log.format == super::read::Format::Export {
        "--schemes all".to_string()
    } else {
        format!("--policy {}", c.policy.name())
    };
    let _ = writeln!(
        s,
        "Next: settings to try, at no more latency than observed (tune writes into {}):\n  herdsim tune {} {over}{budget} --out {}",
        folder.display(),
        scenario.display(),
        folder.display()
    );
    fit_width(&s)
}
