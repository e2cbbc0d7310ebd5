//! Statistical validation against closed forms (VALIDATION.md lists each
//! check, its formula, the value measured and the tolerance).
//!
//! Every tolerance comes from the sample size: a share over n independent
//! messages has standard error sqrt(p(1-p)/n); the bound used is stated with
//! its two-sided false-failure probability under the normal approximation.
//! Each test prints what it measured (`cargo test --release --test
//! validation -- --nocapture`).

mod common;

use common::{get, prepare, run, trace_lines};
use herdsim::floor::PolicyKind;
use herdsim::model::{TraceBuf, simulate};

/// Standard normal quantiles used below: two-sided false-failure
/// probabilities 1e-4 (3.89) and 1e-6 (4.89).
const Z_1E4: f64 = 3.89;

/// Zero delays, CSMA uniform over a window that covers T whole ticks, posts
/// aligned to the tick: each agent fires at one of T equally likely ticks.
/// Agents on the earliest occupied tick all start (the claims they send
/// reach the others only after their own timers fired); agents on later
/// ticks have seen a claim and skip. So
///   P(exactly one starter) = sum_{k=1..T} N (1/T) ((T-k)/T)^(N-1)
///                          = (N/T) sum_{j=0..T-1} (j/T)^(N-1).
#[test]
fn tick_quantization_single_starter_share() {
    let (n, t, msgs) = (5u32, 6u32, 20_000u32);
    let toml = format!(
        r#"
[network]
base_ms = 0
jitter = {{ kind = "fixed", ms = 0 }}
[[agents]]
count = {n}
respond_p = 1.0
csma = {{ kind = "uniform", min_ms = 2000, max_ms = {max} }}
csma_tick_ms = 1000
inference = {{ kind = "fixed", ms = 30000 }}
clock_skew = {{ kind = "fixed", ms = 0 }}
[workload]
arrivals = "fixed"
mean_gap_ms = 60000
count = {msgs}
"#,
        max = 2000 + 1000 * t
    );
    let r = run(&toml, PolicyKind::Spec, 21);
    let (nf, tf) = (f64::from(n), f64::from(t));
    let p: f64 = (0..t)
        .map(|j| (f64::from(j) / tf).powf(nf - 1.0))
        .sum::<f64>()
        * nf
        / tf;
    let got = get(&r, "single_starter_rate");
    let tol = Z_1E4 * (p * (1.0 - p) / f64::from(msgs)).sqrt();
    eprintln!("tick: measured {got:.4}, closed form {p:.4}, tolerance {tol:.4}");
    assert!(
        (got - p).abs() < tol,
        "measured {got}, closed form {p}, tolerance {tol}"
    );
}

/// `none`, zero delays, inference longer than the window: nobody sees a
/// reply before its timer fires, so every agent that wants to answer does.
/// Replies per *posted* message = N * respond_p in expectation
/// (Binomial(N, p) per post, variance N p (1-p)).
#[test]
fn none_policy_everyone_who_wants_answers() {
    let (n, p, posts) = (5.0_f64, 0.6_f64, 20_000.0_f64);
    let toml = format!(
        r#"
[network]
base_ms = 0
jitter = {{ kind = "fixed", ms = 0 }}
[[agents]]
count = {n}
respond_p = {p}
csma = {{ kind = "uniform", min_ms = 2000, max_ms = 8000 }}
inference = {{ kind = "fixed", ms = 10000 }}
[workload]
arrivals = "fixed"
mean_gap_ms = 60000
count = {posts}
"#
    );
    let r = run(&toml, PolicyKind::None, 22);
    let per_post = get(&r, "responses_per_msg") * get(&r, "messages") / posts;
    let tol = Z_1E4 * (n * p * (1.0 - p) / posts).sqrt();
    eprintln!(
        "none: replies per post {per_post:.4}, expected {:.4}, tolerance {tol:.4}",
        n * p
    );
    assert!((per_post - n * p).abs() < tol);
    // Per wanted message it is the zero-truncated binomial mean.
    let wanted = 1.0 - (1.0 - p).powf(n);
    let per_wanted = n * p / wanted;
    assert!((get(&r, "responses_per_msg") - per_wanted).abs() < tol / wanted);
    assert!(
        (get(&r, "messages") / posts - wanted).abs()
            < Z_1E4 * (wanted * (1.0 - wanted) / posts).sqrt()
    );
}

/// Poisson workload: gaps are exponential with the configured mean.
/// Checks the mean gap (SE = mean / sqrt(n)) and the whole distribution
/// with a Kolmogorov-Smirnov test at alpha = 0.001 (critical value
/// 1.949 / sqrt(n)).
#[test]
fn poisson_workload_rate_and_gaps() {
    let (mean_ms, posts) = (60_000.0_f64, 20_000usize);
    let toml = format!(
        r#"
[[agents]]
count = 1
respond_p = 0.0
[workload]
arrivals = "poisson"
mean_gap_ms = {mean_ms}
count = {posts}
"#
    );
    let p = prepare(&toml);
    let mut buf = TraceBuf::new();
    simulate(&p, PolicyKind::Spec, 23, Some(&mut buf)).expect("within the run limits");
    let mut times = Vec::with_capacity(posts);
    for v in trace_lines(&buf) {
        if v["ev"] == "post" {
            times.push(v["t_us"].as_f64().expect("t_us") / 1000.0);
        }
    }
    assert_eq!(times.len(), posts);
    let mut gaps: Vec<f64> = std::iter::once(times[0])
        .chain(times.windows(2).map(|w| w[1] - w[0]))
        .collect();
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    let tol = Z_1E4 * mean_ms / n.sqrt();
    eprintln!("poisson: mean gap {mean:.0} ms, expected {mean_ms}, tolerance {tol:.0}");
    assert!((mean - mean_ms).abs() < tol);
    gaps.sort_by(f64::total_cmp);
    let d = gaps
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let f = 1.0 - (-g / mean_ms).exp();
            let lo = i as f64 / n;
            let hi = (i + 1) as f64 / n;
            (f - lo).abs().max((hi - f).abs())
        })
        .fold(0.0_f64, f64::max);
    let crit = 1.949 / n.sqrt();
    eprintln!("poisson: KS D = {d:.5}, critical {crit:.5}");
    assert!(d < crit);
    // The rate: posts per virtual hour.
    let span_h = times[times.len() - 1] / 3_600_000.0;
    eprintln!(
        "poisson: rate {:.2} posts/h, expected {:.2}",
        n / span_h,
        3_600_000.0 / mean_ms
    );
}

/// The expected number of starters with uniform CSMA (docs/model.md, modelling choice 15):
/// E[starters] = 1 + N r - r^N, r = 2d/W, checked on a second geometry
/// (N = 3, r = 0.3) to make sure the formula, not one lucky point, holds.
#[test]
fn expected_starters_second_geometry() {
    let (n, d, w, msgs) = (3.0_f64, 450.0_f64, 3000.0_f64, 20_000.0_f64);
    let toml = format!(
        r#"
[network]
base_ms = {d}
jitter = {{ kind = "fixed", ms = 0 }}
[[agents]]
count = {n}
respond_p = 1.0
csma = {{ kind = "uniform", min_ms = 1000, max_ms = {max} }}
inference = {{ kind = "fixed", ms = 30000 }}
clock_skew = {{ kind = "fixed", ms = 0 }}
[workload]
arrivals = "fixed"
mean_gap_ms = 60000
count = {msgs}
"#,
        max = 1000.0 + w
    );
    let r = run(&toml, PolicyKind::Spec, 24);
    let rr = 2.0 * d / w;
    let e = 1.0 + n * rr - rr.powf(n);
    let p1 = (1.0 - rr).powf(n);
    let got = get(&r, "starters_per_msg");
    // starters - 1 lies in 0..N-1 with mean about N r: variance <= (N-1) N r.
    let tol = Z_1E4 * ((n - 1.0) * n * rr / msgs).sqrt();
    eprintln!("starters: measured {got:.4}, closed form {e:.4}, tolerance {tol:.4}");
    assert!((got - e).abs() < tol);
    let single = get(&r, "single_starter_rate");
    let tol1 = Z_1E4 * (p1 * (1.0 - p1) / msgs).sqrt();
    eprintln!("starters: single share {single:.4}, closed form {p1:.4}, tolerance {tol1:.4}");
    assert!((single - p1).abs() < tol1);
}
