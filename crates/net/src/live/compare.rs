//! Live versus simulated: per metric, both means with their 95% confidence
//! intervals and an agreement test (docs/live.md, "Comparing").
//!
//! Shares of messages (duplicate, unanswered, single-starter) are compared
//! with a two-proportion z test on the messages pooled over replications;
//! every other metric with Welch's t test on the per-replication values.
//! A metric agrees when the test does not reject equality at the 1% level
//! (p >= 0.01) or when the difference is within the metric's stated
//! tolerance (differences too small to matter, e.g. the two link delays
//! that live TTFR includes by definition).

use crate::metrics::RunResult;
use crate::metrics::stats::Summary;
/// The comparison as the reports show it (the table on stdout,
/// compare.csv, compare.png): one [`Line`] per metric.
pub use crate::report::versus::{Line, Test, csv, table, table_width};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Significance level of the agreement tests.
pub const ALPHA: f64 = 0.01;

/// (metric, test, absolute tolerance, relative tolerance): the metrics
/// compared. The inference bill (calls and seconds per question) is the
/// cost of an answer under a scheme; the same seeds draw the same
/// inferences, so it differs only where timing changes who infers (an
/// abort, a cooldown that ends a few ms apart).
pub const COMPARED: [(&str, Test, f64, f64); 11] = [
    ("duplicate_rate", Test::Proportion, 0.02, 0.0),
    ("unanswered_rate", Test::Proportion, 0.02, 0.0),
    ("single_starter_rate", Test::Proportion, 0.05, 0.0),
    ("responses_per_msg", Test::Welch, 0.05, 0.0),
    ("starters_per_msg", Test::Welch, 0.1, 0.0),
    ("wasted_inference_rate", Test::Welch, 0.02, 0.0),
    ("wasted_inference_count_rate", Test::Welch, 0.03, 0.0),
    ("ttfr_p50_ms", Test::Welch, 0.0, 0.1),
    ("ttfr_p95_ms", Test::Welch, 0.0, 0.1),
    ("inference_calls_per_msg", Test::Welch, 0.05, 0.0),
    ("inference_s_per_msg", Test::Welch, 0.0, 0.1),
];

fn values(rs: &[RunResult], metric: &str) -> Vec<f64> {
    rs.iter()
        .filter_map(|r| r.get(metric))
        .filter(|x| !x.is_nan())
        .collect()
}

/// Pooled (successes, trials) of a message share over replications.
fn pooled(rs: &[RunResult], metric: &str) -> (f64, f64) {
    let mut x = 0.0;
    let mut n = 0.0;
    for r in rs {
        let (Some(rate), Some(m)) = (r.get(metric), r.get("messages")) else {
            continue;
        };
        if rate.is_nan() || m <= 0.0 {
            continue;
        }
        x += (rate * m).round();
        n += m;
    }
    (x, n)
}

pub use crate::metrics::stats::two_proportion;

/// Two-sided Welch t test on two samples: (t, p). NaN with fewer than
/// two values on a side.
pub fn welch(a: &[f64], b: &[f64]) -> (f64, f64) {
    if a.len() < 2 || b.len() < 2 {
        return (f64::NAN, f64::NAN);
    }
    let m = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let v = |xs: &[f64], mu: f64| {
        xs.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (xs.len() - 1) as f64
    };
    let (ma, mb) = (m(a), m(b));
    let (va, vb) = (v(a, ma) / a.len() as f64, v(b, mb) / b.len() as f64);
    let se2 = va + vb;
    if se2 == 0.0 {
        return if ma == mb {
            (0.0, 1.0)
        } else {
            (f64::INFINITY, 0.0)
        };
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2 * se2
        / (va * va / (a.len() - 1) as f64 + vb * vb / (b.len() - 1) as f64).max(f64::MIN_POSITIVE);
    let p = match StudentsT::new(0.0, 1.0, df) {
        Ok(d) => 2.0 * (1.0 - d.cdf(t.abs())),
        Err(_) => f64::NAN,
    };
    (t, p)
}

/// Compare live replications with simulated ones, metric by metric.
pub fn compare(live: &[RunResult], sim: &[RunResult]) -> Vec<Line> {
    COMPARED
        .iter()
        .map(|&(metric, test, abs_tol, rel_tol)| {
            let (lv, sv) = (values(live, metric), values(sim, metric));
            let (ls, ss) = (Summary::of(&lv), Summary::of(&sv));
            let (stat, p) = match test {
                Test::Proportion => {
                    let (x1, n1) = pooled(live, metric);
                    let (x2, n2) = pooled(sim, metric);
                    two_proportion(x1, n1, x2, n2)
                }
                Test::Welch => welch(&lv, &sv),
            };
            let tolerance = abs_tol.max(rel_tol * ss.mean.abs());
            let diff = (ls.mean - ss.mean).abs();
            let agree = (p.is_finite() && p >= ALPHA) || diff <= tolerance;
            Line {
                metric,
                live: ls,
                sim: ss,
                test,
                stat,
                p,
                tolerance,
                agree,
            }
        })
        .collect()
}

/// One message count, live against simulated, summed over replications:
/// the same seeds draw the same workload, so the counts must be equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountLine {
    pub what: &'static str,
    pub live: u64,
    pub sim: u64,
}

impl CountLine {
    pub fn agree(&self) -> bool {
        self.live == self.sim
    }
}

/// The counts compared: the operator's posts, those the server refused
/// and relayed, and the questions in the metrics (someone wanted to
/// answer them; under a scheme or a cooldown, every operator post to the
/// channel). `live` = (posts, refused, relayed, questions).
pub fn counts(
    live: [u64; 4],
    sim_posts: &[crate::model::Posts],
    sim: &[RunResult],
) -> Vec<CountLine> {
    let posted: u64 = sim_posts.iter().map(|p| p.posted).sum();
    let refused: u64 = sim_posts.iter().map(|p| p.refused).sum();
    let questions: u64 = sim
        .iter()
        .filter_map(|r| r.get("messages"))
        .map(|m| m as u64)
        .sum();
    let sim = [posted, refused, posted - refused, questions];
    ["posts", "posts_refused", "posts_relayed", "messages"]
        .into_iter()
        .zip(live.into_iter().zip(sim))
        .map(|(what, (live, sim))| CountLine { what, live, sim })
        .collect()
}

/// The counts as a short table for stdout.
pub fn counts_table(lines: &[CountLine]) -> String {
    let mut out = format!("{:<16}{:>10}{:>11}  equal\n", "count", "live", "simulated");
    out.push_str(&"-".repeat(44));
    out.push('\n');
    for l in lines {
        out.push_str(&format!(
            "{:<16}{:>10}{:>11}  {}\n",
            l.what,
            l.live,
            l.sim,
            if l.agree() { "yes" } else { "NO" }
        ));
    }
    out
}

/// The counts as rows of compare.csv (test `exact`).
pub fn counts_csv(scenario: &str, policy: &str, lines: &[CountLine]) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    for l in lines {
        let n = |x: u64| x.to_string();
        w.write_record([
            scenario.to_string(),
            policy.to_string(),
            l.what.to_string(),
            n(l.live),
            String::new(),
            String::new(),
            n(l.sim),
            String::new(),
            String::new(),
            "exact".into(),
            String::new(),
            String::new(),
            "0".into(),
            l.agree().to_string(),
        ])?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}

/// The bundled scenario made to tell policies apart in `live --compare`
/// (its `name`, and its path in the repository).
pub const LIVE_CHECK: (&str, &str) = ("live-check", "scenarios/live-check.toml");

/// The policies [`LIVE_CHECK`] tells apart, in groups: its simulations
/// under two policies of different groups differ, under two of one group
/// they agree (a 1 s TTL against 3 s inference separates agentchat's
/// sweep and no floor at all from the expiry at the deadline, which
/// `spec`, `tombstone` and `server-time` share).
pub const LIVE_CHECK_GROUPS: [&[&str]; 3] = [
    &["spec", "tombstone", "server-time"],
    &["agentchat-0.36"],
    &["none"],
];

fn live_check_separates(a: &str, b: &str) -> bool {
    let group = |p: &str| LIVE_CHECK_GROUPS.iter().position(|g| g.contains(&p));
    group(a).is_some() && group(b).is_some() && group(a) != group(b)
}

/// What `live --compare` says when every metric of a live run under `me`
/// also agrees with a simulation of each policy of `alike` (on the
/// scenario `scenario`, by name): the scenario cannot tell them apart, and
/// what can. It points at [`LIVE_CHECK`] only for the policies that one
/// tells from `me`, and never at the scenario being run.
pub fn alike_advice(scenario: &str, me: &str, alike: &[&str]) -> String {
    let list = alike.join(", ");
    let mut text = format!(
        "every metric agrees with a simulation of {list} too: this scenario cannot tell {me} \
         from {list}"
    );
    let here = scenario == LIVE_CHECK.0;
    let (told, rest): (Vec<&str>, Vec<&str>) = alike
        .iter()
        .partition(|p| !here && live_check_separates(me, p));
    if !told.is_empty() {
        text.push_str(&format!(
            "; to check which policy a server runs, {} tells {me} from {}",
            LIVE_CHECK.1,
            told.join(", ")
        ));
    }
    if !rest.is_empty() {
        let names: Vec<String> = std::iter::once(me)
            .chain(rest.iter().copied())
            .map(|p| format!("\"{p}\""))
            .collect();
        text.push_str(&format!(
            "; to tell {me} from {}, use a scenario in which their simulations differ \
             (herdsim run SCENARIO --set 'policies=[{}]' shows whether they do)",
            rest.join(", "),
            names.join(",")
        ));
    }
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_must_be_equal() {
        use crate::model::Posts;
        let mut r = RunResult {
            values: [0.0; crate::metrics::METRICS.len()],
        };
        let i = crate::metrics::METRICS
            .iter()
            .position(|m| *m == "messages")
            .expect("metric");
        r.values[i] = 30.0;
        let sim = [Posts {
            posted: 40,
            refused: 9,
        }];
        let lines = counts([40, 9, 31, 30], &sim, &[r.clone()]);
        assert!(lines.iter().all(CountLine::agree), "{lines:?}");
        let lines = counts([40, 0, 40, 30], &sim, &[r]);
        assert!(!lines[1].agree() && !lines[2].agree() && lines[0].agree());
        let t = counts_table(&lines);
        assert!(t.contains("posts_refused") && t.contains("NO"), "{t}");
        let csv = String::from_utf8(counts_csv("s", "spec", &lines).expect("csv")).expect("utf8");
        assert_eq!(csv.lines().count(), 4);
        assert!(csv.lines().all(|l| l.split(',').count() == 14), "{csv}");
    }

    #[test]
    fn equal_proportions_agree_and_far_ones_do_not() {
        let (_, p) = two_proportion(50.0, 100.0, 52.0, 100.0);
        assert!(p > 0.5);
        let (z, p) = two_proportion(10.0, 1000.0, 300.0, 1000.0);
        assert!(z < 0.0 && p < 1e-6);
    }

    #[test]
    fn welch_matches_a_known_case() {
        // Two samples with means 2 and 5, each of variance 1 (n = 3):
        // t = -3 / sqrt(2/3) = -3.674, df = 4, p = 0.0213.
        let (t, p) = welch(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!((t + 3.674).abs() < 1e-3, "{t}");
        assert!((p - 0.0213).abs() < 1e-3, "{p}");
        assert!(welch(&[1.0], &[2.0, 3.0]).1.is_nan());
    }
    /// Issue 47: on scenarios/live-check.toml itself, the advice never
    /// points at scenarios/live-check.toml; elsewhere it does, for the
    /// policies live-check tells apart only.
    #[test]
    fn the_advice_never_points_at_the_scenario_being_run() {
        let here = alike_advice("live-check", "spec", &["tombstone", "server-time"]);
        assert!(!here.contains("live-check.toml"), "{here}");
        assert!(
            here.contains(
                "cannot tell spec from tombstone, server-time; to tell spec from \
                           tombstone, server-time, use a scenario in which their simulations \
                           differ (herdsim run SCENARIO --set \
                           'policies=[\"spec\",\"tombstone\",\"server-time\"]' shows"
            ),
            "{here}"
        );
        // The default scenario cannot tell spec from agentchat-0.36 or
        // tombstone: live-check tells the first, not the second.
        let default = alike_advice("default", "spec", &["agentchat-0.36", "tombstone"]);
        assert!(
            default.contains("scenarios/live-check.toml tells spec from agentchat-0.36;"),
            "{default}"
        );
        assert!(
            default.contains("to tell spec from tombstone, use"),
            "{default}"
        );
        let all = alike_advice("default", "agentchat-0.36", &["spec", "none"]);
        assert!(
            all.contains("tells agentchat-0.36 from spec, none\n"),
            "{all}"
        );
        assert!(!all.contains("use a scenario"), "{all}");
    }

    /// [`LIVE_CHECK_GROUPS`] is what the simulation of scenarios/live-check.toml
    /// gives: every metric agrees within a group, some metric differs across.
    #[test]
    fn live_check_tells_apart_the_groups_it_says() {
        use crate::floor::PolicyKind;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(LIVE_CHECK.1);
        let loaded = crate::scenario::Loaded::load_with(Some(&path), &[]).expect("loads");
        let base = loaded.base().expect("resolves");
        assert_eq!(base.name, LIVE_CHECK.0);
        let p = crate::model::Prepared::with_cache(&base, &loaded.base_dir, &loaded.data)
            .expect("prepares");
        let sim = |name: &str| -> Vec<RunResult> {
            let policy: PolicyKind = name.parse().expect("a policy");
            crate::live::seeds(base.seed, base.reps)
                .into_iter()
                .map(|seed| crate::model::simulate(&p, policy, seed, None).expect("runs"))
                .collect()
        };
        let names: Vec<&str> = LIVE_CHECK_GROUPS
            .iter()
            .flat_map(|g| g.iter().copied())
            .collect();
        assert_eq!(names.len(), PolicyKind::ALL.len());
        let runs: Vec<Vec<RunResult>> = names.iter().map(|n| sim(n)).collect();
        for (i, a) in names.iter().enumerate() {
            for (j, b) in names.iter().enumerate().skip(i + 1) {
                let agree = compare(&runs[i], &runs[j]).iter().all(|l| l.agree);
                assert_eq!(agree, !live_check_separates(a, b), "{a} against {b}");
            }
        }
    }
}
