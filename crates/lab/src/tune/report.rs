//! What `herdsim tune` writes: `candidates.csv` (every evaluated
//! candidate), the recommendation as paste-able environment lines with the
//! metrics they achieve, and the data of the Pareto figure. Everything here
//! is a pure function of the [`Outcome`]: no clock, no paths that vary.

use super::schemes::{COOLDOWN, SchemesOutcome};
use super::space::{Dim, Role, Space};
use super::stats::{Paired, confidence_below};
use super::{BUDGET_METRIC, Candidate, Outcome, Settings, Source};
use crate::agent::Scheme;
use crate::metrics::METRICS;
use crate::metrics::stats::Summary;
use crate::report::num;
use crate::report::plot::pareto::{Mark, ParetoAxis, ParetoChart, ParetoPoint};
use std::fmt::Write as _;

/// Environment variable of a built-in parameter under `policy`'s rules.
pub fn env_var(role: Role, s: &Settings) -> Option<&'static str> {
    match role {
        Role::CsmaMin => Some("AGENTCHAT_CSMA_MIN_MS"),
        Role::CsmaMax => Some("AGENTCHAT_CSMA_MAX_MS"),
        Role::Ttl => Some(s.policy.rules().ttl_var),
        Role::Extra => None,
    }
}

/// A candidate's value of `dim` as written in the CSV and on stdout.
fn value_text(dim: &Dim, v: f64) -> String {
    let shown = dim.format(v);
    if shown.parse::<f64>().ok() == Some(v) {
        shown
    } else {
        num(v)
    }
}

/// `candidates.csv`: one row per candidate in evaluation order: `scenario`,
/// `policy`, `candidate`, `source` (current, grid, refine), one column per
/// parameter (empty when the current settings cannot be expressed), `reps`,
/// `objective_mean`, `objective_ci95`, `feasible`, `chosen`, then
/// `<metric>_mean` and `<metric>_ci95` for every metric of `summary.csv`.
pub fn candidates_csv(
    scenario: &str,
    space: &Space,
    out: &Outcome,
    s: &Settings,
) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    // Across schemes (`--schemes`), a `scheme` column after `policy`.
    let schemes = out.candidates.iter().any(|c| c.scheme.is_some());
    let mut header: Vec<String> = ["scenario", "policy", "candidate", "source"]
        .iter()
        .map(|x| x.to_string())
        .collect();
    if schemes {
        header.insert(2, "scheme".to_string());
    }
    header.extend(space.dims.iter().map(|d| d.key.clone()));
    for h in [
        "reps",
        "objective_mean",
        "objective_ci95",
        "feasible",
        "chosen",
    ] {
        header.push(h.to_string());
    }
    for m in METRICS {
        header.push(format!("{m}_mean"));
        header.push(format!("{m}_ci95"));
    }
    w.write_record(&header)?;
    for c in &out.candidates {
        let mut rec = vec![
            scenario.to_string(),
            c.policy(s.policy).name().to_string(),
            c.id.to_string(),
            c.source.name().to_string(),
        ];
        if schemes {
            rec.insert(2, c.scheme.map_or("", |x| x.name()).to_string());
        }
        match &c.values {
            Some(v) => rec.extend(space.dims.iter().zip(v).map(|(d, x)| value_text(d, *x))),
            None => rec.extend(space.dims.iter().map(|_| String::new())),
        }
        let obj = c.objective_summary(&s.weights);
        rec.push(c.reps().to_string());
        rec.push(num(obj.mean));
        rec.push(num(obj.ci95));
        rec.push(c.feasible(s.budget_ms).to_string());
        rec.push((out.chosen == Some(c.id)).to_string());
        for m in METRICS {
            let sm = c.summary(m);
            rec.push(num(sm.mean));
            rec.push(num(sm.ci95));
        }
        w.write_record(rec)?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}

/// Decimals that show `ci` to two significant digits (or `mean` to three
/// when there is no spread), at most 6.
fn decimals(mean: f64, ci: f64) -> usize {
    let basis = if ci.is_finite() && ci > 0.0 {
        (ci, 2)
    } else if mean.is_finite() && mean != 0.0 {
        (mean.abs(), 3)
    } else {
        return 0;
    };
    let mag = basis.0.log10().floor() as i32;
    (basis.1 - 1 - mag).clamp(0, 6) as usize
}

/// `mean ± ci` scaled by `scale` with `unit`.
fn pm(sm: (f64, f64), scale: f64, unit: &str) -> String {
    let (m, c) = (sm.0 * scale, sm.1 * scale);
    if m.is_nan() {
        return "n/a".into();
    }
    let d = decimals(m, c);
    format!("{m:.d$} ± {c:.d$}{unit}")
}

/// A signed change, `+x ± ci`.
fn change(p: &Paired, scale: f64, unit: &str) -> String {
    if p.n == 0 || p.mean.is_nan() {
        return "n/a".into();
    }
    let (m, c) = (p.mean * scale, p.ci95 * scale);
    // A difference of exactly nothing reads +0, never -0.
    let m = if m == 0.0 { 0.0 } else { m };
    let d = decimals(m, c);
    let s = format!("{m:+.d$} ± {c:.d$}{unit}");
    s.replace("+-", "-")
}

/// A short description of a candidate's settings: `CSMA 0..9800 ms, TTL
/// 45000 ms, agents.respond_p 0.45`.
pub fn describe(space: &Space, c: &Candidate) -> String {
    // The current settings under the scenario's own policy, when it is not
    // the one searched, say so first.
    let policy = c.own_policy.map(|p| format!("policy {}", p.name()));
    let Some(v) = &c.values else {
        return match policy {
            Some(p) => format!("the scenario as written, {p}"),
            None => "the scenario as written".into(),
        };
    };
    let mut parts: Vec<String> = policy.into_iter().collect();
    parts.extend([
        format!(
            "CSMA {}..{} ms",
            value_text(&space.dims[0], v[0]),
            value_text(&space.dims[1], v[1])
        ),
        format!("TTL {} ms", value_text(&space.dims[2], v[2])),
    ]);
    for (d, x) in space.dims.iter().zip(v).skip(3) {
        parts.push(format!("{} {}", d.key, value_text(d, *x)));
    }
    parts.join(", ")
}

/// `` (they span server.ttl_ms 31000..120000)``: the parameters that vary
/// among the chosen candidate and its ties, with their ranges.
fn tie_ranges(space: &Space, out: &Outcome) -> String {
    let group: Vec<&Vec<f64>> = out
        .chosen
        .iter()
        .chain(&out.ties)
        .filter_map(|&i| out.candidates[i].values.as_ref())
        .collect();
    let mut parts = Vec::new();
    for (d, dim) in space.dims.iter().enumerate() {
        let lo = group.iter().map(|v| v[d]).fold(f64::INFINITY, f64::min);
        let hi = group.iter().map(|v| v[d]).fold(f64::NEG_INFINITY, f64::max);
        if lo < hi {
            parts.push(format!(
                "{} {}..{}",
                dim.key,
                value_text(dim, lo),
                value_text(dim, hi)
            ));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" (together they span {})", parts.join(", "))
    }
}

fn percent(conf: f64) -> String {
    if conf.is_nan() {
        return "n/a".into();
    }
    let p = conf * 100.0;
    if p > 99.9 {
        ">99.9%".into()
    } else if p < 0.1 && p > 0.0 {
        "<0.1%".into()
    } else {
        format!("{p:.1}%")
    }
}

/// Rows of the metrics table: the metric (None: the objective). Each is
/// shown as the metric catalogue says (shares in %, times in s), under
/// its CSV name less a unit the name carries (`ttfr_p95`, in s).
const ROWS: [Option<&str>; 7] = [
    None,
    Some("duplicate_rate"),
    Some("wasted_inference_rate"),
    Some("unanswered_rate"),
    Some("ttfr_p50_ms"),
    Some("ttfr_p95_ms"),
    Some("ttfr_p99_ms"),
];

/// A row's label, scale and unit (after the number) from the metric
/// catalogue.
fn row(metric: Option<&str>) -> (String, f64, String) {
    let Some(name) = metric else {
        return ("objective".into(), 1.0, String::new());
    };
    match crate::metrics::catalogue::metric(name) {
        Some(m) => {
            let unit = match m.unit {
                "" => String::new(),
                "%" => "%".into(),
                u => format!(" {u}"),
            };
            let label = match m.unit {
                "s" => name.strip_suffix("_ms").unwrap_or(name).to_string(),
                _ => name.to_string(),
            };
            (label, m.scale, unit)
        }
        None => (name.to_string(), 1.0, String::new()),
    }
}

fn values(c: &Candidate, metric: Option<&str>, s: &Settings) -> Vec<f64> {
    match metric {
        Some(m) => c.metric(m),
        None => c.objective(&s.weights),
    }
}

fn summary(c: &Candidate, metric: Option<&str>, s: &Settings) -> Summary {
    match metric {
        Some(m) => c.summary(m),
        None => c.objective_summary(&s.weights),
    }
}

/// What the search ranges over, one text per dimension: `key lo..hi
/// (step s)`, or `key = v (fixed)`.
fn ranges(space: &Space) -> Vec<String> {
    space
        .dims
        .iter()
        .map(|d| {
            if d.free() {
                format!(
                    "{} {}..{} (step {})",
                    d.key,
                    d.format(d.lo),
                    d.format(d.hi),
                    num(d.step)
                )
            } else {
                format!("{} = {} (fixed)", d.key, d.format(d.lo))
            }
        })
        .collect()
}

/// The objective's line and the constraint's (`unbudgeted`: what the
/// constraint line says without a budget).
fn objective_lines(t: &mut String, s: &Settings, unbudgeted: &str) {
    let _ = writeln!(t, "# objective (lower is better): {}", s.weights.describe());
    match s.budget_ms {
        Some(b) => {
            let _ = writeln!(t, "# constraint: mean {BUDGET_METRIC} <= {}", num(b));
        }
        None => {
            let _ = writeln!(t, "# constraint: none (no --max-ttfr-p95-ms): {unbudgeted}");
        }
    }
}

/// `, up to N for the closest contenders` when some candidate ran more
/// replications than the first round's, else nothing.
fn more_reps(out: &Outcome, s: &Settings) -> String {
    let most = out
        .candidates
        .iter()
        .map(Candidate::reps)
        .max()
        .unwrap_or(0);
    if most > s.reps as usize {
        format!(", up to {most} for the closest contenders")
    } else {
        String::new()
    }
}

/// Header lines shared by the success and failure texts.
fn preamble(name: &str, space: &Space, out: &Outcome, s: &Settings) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# herdsim tune: scenario `{name}`, policy {}, seed {}",
        s.policy.name(),
        s.seed
    );
    objective_lines(
        &mut t,
        s,
        "latency is not weighed at all, so the search minimises the objective whatever the \
         answers cost in time",
    );
    let _ = writeln!(t, "# searched: {}", ranges(space).join(", "));
    let more = more_reps(out, s);
    let _ = writeln!(
        t,
        "# evaluated: {} candidates (current settings, {} on the grid, {} in refinement), \
         {} replications each on common seeds{more}; {} runs",
        out.candidates.len(),
        out.grid_count,
        out.refine_count,
        s.reps,
        out.runs
    );
    t
}

/// The text `herdsim tune` prints: comment lines (`#`) around the
/// environment lines, so that the whole output can be saved as an env file.
pub fn recommendation(name: &str, space: &Space, out: &Outcome, s: &Settings) -> String {
    let mut t = preamble(name, space, out, s);
    let Some(best) = out.chosen.map(|i| &out.candidates[i]) else {
        no_recommendation(&mut t, space, out);
        return wrap_comments(&t, WIDTH);
    };
    let Some(v) = &best.values else {
        return wrap_comments(&t, WIDTH);
    };
    let current = &out.candidates[out.current];
    let unchanged = best.source == Source::Current;
    recommended_settings(&mut t, ("settings", unchanged), space, v, s, None);
    achievement_table(&mut t, space, best, current, s);
    let _ = writeln!(t, "#");
    // How sure: against the current settings first (the question asked),
    // then the budget, the runner-up and the ties.
    if current.id != best.id {
        against_current_line(&mut t, best, current, s);
    }
    if let Some(b) = s.budget_ms {
        budget_line(&mut t, best, b);
    }
    confidence_line(&mut t, space, out, s);
    ties_line(&mut t, space, out);
    if s.budget_ms.is_none() {
        unbudgeted_lines(&mut t, space, best, current, v, s);
    }
    wrap_comments(&t, WIDTH)
}

/// The widest line `herdsim tune` prints.
pub const WIDTH: usize = 100;

/// Every comment line of `text` wider than `width` broken at spaces into
/// lines of at most `width`, the continuations indented (`#   `).
fn wrap_comments(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let Some(body) = line.strip_prefix("# ") else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        if line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // A number stays with its unit and a mean with its CI.
        let body = body
            .replace(" ms", "\u{a0}ms")
            .replace(" ± ", "\u{a0}±\u{a0}");
        let first = crate::report::table::wrap(&body, width - 2);
        let (head, rest) = first.split_once('\n').unwrap_or((first.as_str(), ""));
        out.push_str("# ");
        out.push_str(head);
        out.push('\n');
        for l in crate::report::table::wrap(&rest.replace('\n', " "), width - 4).lines() {
            out.push_str("#   ");
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// No candidate meets the budget: say so, name the fastest, and say what
/// to change.
fn no_recommendation(t: &mut String, space: &Space, out: &Outcome) {
    let _ = writeln!(t, "#");
    match out.fastest().map(|i| &out.candidates[i]) {
        Some(f) => {
            let _ = writeln!(
                t,
                "# no setting in the searched ranges meets the budget: the fastest \
                 ({}) has mean {BUDGET_METRIC} {} ms",
                describe(space, f),
                pm(
                    (f.summary(BUDGET_METRIC).mean, f.summary(BUDGET_METRIC).ci95),
                    1.0,
                    ""
                )
            );
        }
        None => {
            let _ = writeln!(t, "# no setting in the searched ranges meets the budget");
        }
    }
    let _ = writeln!(
        t,
        "# raise --max-ttfr-p95-ms or widen the ranges (--param KEY=LO..HI)"
    );
}

/// The recommended settings under a `# recommended {what}:` heading
/// (`current`: they are the current ones): one environment line per
/// setting that has a variable, the floor's flags, and a comment per
/// scenario key that has none, but for `skip` (a key the caller prints
/// its own way).
fn recommended_settings(
    t: &mut String,
    (what, current): (&str, bool),
    space: &Space,
    v: &[f64],
    s: &Settings,
    skip: Option<&str>,
) {
    let _ = writeln!(t, "#");
    if current {
        let _ = writeln!(
            t,
            "# recommended {what} (the current ones: nothing searched did better):"
        );
    } else {
        let _ = writeln!(t, "# recommended {what}:");
    }
    for (d, x) in space.dims.iter().zip(v) {
        if let Some(var) = env_var(d.role, s) {
            let _ = writeln!(t, "{var}={}", value_text(d, *x));
        }
    }
    floor_agent_lines(t, space, v);
    for (d, x) in space
        .dims
        .iter()
        .zip(v)
        .filter(|(d, _)| d.role == Role::Extra && Some(d.key.as_str()) != skip)
    {
        let _ = writeln!(
            t,
            "# {} = {} (a scenario key, no environment variable)",
            d.key,
            value_text(d, *x)
        );
    }
}

/// The same settings in the flags of the agent built on `herdsim-floor`
/// (`examples/floor_agent.rs`: its CSMA window and the claim TTL its client
/// believes) and of `herdsim serve` (the server's TTL), as comments: the
/// output stays an env file.
fn floor_agent_lines(t: &mut String, space: &Space, v: &[f64]) {
    let flag = |role: Role| -> Option<(&'static str, String)> {
        let name = match role {
            Role::CsmaMin => "--csma-min-ms",
            Role::CsmaMax => "--csma-max-ms",
            Role::Ttl => "--ttl-ms",
            Role::Extra => return None,
        };
        let (d, x) = space.dims.iter().zip(v).find(|(d, _)| d.role == role)?;
        Some((name, value_text(d, *x)))
    };
    let agent: Vec<String> = [Role::CsmaMin, Role::CsmaMax, Role::Ttl]
        .into_iter()
        .filter_map(flag)
        .map(|(f, x)| format!("{f} {x}"))
        .collect();
    if agent.is_empty() {
        return;
    }
    let _ = writeln!(
        t,
        "# the same for an agent on herdsim-floor (examples/floor_agent.rs) and for herdsim serve:"
    );
    let _ = writeln!(t, "#   floor_agent {}", agent.join(" "));
    if let Some((f, x)) = flag(Role::Ttl) {
        let _ = writeln!(t, "#   herdsim serve {f} {x}");
    }
}

/// The table of what the recommendation achieves, beside the current
/// settings and the paired change when they differ.
fn achievement_table(
    t: &mut String,
    space: &Space,
    best: &Candidate,
    current: &Candidate,
    s: &Settings,
) {
    let n = best.reps();
    let _ = writeln!(t, "#");
    let _ = writeln!(
        t,
        "# what they achieve (mean ± 95% CI over {n} replications), and the current settings \
         ({}) on the same seeds:",
        describe(space, current)
    );
    let show_current = current.id != best.id;
    let _ = writeln!(
        t,
        "#   {:<24}{:<26}{:<26}{}",
        "metric",
        "recommended",
        if show_current { "current" } else { "" },
        if show_current { "change (paired)" } else { "" }
    );
    for metric in ROWS {
        let (label, scale, unit) = row(metric);
        let unit = unit.as_str();
        let b = summary(best, metric, s);
        let mut line = format!("#   {label:<24}{:<26}", pm((b.mean, b.ci95), scale, unit));
        if show_current {
            let c = summary(current, metric, s);
            let p = Paired::of(&values(best, metric, s), &values(current, metric, s));
            let _ = write!(
                line,
                "{:<26}{}",
                pm((c.mean, c.ci95), scale, unit),
                change(&p, scale, unit)
            );
        }
        let _ = writeln!(t, "{}", line.trim_end());
    }
}

/// The candidates tied with the recommendation, if any, and how the tie
/// was broken.
fn ties_line(t: &mut String, space: &Space, out: &Outcome) {
    if !out.ties.is_empty() {
        let _ = writeln!(
            t,
            "# ties: {} other candidate{} scored exactly the same objective on every common \
             replication{}; the objective cannot tell them apart, and the recommendation is \
             the one with the most replications, then the lowest p95, then the one nearest the \
             current settings",
            out.ties.len(),
            if out.ties.len() == 1 { "" } else { "s" },
            tie_ranges(space, out)
        );
    }
}

/// How sure the recommendation is against the runner-up (or that it was
/// the only candidate).
fn confidence_line(t: &mut String, space: &Space, out: &Outcome, s: &Settings) {
    match &out.runner_up {
        Some((r, p)) => {
            let r = &out.candidates[*r];
            let who = format!("the runner-up ({})", describe(space, r));
            if p.resolved() {
                let _ = writeln!(
                    t,
                    "# confidence: better than {who} by {} in the objective (paired, {} \
                     replications; one-sided confidence {})",
                    change(p, 1.0, "").trim_start_matches('-'),
                    p.n,
                    percent(p.conf_lower)
                );
            } else {
                let _ = writeln!(
                    t,
                    "# confidence: too close to call: {who} differs by {} in the objective after \
                     {} replications (one-sided confidence that the recommendation is better: \
                     {}); within this noise either is as good",
                    change(p, 1.0, ""),
                    p.n,
                    percent(p.conf_lower)
                );
            }
        }
        None => {
            let _ = writeln!(
                t,
                "# confidence: the only candidate {}",
                if s.budget_ms.is_some() {
                    "within the budget"
                } else {
                    "evaluated"
                }
            );
        }
    }
}

/// Without a budget: what the unconstrained search bought and what it
/// cost in latency, the settings at a range edge, and the budget that
/// gives no latency away.
fn unbudgeted_lines(
    t: &mut String,
    space: &Space,
    best: &Candidate,
    current: &Candidate,
    v: &[f64],
    s: &Settings,
) {
    // Say plainly what an unconstrained search bought and what it cost.
    let p95 = Paired::of(&best.metric(BUDGET_METRIC), &current.metric(BUDGET_METRIC));
    let obj = Paired::of(&best.objective(&s.weights), &current.objective(&s.weights));
    let edges: Vec<String> = space
        .dims
        .iter()
        .zip(v)
        .filter(|(d, x)| d.free() && (**x <= d.lo || **x >= d.hi))
        .map(|(d, x)| {
            let side = if *x >= d.hi { "upper" } else { "lower" };
            format!(
                "{} at the {side} edge of the searched range ({})",
                d.key,
                value_text(d, *x)
            )
        })
        .collect();
    let _ = writeln!(
        t,
        "# without a budget: it optimised the objective only: {} against the current \
         settings, for a mean {BUDGET_METRIC} {} ms{}",
        change(&obj, 1.0, ""),
        change(&p95, 1.0, ""),
        if edges.is_empty() {
            String::new()
        } else {
            format!("; {}", edges.join(", "))
        }
    );
    let cur = current.summary(BUDGET_METRIC).mean;
    if cur.is_finite() {
        let _ = writeln!(
            t,
            "# to give no latency away, rerun with --max-ttfr-p95-ms {:.0} (what the current \
             settings achieve)",
            cur
        );
    }
}

/// The recommendation's mean p95 against the budget, and the confidence
/// that it is within it.
fn budget_line(t: &mut String, best: &Candidate, b: f64) {
    let xs: Vec<f64> = best
        .metric(BUDGET_METRIC)
        .into_iter()
        .filter(|x| !x.is_nan())
        .collect();
    let sm = best.summary(BUDGET_METRIC);
    let _ = writeln!(
        t,
        "# budget: mean {BUDGET_METRIC} {} ms against {} ms (within it with {} confidence)",
        pm((sm.mean, sm.ci95), 1.0, ""),
        num(b),
        percent(confidence_below(&xs, b))
    );
}

/// The paired change in the objective against the current settings.
fn against_current_line(t: &mut String, best: &Candidate, current: &Candidate, s: &Settings) {
    let p = Paired::of(&best.objective(&s.weights), &current.objective(&s.weights));
    let _ = writeln!(
        t,
        "# against the current settings: objective {} (paired, {} replications; one-sided \
         confidence that the recommendation is better: {})",
        change(&p, 1.0, ""),
        p.n,
        percent(p.conf_lower)
    );
}

/// The data of the Pareto figure: objective, duplicate and wasted rates
/// (and the unanswered rate when it weighs and varies) against p95 TTFR.
pub fn pareto_chart(name: &str, out: &Outcome, s: &Settings) -> ParetoChart {
    let mut panels: Vec<(ParetoAxis, Option<&str>)> = vec![
        (
            ParetoAxis {
                label: "objective".into(),
                percent: false,
            },
            None,
        ),
        (
            ParetoAxis {
                label: "duplicate rate".into(),
                percent: true,
            },
            Some("duplicate_rate"),
        ),
        (
            ParetoAxis {
                label: "wasted inference rate".into(),
                percent: true,
            },
            Some("wasted_inference_rate"),
        ),
    ];
    let unanswered_varies = out
        .candidates
        .iter()
        .any(|c| c.summary("unanswered_rate").mean > 0.0);
    // With no duplicate and nothing unanswered anywhere, the objective is
    // the wasted inference rate times its weight: one panel, not two alike.
    let only_waste = !out.candidates.iter().filter(|c| c.reps() > 0).any(|c| {
        (s.weights.duplicate > 0.0 && c.summary("duplicate_rate").mean != 0.0)
            || (s.weights.unanswered > 0.0 && c.summary("unanswered_rate").mean != 0.0)
    });
    if only_waste {
        panels.remove(0);
        let label = if s.weights.wasted == 1.0 {
            "wasted inference rate (= the objective)".to_string()
        } else {
            format!(
                "wasted inference rate (objective / {})",
                num(s.weights.wasted)
            )
        };
        if let Some(p) = panels
            .iter_mut()
            .find(|p| p.1 == Some("wasted_inference_rate"))
        {
            p.0.label = label;
        }
    }
    if s.weights.unanswered > 0.0 && unanswered_varies {
        panels.push((
            ParetoAxis {
                label: "unanswered rate".into(),
                percent: true,
            },
            Some("unanswered_rate"),
        ));
    }
    // Across schemes, one group per scheme, in evaluation order.
    let mut schemes: Vec<crate::agent::Scheme> = Vec::new();
    for x in out.candidates.iter().filter_map(|c| c.scheme) {
        if !schemes.contains(&x) {
            schemes.push(x);
        }
    }
    let points = out
        .candidates
        .iter()
        .filter(|c| c.reps() > 0)
        .map(|c| {
            let x = c.summary(BUDGET_METRIC);
            ParetoPoint {
                group: c.scheme.and_then(|x| schemes.iter().position(|y| *y == x)),
                x_ms: (x.mean, x.ci95),
                ys: panels
                    .iter()
                    .map(|(_, m)| {
                        let sm = summary(c, *m, s);
                        (sm.mean, sm.ci95)
                    })
                    .collect(),
                feasible: c.feasible(s.budget_ms),
                mark: if out.chosen == Some(c.id) {
                    Mark::Chosen
                } else if c.id == out.current {
                    Mark::Current
                } else {
                    Mark::Candidate
                },
            }
        })
        .collect();
    let budget = s.budget_ms.map_or_else(
        || "no latency budget".to_string(),
        |b| format!("budget: mean p95 <= {} ms", num(b)),
    );
    // The duel gives the best two more replications than the others had:
    // the recommendation's mean is over more, so it need not lie on the
    // front drawn through the others' means.
    let chosen_reps = out
        .chosen
        .and_then(|c| out.candidates.get(c))
        .map(Candidate::reps);
    let chosen_label = chosen_reps.filter(|&n| n > s.reps as usize).map(|n| {
        format!(
            "recommended (95% CI): mean of its {n} replications, the duel's too; most \
             points of {}, so it may sit off their front",
            s.reps
        )
    });
    ParetoChart {
        title: format!("herdsim tune: {name} ({})", s.policy.name()),
        subtitle: format!(
            "objective = {}; {budget}; {} candidates, {} replications each on common seeds",
            s.weights.describe(),
            out.candidates.len(),
            s.reps
        ),
        chosen_label,
        budget_ms: s.budget_ms,
        panels: panels.into_iter().map(|(a, _)| a).collect(),
        points,
        groups: schemes
            .iter()
            .map(|x| format!("scheme {}", x.name()))
            .collect(),
    }
}

/// [`pm`] with a CI that is only floating-point noise (a metric the same
/// in every replication, summed in another order) shown as 0.
fn pmc(sm: (f64, f64), scale: f64, unit: &str) -> String {
    let ci = if sm.1.abs() <= 1e-9 * sm.0.abs() {
        0.0
    } else {
        sm.1
    };
    pm((sm.0, ci), scale, unit)
}

/// `scheme owner, CSMA 0..7800 ms, TTL 45000 ms, schemes.cooldown_ms 0`.
fn describe_in(so: &SchemesOutcome, c: &Candidate) -> String {
    match (c.scheme, so.part(c.id)) {
        (Some(scheme), Some(part)) => {
            format!("scheme {}, {}", scheme.name(), describe(&part.space, c))
        }
        _ => describe(&so.schemes[0].space, c),
    }
}

/// Header lines of a search across schemes.
fn schemes_preamble(name: &str, so: &SchemesOutcome, s: &Settings) -> String {
    let out = &so.merged;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# herdsim tune across schemes: scenario `{name}`, policy {}, seed {}",
        s.policy.name(),
        s.seed
    );
    objective_lines(
        &mut t,
        s,
        "latency is not weighed at all; a candidate that answered nothing is never recommended",
    );
    let asked: Vec<&str> = so
        .schemes
        .iter()
        .filter(|p| p.asked)
        .map(|p| p.scheme.name())
        .collect();
    let own = if so.schemes.iter().any(|p| p.scheme == so.own && p.asked) {
        format!("the scenario's own: {}", so.own.name())
    } else {
        format!(
            "and the scenario's own, {}, for its current settings only",
            so.own.name()
        )
    };
    let _ = writeln!(
        t,
        "# schemes: {} ({own}); searched in each:",
        asked.join(", ")
    );
    for p in &so.schemes {
        let _ = writeln!(
            t,
            "# - {}: {}",
            p.scheme.name(),
            ranges(&p.space).join(", ")
        );
    }
    let more = more_reps(out, s);
    let _ = writeln!(
        t,
        "# evaluated: {} candidates over {} schemes (current settings, {} on the grids, {} in \
         refinement), {} replications each on common seeds{more}; {} runs",
        out.candidates.len(),
        so.schemes.len(),
        out.grid_count,
        out.refine_count,
        s.reps,
        out.runs
    );
    t
}

/// The text `herdsim tune --schemes` prints: the recommended scheme and
/// settings (environment lines, the `[schemes]` table as comments), what
/// they achieve beside the current settings and the runner-up (the best
/// candidate of another scheme), and each scheme's best.
pub fn recommendation_schemes(name: &str, so: &SchemesOutcome, s: &Settings) -> String {
    let out = &so.merged;
    let mut t = schemes_preamble(name, so, s);
    let (Some(best), Some(part)) = (
        out.chosen.map(|i| &out.candidates[i]),
        out.chosen.and_then(|i| so.part(i)),
    ) else {
        no_recommendation_schemes(&mut t, so, s);
        schemes_lines(&mut t, so, s);
        return wrap_comments(&t, WIDTH);
    };
    let Some(v) = &best.values else {
        return wrap_comments(&t, WIDTH);
    };
    let space = &part.space;
    let current = &out.candidates[out.current];
    // The cooldown is printed in the `[schemes]` lines below.
    let unchanged = best.id == current.id;
    recommended_settings(
        &mut t,
        ("scheme and settings", unchanged),
        space,
        v,
        s,
        Some(COOLDOWN),
    );
    let cooldown = space
        .dims
        .iter()
        .zip(v)
        .find(|(d, _)| d.key == COOLDOWN)
        .map_or_else(|| "0".to_string(), |(d, x)| value_text(d, *x));
    let _ = writeln!(
        t,
        "# the scheme, in the scenario (every agent applies it; docs/schemes.md):"
    );
    let _ = writeln!(t, "#   [schemes]");
    let _ = writeln!(t, "#   scheme = \"{}\"", part.scheme.name());
    if part.scheme == Scheme::Mentions && !so.default_agent.is_empty() {
        let _ = writeln!(t, "#   default_agent = \"{}\"", so.default_agent);
    }
    let _ = writeln!(t, "#   cooldown_ms = {cooldown}");
    let runner = out.runner_up.map(|(r, _)| &out.candidates[r]);
    schemes_table(&mut t, so, best, current, runner, s);
    let _ = writeln!(t, "#");
    if current.id != best.id {
        against_current_line(&mut t, best, current, s);
    }
    if let Some(b) = s.budget_ms {
        budget_line(&mut t, best, b);
    }
    match (&out.runner_up, runner) {
        (Some((_, p)), Some(r)) => {
            let _ = writeln!(
                t,
                "# runner-up: {}: objective {} against the recommendation (paired, {} \
                 replications; one-sided confidence that the recommendation is better: {}){}",
                describe_in(so, r),
                change(&p.negate(), 1.0, ""),
                p.n,
                percent(p.conf_lower),
                if p.resolved() {
                    ""
                } else {
                    "; too close to call: within this noise either is as good"
                }
            );
        }
        _ => {
            let _ = writeln!(
                t,
                "# runner-up: none: no other scheme searched has a candidate within the budget \
                 that answered anything"
            );
        }
    }
    schemes_lines(&mut t, so, s);
    ties_line(&mut t, space, out);
    if s.budget_ms.is_none() {
        unbudgeted_lines(&mut t, space, best, current, v, s);
    }
    wrap_comments(&t, WIDTH)
}

/// No scheme has a candidate within the budget.
fn no_recommendation_schemes(t: &mut String, so: &SchemesOutcome, s: &Settings) {
    let out = &so.merged;
    let _ = writeln!(t, "#");
    if s.budget_ms.is_none() {
        // Without a budget only a candidate that answered nothing is out.
        let _ = writeln!(
            t,
            "# no scheme and setting searched answered anything: nothing to recommend; name \
             another scheme (--schemes all)"
        );
        return;
    }
    let fastest = out
        .candidates
        .iter()
        .filter(|c| c.eligible && c.reps() > 0 && c.answered())
        .filter(|c| so.part(c.id).is_some_and(|p| p.asked))
        .min_by(|a, b| {
            let (x, y) = (a.summary(BUDGET_METRIC).mean, b.summary(BUDGET_METRIC).mean);
            x.total_cmp(&y).then(a.id.cmp(&b.id))
        });
    match fastest {
        Some(f) => {
            let sm = f.summary(BUDGET_METRIC);
            let _ = writeln!(
                t,
                "# no scheme and setting in the searched ranges meets the budget: the fastest \
                 ({}) has mean {BUDGET_METRIC} {} ms",
                describe_in(so, f),
                pmc((sm.mean, sm.ci95), 1.0, "")
            );
        }
        None => {
            let _ = writeln!(
                t,
                "# no scheme and setting in the searched ranges meets the budget"
            );
        }
    }
    let _ = writeln!(
        t,
        "# raise --max-ttfr-p95-ms or widen the ranges (--param KEY=LO..HI)"
    );
}

/// One line per scheme: its best within the budget, or why it has none.
fn schemes_lines(t: &mut String, so: &SchemesOutcome, s: &Settings) {
    let out = &so.merged;
    let _ = writeln!(t, "# each scheme's best:");
    for p in &so.schemes {
        let cands = &out.candidates[p.ids.clone()];
        let line = if !p.asked {
            "not searched (the scenario's own scheme, run for the current settings)".to_string()
        } else if !cands.iter().any(|c| c.answered()) {
            let u = cands
                .first()
                .map_or(f64::NAN, |c| c.summary("unanswered_rate").mean);
            format!(
                "answered nothing in any candidate (unanswered {:.0}%): it measured no latency \
                 and is never recommended",
                u * 100.0
            )
        } else {
            match p.chosen.map(|i| &out.candidates[i]) {
                Some(c) => {
                    let (o, p95, u) = (
                        c.objective_summary(&s.weights),
                        c.summary(BUDGET_METRIC),
                        c.summary("unanswered_rate"),
                    );
                    format!(
                        "objective {}, {BUDGET_METRIC} {} ms, unanswered {} ({}){}",
                        pmc((o.mean, o.ci95), 1.0, ""),
                        pmc((p95.mean, p95.ci95), 1.0, ""),
                        pmc((u.mean, u.ci95), 100.0, "%"),
                        describe(&p.space, c),
                        if out.chosen == Some(c.id) {
                            ": recommended"
                        } else if out.runner_up.is_some_and(|(r, _)| r == c.id) {
                            ": runner-up"
                        } else {
                            ""
                        }
                    )
                }
                None => "no setting within the budget".to_string(),
            }
        };
        let _ = writeln!(t, "# - {}: {line}", p.scheme.name());
    }
}

/// What the recommendation achieves beside the current settings and the
/// runner-up, each over its own replications (on common seeds).
fn schemes_table(
    t: &mut String,
    so: &SchemesOutcome,
    best: &Candidate,
    current: &Candidate,
    runner: Option<&Candidate>,
    s: &Settings,
) {
    let _ = writeln!(t, "#");
    let mut cols: Vec<(&str, &Candidate)> = vec![("recommended", best)];
    if current.id != best.id {
        cols.push(("current", current));
    }
    if let Some(r) = runner {
        cols.push(("runner-up", r));
    }
    let who: Vec<String> = cols
        .iter()
        .skip(1)
        .map(|(label, c)| format!("the {label} ({})", describe_in(so, c)))
        .collect();
    let reps: Vec<String> = cols.iter().map(|(_, c)| c.reps().to_string()).collect();
    let _ = writeln!(
        t,
        "# what they achieve (mean ± 95% CI over {} replications{}, on common seeds){}{}:",
        reps.join(", "),
        if cols.len() > 1 { " in turn" } else { "" },
        if who.is_empty() { "" } else { ", beside " },
        who.join(" and ")
    );
    let mut head = format!("#   {:<24}", "metric");
    for (label, _) in &cols {
        let _ = write!(head, "{label:<24}");
    }
    let _ = writeln!(t, "{}", head.trim_end());
    // Across schemes the bill differs (a selector's call, an owner's one
    // inference against a herd's several): what each choice costs.
    for metric in ROWS.into_iter().chain(BILL_ROWS) {
        let (label, scale, unit) = row(metric);
        let mut line = format!("#   {label:<24}");
        for (_, c) in &cols {
            let sm = summary(c, metric, s);
            let _ = write!(line, "{:<24}", pmc((sm.mean, sm.ci95), scale, &unit));
        }
        let _ = writeln!(t, "{}", line.trim_end());
    }
}

/// The inference bill's rows, in the table across schemes only.
const BILL_ROWS: [Option<&str>; 2] = [Some("inference_calls_per_msg"), Some("inference_s_per_msg")];

#[cfg(test)]
mod tests {
    use super::*;

    /// Tune's tables show each metric as the catalogue says: every row
    /// is in it, shares in %, times in s (as every other table), never ms.
    #[test]
    fn every_row_is_shown_as_the_catalogue_says() {
        for metric in ROWS.into_iter().chain(BILL_ROWS).flatten() {
            let m = crate::metrics::catalogue::metric(metric)
                .unwrap_or_else(|| panic!("{metric} is not in the catalogue"));
            let (label, scale, unit) = row(Some(metric));
            assert_eq!(scale, m.scale, "{metric}");
            assert!(!label.ends_with("_ms"), "{label}");
            match m.unit {
                "%" => assert_eq!(unit, "%"),
                "s" => assert_eq!(unit, " s"),
                _ => assert_eq!(unit, ""),
            }
        }
        assert_eq!(
            row(Some("ttfr_p95_ms")),
            ("ttfr_p95".into(), 0.001, " s".into())
        );
        assert_eq!(row(None), ("objective".into(), 1.0, String::new()));
    }

    #[test]
    fn long_comments_wrap_within_the_width() {
        let text = "# one two three four five six\nKEY=1\n#   short\n";
        let w = wrap_comments(text, 14);
        assert_eq!(
            w,
            "# one two\n#   three four\n#   five six\nKEY=1\n#   short\n"
        );
        assert!(w.lines().all(|l| l.chars().count() <= 14), "{w}");
    }

    #[test]
    fn numbers_show_the_digits_the_ci_supports() {
        assert_eq!(pm((0.000_412_3, 0.000_031), 1.0, ""), "0.000412 ± 0.000031");
        assert_eq!(pm((16_424.14, 300.72), 1.0, ""), "16424 ± 301");
        assert_eq!(pm((0.0, 0.0), 100.0, "%"), "0 ± 0%");
        assert_eq!(pm((0.25, 0.0), 100.0, "%"), "25.0 ± 0.0%");
        assert_eq!(pm((f64::NAN, 0.0), 1.0, ""), "n/a");
        let p = Paired {
            n: 3,
            mean: -0.5,
            ci95: 0.25,
            conf_lower: 0.99,
        };
        assert_eq!(change(&p, 1.0, ""), "-0.50 ± 0.25");
        assert_eq!(percent(0.9996), ">99.9%");
        assert_eq!(percent(0.5), "50.0%");
    }
}
