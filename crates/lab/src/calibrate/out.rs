//! What calibrate writes: the fitted scenario (with the empirical CSVs
//! beside it), the estimates with their intervals, the questions and the
//! agents as the member saw them.

use super::fit::{ArrivalModel, Calibration, Written};
use super::read::Log;
use super::view::View;
use crate::floor::PolicyKind;
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

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
    csv_text(&[column], values.iter().map(|v| [ms(*v)]))
}

/// CSV text: `header`, then `rows`, written by the csv crate (which quotes
/// a cell holding a comma, a quote or a line break).
fn csv_text<R, C>(header: &[&str], rows: impl IntoIterator<Item = R>) -> String
where
    R: IntoIterator<Item = C>,
    C: AsRef<[u8]>,
{
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing into memory cannot fail.
    let _ = w.write_record(header);
    for r in rows {
        let _ = w.write_record(r);
    }
    w.into_inner()
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default()
}

/// Text from the input (a display name, a channel, a path) for a comment
/// in the scenario: as it is when every character may stand in a TOML
/// comment, else as a TOML basic string with its escapes (`"a\nb"`), so
/// that nothing a log or an export holds can end the comment and add a
/// key (a name with a line break and `hang_p = 0.9` after it).
pub fn comment_text(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A group's name in files: `group-0`.
pub fn group_name(i: usize) -> String {
    format!("group-{i}")
}

/// A number as [`ms`] or [`prob`] writes it, as a TOML value: an integer
/// when it has no decimals (`2000`), else a float (`1234.6`).
fn num(s: String) -> Value {
    match s.parse::<i64>() {
        Ok(i) => Value::from(i),
        Err(_) => Value::from(s.parse::<f64>().unwrap_or(0.0)),
    }
}

/// An inline table (`{ kind = "uniform", min_ms = 1, max_ms = 2 }`).
fn inline(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Value {
    let mut t = InlineTable::new();
    for (k, v) in pairs {
        t.insert(k, v);
    }
    Value::InlineTable(t)
}

/// `key = value` in `t`, with `    # note` after it unless `note` is empty.
fn put(t: &mut Table, key: &str, v: impl Into<Value>, note: &str) {
    let mut v = v.into();
    if !note.is_empty() {
        v.decor_mut().set_suffix(format!("    # {note}"));
    }
    t.insert(key, Item::Value(v));
}

/// A table under a blank line.
fn section() -> Table {
    let mut t = Table::new();
    t.decor_mut().set_prefix("\n");
    t
}

/// A distribution key's value for the scenario, and the CSV file it needs.
fn dist(w: &Written, file: &str, column: &str) -> (Value, Option<(String, String)>) {
    match w {
        Written::Uniform { min, max } => (
            inline([
                ("kind", "uniform".into()),
                ("min_ms", num(ms(*min))),
                ("max_ms", num(ms(max.max(*min)))),
            ]),
            None,
        ),
        Written::Lognormal { p50, p99 } => {
            let p50 = p50.max(0.1);
            (
                inline([
                    ("kind", "lognormal".into()),
                    ("p50_ms", num(ms(p50))),
                    ("p99_ms", num(ms(p99.max(p50)))),
                ]),
                None,
            )
        }
        Written::Fixed { ms: x } => (
            inline([("kind", "fixed".into()), ("ms", num(ms(*x)))]),
            None,
        ),
        Written::Empirical { values } => (
            inline([("kind", "empirical".into()), ("path", file.into())]),
            Some((file.to_string(), values_csv(column, values))),
        ),
    }
}

/// The fitted scenario's TOML and the data files it names (file, text):
/// the header comment, then the document toml_edit writes, each estimate
/// with its interval and samples in a comment after it.
pub fn scenario(
    c: &Calibration,
    log: &Log,
    view: &View,
    name: &str,
) -> (String, Vec<(String, String)>) {
    let speed = c.settings.speed;
    let mut files = Vec::new();
    let header = format!(
        "# Fitted by `herdsim calibrate` from {} ({}, channel {}, {} questions).\n\
         # Every value is an estimate: its 95% interval and the samples behind it are in\n\
         # estimates.csv and report.txt beside this file. Durations are scenario ms\n\
         # (the log's times x {speed}).\n",
        comment_text(&log.path.display().to_string()),
        log.format.name(),
        comment_text(&log.channel),
        view.questions.len()
    );
    let mut doc = DocumentMut::new();
    let root = doc.as_table_mut();
    put(root, "name", name, "");
    let description = format!(
        "Fitted from what a member of {} saw ({} questions)",
        log.channel,
        view.questions.len()
    );
    put(root, "description", description, "");
    put(root, "seed", c.settings.seed as i64, "");
    put(root, "reps", 20, "");
    put(root, "policies", Array::from_iter([c.policy.name()]), "");
    let mut server = section();
    let ttl_note = format!(
        "the server's TTL (--ttl-ms{}), not estimated",
        if speed != 1.0 { " x --speed" } else { "" }
    );
    // Without claims on the wire there is no TTL to speak of: the
    // scenario's default stays (for tune's schemes with claims).
    if !c.no_claims {
        put(
            &mut server,
            "ttl_ms",
            num(ms(c.settings.ttl_ms * speed)),
            &ttl_note,
        );
    }
    if c.policy == PolicyKind::Agentchat036 {
        put(
            &mut server,
            "rate_limit_ms",
            num(ms(1000.0 * speed)),
            "agentchat's one MSG per second per connection, in scenario time",
        );
        put(
            &mut server,
            "sweep_every_ms",
            num(ms(5000.0 * speed)),
            "its 5 s expiry sweep, in scenario time",
        );
    }
    if !server.is_empty() {
        root.insert("server", Item::Table(server));
    }
    let mut network = section();
    let base_note = format!("one-way delay: {}", c.link_source);
    put(
        &mut network,
        "base_ms",
        num(ms(c.link_ms * speed)),
        &base_note,
    );
    if c.jitter_ms > 0.0 {
        let jitter = inline([
            ("kind", "exponential".into()),
            ("mean_ms", num(ms(c.jitter_ms * speed))),
        ]);
        put(
            &mut network,
            "jitter",
            jitter,
            "from the spread of the round trips",
        );
    } else {
        let jitter = inline([("kind", "fixed".into()), ("ms", 0.into())]);
        put(&mut network, "jitter", jitter, "");
    }
    root.insert("network", Item::Table(network));
    let mut agents = ArrayOfTables::new();
    for (i, g) in c.groups.iter().enumerate() {
        let gname = group_name(i);
        let names: Vec<String> = g
            .agents
            .iter()
            .map(|&a| comment_text(&view.names[a]))
            .collect();
        let mut t = section();
        t.decor_mut()
            .set_suffix(format!("    # {}", names.join(", ")));
        put(&mut t, "name", gname.as_str(), "");
        put(&mut t, "count", g.agents.len() as i64, "");
        if valid_channel(&log.channel) && log.channel != "#general" {
            put(
                &mut t,
                "channels",
                Array::from_iter([log.channel.as_str()]),
                "",
            );
        }
        let opps: usize = g.wait.opps.len();
        let respond_note = format!(
            "{}, {} opportunities",
            ci(g.respond_ci.0, g.respond_ci.1, prob),
            opps
        );
        put(&mut t, "respond_p", num(prob(g.respond_p)), &respond_note);
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
            (None, _) if c.no_claims => "no claims: not observable (all in inference)".to_string(),
            (None, _) => "no claims: not observable".to_string(),
        };
        put(&mut t, "csma", csma, &csma_note);
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
                "p50 {}, p99 {}, {} {}{}",
                ci(g.inference.p50_ci.0, g.inference.p50_ci.1, ms),
                ci(g.inference.p99_ci.0, g.inference.p99_ci.1, ms),
                g.inference.observed.len(),
                if c.no_claims {
                    "answers (question to answer)"
                } else {
                    "answered claims"
                },
                if g.inference.censored.is_empty() {
                    String::new()
                } else {
                    format!(", {} censored", g.inference.censored.len())
                }
            ),
        };
        put(&mut t, "inference", inf, &inf_note);
        match &c.skew {
            Some(s) => {
                let skew = inline([
                    ("kind", "normal".into()),
                    ("mean_ms", 0.into()),
                    ("sd_ms", num(ms(s.sd))),
                ]);
                let note = format!("{}, {} offsets", ci(s.ci.0, s.ci.1, ms), s.n);
                put(&mut t, "clock_skew", skew, &note);
            }
            None => {
                let skew = inline([("kind", "fixed".into()), ("ms", 0.into())]);
                put(&mut t, "clock_skew", skew, "not observable from this log");
            }
        }
        if g.hangs > 0 {
            let (lo, hi) = super::stats::wilson(g.hangs, g.held);
            let note = format!(
                "claims never answered: {} of {}, {}",
                g.hangs,
                g.held,
                ci(lo, hi, prob)
            );
            put(
                &mut t,
                "hang_p",
                num(prob(g.hangs as f64 / g.held as f64)),
                &note,
            );
        }
        agents.push(t);
    }
    if !agents.is_empty() {
        root.insert("agents", Item::ArrayOfTables(agents));
    }
    let mut w = section();
    let count = c
        .arrivals
        .as_ref()
        .map_or(view.questions.len(), |a| a.questions);
    if let Some(a) = &c.arrivals {
        let note = format!(
            "{} gaps, {}; Lilliefors p = {}",
            a.gaps.len(),
            ci(a.mean_gap_ci.0, a.mean_gap_ci.1, ms),
            if a.ks_p.is_finite() {
                format!("{:.3}", a.ks_p)
            } else {
                "-".into()
            }
        );
        match a.model {
            ArrivalModel::Poisson => {
                put(&mut w, "arrivals", "poisson", "");
                put(&mut w, "mean_gap_ms", num(ms(a.mean_gap)), &note);
            }
            ArrivalModel::Fixed => {
                let vary = format!("the gaps vary by {:.1}% of their mean", 100.0 * a.cv);
                put(&mut w, "arrivals", "fixed", &vary);
                put(&mut w, "mean_gap_ms", num(ms(a.mean_gap)), &note);
            }
            ArrivalModel::Empirical => {
                // The mean of the file's values as they are written.
                let rounded: Vec<f64> = a
                    .gaps
                    .iter()
                    .map(|g| ms(*g).parse().unwrap_or(*g))
                    .collect();
                let mean = rounded.iter().sum::<f64>() / rounded.len().max(1) as f64;
                let gap = inline([("kind", "empirical".into()), ("path", "gaps.csv".into())]);
                put(&mut w, "gap", gap, "not Poisson: the measured gaps");
                let their = format!("their mean; {note}");
                put(&mut w, "mean_gap_ms", num(ms(mean)), &their);
                files.push(("gaps.csv".into(), values_csv("gap_ms", &a.gaps)));
            }
        }
    }
    put(&mut w, "count", count.max(1) as i64, "");
    if c.arrivals.is_none()
        && let Some(mut k) = w.key_mut("count")
    {
        k.leaf_decor_mut()
            .set_prefix("# too few questions to fit their arrivals: the default kept\n");
    }
    if valid_channel(&log.channel) {
        put(&mut w, "channel", log.channel.as_str(), "");
    }
    if c.mention_p > 0.0 {
        let note = ci(c.mention_ci.0, c.mention_ci.1, prob);
        put(&mut w, "mention_p", num(prob(c.mention_p)), &note);
    }
    root.insert("workload", Item::Table(w));
    (format!("{header}{doc}"), files)
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
            _ => "mean of the gaps, t interval of its log",
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
                "lognormal ML, delta method",
            );
            row(
                &gn,
                "inference.p99_ms",
                fit.quantile(0.99),
                inf.p99_ci,
                n,
                "lognormal ML, delta method",
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
    csv_text(
        &[
            "group",
            "parameter",
            "estimate",
            "ci_low",
            "ci_high",
            "samples",
            "method",
            "note",
        ],
        rows,
    )
}

/// `questions.csv`: each question as the member saw it.
pub fn questions_csv(view: &View, speed: f64) -> String {
    let t0 = view.questions.first().map_or(0.0, |q| q.t);
    csv_text(
        &[
            "question",
            "t_ms",
            "claims",
            "answers",
            "answer_messages",
            "ttfr_ms",
            "mention",
            "open",
        ],
        view.questions.iter().map(|q| {
            [
                q.id.clone(),
                ms((q.t - t0) * speed),
                q.claims.len().to_string(),
                q.answerers().to_string(),
                q.answers.len().to_string(),
                q.ttfr().map_or(String::new(), |t| ms(t * speed)),
                q.mention.to_string(),
                q.open.to_string(),
            ]
        }),
    )
}

/// `agents.csv`: each agent's counts and how its starts were read.
pub fn agents_csv(c: &Calibration, view: &View) -> String {
    let rows = c.agents.iter().enumerate().map(|(a, st)| {
        let group = c
            .groups
            .iter()
            .position(|g| g.agents.contains(&a))
            .map_or(String::new(), group_name);
        let clock = view.clocks.get(a).and_then(Option::as_ref);
        [
            view.names[a].clone(),
            view.agents[a].clone(),
            group,
            st.opps.to_string(),
            st.claims.to_string(),
            st.answers.to_string(),
            st.first_claims.to_string(),
            st.inference.len().to_string(),
            clock.map_or(0, |k| k.pieces.len()).to_string(),
            clock.map_or(String::new(), |k| ms(k.spread)),
            match clock {
                Some(k) if k.use_stamp => "started_at",
                _ => "arrival",
            }
            .to_string(),
        ]
    });
    csv_text(
        &[
            "agent",
            "id",
            "group",
            "opportunities",
            "claims",
            "answers",
            "first_claims",
            "inference_samples",
            "clock_pieces",
            "clock_spread_ms",
            "start_from",
        ],
        rows,
    )
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

    /// Text from the input in a comment: as it is when it may stand
    /// there, else a TOML basic string, which a TOML reader reads back
    /// as the text (a line break, quotes, `]]`, a NUL, a DEL).
    #[test]
    fn input_text_in_a_comment_cannot_end_it() {
        assert_eq!(comment_text("alice ]] \"b\""), "alice ]] \"b\"");
        for evil in [
            "evil\nhang_p = 0.9",
            "a\r\n[[agents]]\nname = \"x\"",
            "nul \u{0} del \u{7f} tab\t back\\slash \"q\"",
        ] {
            let c = comment_text(evil);
            assert!(!c.chars().any(char::is_control), "{c}");
            let doc = format!("# {c}\nx = 1\n");
            let t: toml::Table = toml::from_str(&doc).expect("a comment");
            assert_eq!(t.len(), 1, "{doc}");
            let back: toml::Table = toml::from_str(&format!("v = {c}")).expect("a string");
            assert_eq!(back["v"].as_str(), Some(evil));
        }
    }

    #[test]
    fn csv_cells_are_quoted_by_the_csv_crate() {
        let text = csv_text(&["a", "b"], [["x,y", "say \"hi\""], ["1", "two\nlines"]]);
        assert_eq!(text, "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n1,\"two\nlines\"\n");
        assert_eq!(values_csv("gap_ms", &[1.25, 2000.0]), "gap_ms\n1.3\n2000\n");
    }

    #[test]
    fn scenario_values_keep_their_comments_and_read_back() {
        let mut doc = DocumentMut::new();
        let root = doc.as_table_mut();
        put(root, "name", "a \"quoted\" name", "");
        let mut t = section();
        t.decor_mut().set_suffix("    # alice, bob");
        put(
            &mut t,
            "respond_p",
            num(prob(0.61234)),
            "95% CI 0.5..0.7, 12 opportunities",
        );
        let csma = inline([
            ("kind", "uniform".into()),
            ("min_ms", num(ms(0.0))),
            ("max_ms", num(ms(1234.56))),
        ]);
        put(&mut t, "csma", csma, "min 95% CI 0..1");
        let mut agents = ArrayOfTables::new();
        agents.push(t);
        root.insert("agents", Item::ArrayOfTables(agents));
        let text = doc.to_string();
        assert_eq!(
            text,
            "name = 'a \"quoted\" name'\n\n[[agents]]    # alice, bob\n\
             respond_p = 0.6123    # 95% CI 0.5..0.7, 12 opportunities\n\
             csma = { kind = \"uniform\", min_ms = 0, max_ms = 1234.6 }    # min 95% CI 0..1\n"
        );
        let back: toml::Table = toml::from_str(&text).expect("reads back");
        assert_eq!(back["name"].as_str(), Some("a \"quoted\" name"));
        assert_eq!(back["agents"][0]["csma"]["max_ms"].as_float(), Some(1234.6));
    }
}
