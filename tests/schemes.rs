//! The schemes (docs/schemes.md) against their closed forms, and the
//! inference bill. Each statistical check states its tolerance; the exact
//! ones use fixed delays, so their values are exact.

mod common;

use common::{get, run};
use herdsim::floor::PolicyKind;
use statrs::distribution::{ContinuousCDF, Normal};

/// Two-sided false-failure probability 1e-4 under the normal approximation.
const Z_1E4: f64 = 3.89;

fn scenario(agents: &str, workload: &str, schemes: &str) -> String {
    format!(
        r#"
[network]
base_ms = 40
jitter = {{ kind = "fixed", ms = 0 }}
[[agents]]
count = 5
clock_skew = {{ kind = "fixed", ms = 0 }}
{agents}
[workload]
{workload}
[schemes]
{schemes}
"#
    )
}

/// `owner`, no faults, fixed delays: exactly one answer a question, and
/// the TTFR is the owner's own delay (downlink 40 + CSMA 3000) plus its
/// inference (4000) plus the uplink (40): 7080 ms, for every question.
#[test]
fn owner_answers_once_after_its_own_delay() {
    let toml = scenario(
        "respond_p = 0.6\ncsma = { kind = \"fixed\", ms = 3000 }\ninference = { kind = \"fixed\", ms = 4000 }",
        "count = 2000",
        "scheme = \"owner\"",
    );
    for policy in [PolicyKind::None, PolicyKind::Spec] {
        let r = run(&toml, policy, 7);
        assert_eq!(get(&r, "messages"), 2000.0, "{policy:?}: every post counts");
        assert_eq!(get(&r, "responses_per_msg"), 1.0, "{policy:?}");
        assert_eq!(get(&r, "duplicate_rate"), 0.0, "{policy:?}");
        assert_eq!(get(&r, "unanswered_rate"), 0.0, "{policy:?}");
        assert_eq!(get(&r, "inference_calls_per_msg"), 1.0, "{policy:?}");
        assert_eq!(get(&r, "inference_s_per_msg"), 4.0, "{policy:?}");
        // Exact up to the TTFR histogram's 3 significant digits (0.1%).
        for p in ["ttfr_p50_ms", "ttfr_p95_ms", "ttfr_p99_ms"] {
            let got = get(&r, p);
            assert!((got - 7080.0).abs() <= 7.08, "{policy:?} {p} = {got}");
        }
    }
}

/// `owner` on the default agents' distributions (CSMA uniform 2000..8000,
/// inference lognormal median 4000, p99 20000), links fixed at 40 ms each
/// way: the TTFR is 80 + U + L. Its CDF is
///   F(t) = E_U[ Phi((ln(t - 80 - U) - mu) / sigma) ],
/// integrated numerically. The measured p50 and p95 (nearest rank over n
/// answered questions) must sit where F says: |F(p_hat) - p| within
/// 3.89 sqrt(p(1-p)/n), the binomial spread of the empirical CDF at that
/// point (HDR rounding, 0.1%, moves F by far less).
#[test]
fn owner_ttfr_follows_its_delay_plus_inference() {
    let n = 20_000u32;
    let toml = scenario(
        "respond_p = 0.6",
        &format!("count = {n}"),
        "scheme = \"owner\"",
    );
    let r = run(&toml, PolicyKind::None, 11);
    assert_eq!(get(&r, "messages"), f64::from(n));
    assert_eq!(get(&r, "duplicate_rate"), 0.0);
    assert_eq!(get(&r, "unanswered_rate"), 0.0);
    let std = Normal::new(0.0, 1.0).expect("normal");
    let mu = 4000f64.ln();
    let sigma = (20_000f64 / 4000.0).ln() / std.inverse_cdf(0.99);
    let cdf = |t: f64| {
        let steps = 4000;
        (0..steps)
            .map(|i| {
                let u = 2000.0 + 6000.0 * (f64::from(i) + 0.5) / f64::from(steps);
                let l = t - 80.0 - u;
                if l <= 0.0 {
                    0.0
                } else {
                    std.cdf((l.ln() - mu) / sigma)
                }
            })
            .sum::<f64>()
            / f64::from(steps)
    };
    for (p, m) in [(0.5, "ttfr_p50_ms"), (0.95, "ttfr_p95_ms")] {
        let got = get(&r, m);
        let f = cdf(got);
        let tol = Z_1E4 * (p * (1.0 - p) / f64::from(n)).sqrt();
        eprintln!("owner {m}: {got} ms, F = {f:.4}, want {p} +- {tol:.4}");
        assert!(
            (f - p).abs() < tol,
            "{m} = {got}: F = {f}, want {p} +- {tol}"
        );
    }
}

/// A hung owner leaves its question unanswered (no fallback): the
/// unanswered share is hang_p, within 3.89 binomial standard errors.
#[test]
fn a_hung_owner_leaves_the_question_unanswered() {
    let (n, hang) = (10_000u32, 0.2);
    let toml = scenario(
        &format!("respond_p = 0.6\nhang_p = {hang}"),
        &format!("count = {n}"),
        "scheme = \"owner\"",
    );
    let r = run(&toml, PolicyKind::None, 3);
    let got = get(&r, "unanswered_rate");
    let tol = Z_1E4 * (hang * (1.0 - hang) / f64::from(n)).sqrt();
    eprintln!("hung owner: unanswered {got:.4}, want {hang} +- {tol:.4}");
    assert!((got - hang).abs() < tol);
    assert_eq!(get(&r, "duplicate_rate"), 0.0);
}

/// `mentions` with no mentions and no default agent answers nothing: every
/// question counts and goes unanswered, and no inference is run.
#[test]
fn mentions_without_mentions_answers_nothing() {
    let toml = scenario("respond_p = 1.0", "count = 300", "scheme = \"mentions\"");
    for policy in [PolicyKind::None, PolicyKind::Spec] {
        let r = run(&toml, policy, 5);
        assert_eq!(get(&r, "messages"), 300.0);
        assert_eq!(get(&r, "unanswered_rate"), 1.0);
        assert_eq!(get(&r, "responses_per_msg"), 0.0);
        assert_eq!(get(&r, "inferences"), 0.0);
        assert_eq!(get(&r, "inference_calls_per_msg"), 0.0);
        assert!(get(&r, "ttfr_p50_ms").is_nan(), "no answer, no TTFR");
    }
}

/// `mentions`: with every post mentioning an agent, or with a default
/// agent for the rest, each question gets exactly one answer, at once
/// (no CSMA wait: 40 + 4000 + 40 ms).
#[test]
fn mentions_answers_the_mentioned_or_the_default_agent() {
    let inf = "respond_p = 1.0\ninference = { kind = \"fixed\", ms = 4000 }";
    let cases = [
        ("count = 500\nmention_p = 1.0", "scheme = \"mentions\""),
        (
            "count = 500\nmention_p = 0.5",
            "scheme = \"mentions\"\ndefault_agent = \"agent-003\"",
        ),
    ];
    for (w, s) in cases {
        let r = run(&scenario(inf, w, s), PolicyKind::None, 9);
        assert_eq!(get(&r, "messages"), 500.0, "{w} {s}");
        assert_eq!(get(&r, "responses_per_msg"), 1.0, "{w} {s}");
        assert_eq!(get(&r, "unanswered_rate"), 0.0, "{w} {s}");
        let got = get(&r, "ttfr_p99_ms");
        assert!(
            (got - 4080.0).abs() <= 4.08,
            "{w} {s}: {got} (0.1%: the histogram)"
        );
    }
}

/// The bill counts every started inference, aborted ones included: under
/// `none` with all 5 agents answering and an inference (30 s) longer than
/// the CSMA window (so none has seen a reply when its wait ends), 5 calls
/// and 5 x 30 s a question;
/// under `spec` the calls are the starters (the aborted ones too), and
/// more than one a question on this workload.
#[test]
fn the_bill_counts_aborted_inferences() {
    let toml = scenario(
        "respond_p = 1.0\ninference = { kind = \"fixed\", ms = 30000 }",
        "count = 400",
        "",
    );
    let r = run(&toml, PolicyKind::None, 2);
    assert_eq!(get(&r, "inference_calls_per_msg"), 5.0);
    assert_eq!(get(&r, "inference_s_per_msg"), 150.0);
    let r = run(&toml, PolicyKind::Spec, 2);
    let calls = get(&r, "inference_calls_per_msg");
    assert_eq!(calls, get(&r, "starters_per_msg"));
    assert!(
        calls > 1.0 && get(&r, "responses_per_msg") == 1.0,
        "{calls}"
    );
    // Aborted inferences cost less than a whole one: between 30 s and
    // 30 s a call.
    let secs = get(&r, "inference_s_per_msg");
    assert!(
        secs > 30.0 && secs < 30.0 * calls,
        "{secs} s for {calls} calls"
    );
}

/// A cooldown longer than the run: each of the 5 agents answers the first
/// question it wants and then ignores every channel message.
#[test]
fn a_cooldown_silences_an_agent_after_it_answers() {
    // Fixed gaps of 60 s: every answer (CSMA at most 8 s, inference 30 s)
    // is done before the next post, and no agent skips for a seen reply.
    let w = "count = 50\narrivals = \"fixed\"\nmean_gap_ms = 60000";
    let a = "respond_p = 1.0\ninference = { kind = \"fixed\", ms = 30000 }";
    let toml = scenario(a, w, "cooldown_ms = 1e11");
    let r = run(&toml, PolicyKind::None, 4);
    assert_eq!(get(&r, "inferences"), 5.0);
    let short = scenario(a, w, "cooldown_ms = 0");
    assert_eq!(get(&run(&short, PolicyKind::None, 4), "inferences"), 250.0);
}

/// A question that a cooldown silences still counts: with a cooldown, the
/// denominator is every operator post, so the silenced ones show as
/// unanswered (45 of 50 here: the 5 agents answer the first, then cool).
#[test]
fn a_silenced_question_counts_as_unanswered() {
    let w = "count = 50\narrivals = \"fixed\"\nmean_gap_ms = 60000";
    let a = "respond_p = 1.0\ninference = { kind = \"fixed\", ms = 30000 }";
    let r = run(&scenario(a, w, "cooldown_ms = 1e11"), PolicyKind::Spec, 4);
    assert_eq!(get(&r, "messages"), 50.0);
    assert_eq!(get(&r, "unanswered_rate"), 45.0 / 50.0);
}

/// Bad `[schemes]` input: exit 2 and one message naming the file, the key
/// and its line:col.
#[test]
fn bad_schemes_input_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "default_agent = \"agent-9\"",
            "schemes.default_agent",
            ":2:1:",
        ),
        ("scheme = \"boss\"", "schemes.scheme", ":2:10:"),
        ("cooldown_ms = -1", "schemes.cooldown_ms", ":2:1:"),
        ("fallback_ms = -5", "schemes.fallback_ms", ":2:1:"),
        ("fallback_ms = nan", "schemes.fallback_ms", ":2:1:"),
        ("max_fallbacks = 101", "schemes.max_fallbacks", ":2:1:"),
        // A fallback is a duration: 1e12 ms was accepted, and its timers
        // then passed the horizon with every question answered.
        ("fallback_ms = 1e12", "schemes.fallback_ms", ":2:1:"),
        (
            "scheme = \"selector\"\nfallback_ms = 1000\nmax_fallbacks = 100\n[workload]\ncount = 10000000",
            "schemes.max_fallbacks",
            ":4:1:",
        ),
        (
            "scheme = \"selector\"\n[schemes.selector]\nfoo = 1",
            "schemes.selector.foo",
            ":4:1:",
        ),
        (
            "[schemes.selector]\nhang_p = 0.7\ncrash_p = 0.5",
            "schemes.selector.hang_p",
            ":3:1:",
        ),
        (
            "[schemes.selector]\ninference = { kind = \"fixed\", ms = -1 }",
            "schemes.selector.inference.ms",
            ":3:",
        ),
    ];
    for (i, (line, key, at)) in cases.into_iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&file, format!("[schemes]\n{line}\n")).expect("write");
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_herdsim"))
            .arg("validate")
            .arg(&file)
            .output()
            .expect("herdsim runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{line}: {err}");
        assert_eq!(err.lines().count(), 1, "{line}: {err}");
        assert!(err.contains(key) && err.contains(at), "{line}: {err}");
    }
}

/// A hung selection is wasted inference (docs/metrics.md), a completed
/// one is not. The selection hangs with probability s = 0.3 (its question
/// then gets nothing); otherwise the chosen agent answers once. Per
/// question: 1 + (1 - s) calls, s of them wasted, so the wasted count
/// rate is s / (2 - s) = 0.1765, and the wasted time 0 (a hang is 0 s
/// and nothing else is wasted). Tolerance: 3.89 SE of the ratio (delta
/// method: d/dH of H / (2n - H) is 2n / (2n - H)^2, H binomial).
#[test]
fn a_hung_selection_is_wasted() {
    let (n, sp) = (5_000u32, 0.3);
    let toml = scenario(
        "respond_p = 0.6\ninference = { kind = \"fixed\", ms = 4000 }",
        &format!("count = {n}"),
        &format!("scheme = \"selector\"\n[schemes.selector]\nhang_p = {sp}"),
    );
    let r = run(&toml, PolicyKind::None, 8);
    let want = sp / (2.0 - sp);
    let nf = f64::from(n);
    let tol = Z_1E4 * 2.0 * nf / ((2.0 - sp) * nf).powi(2) * (nf * sp * (1.0 - sp)).sqrt();
    let got = get(&r, "wasted_inference_count_rate");
    eprintln!("hung selections: wasted count rate {got:.4}, want {want:.4} +- {tol:.4}");
    assert!((got - want).abs() < tol, "{got}");
    assert_eq!(get(&r, "wasted_inference_rate"), 0.0);
    assert_eq!(get(&r, "duplicate_rate"), 0.0);
}

/// Settings that do nothing under the run's schemes pass with a warning
/// on stderr naming the key and its line:col (exit 0); the same settings
/// across a sweep of schemes that use them warn of nothing.
#[test]
fn settings_that_do_nothing_are_warned_of() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("fallback_ms = 5000", Some(("schemes.fallback_ms", ":2:1:"))),
        (
            "scheme = \"owner\"\n[schemes.selector]\nhang_p = 0.1",
            Some(("schemes.selector", ":3:")),
        ),
        ("scheme = \"mentions\"", Some(("schemes.scheme", ":2:1:"))),
        (
            "fallback_ms = 5000\n[sweep]\n\"schemes.scheme\" = [\"open\", \"owner\"]",
            None,
        ),
        ("scheme = \"mentions\"\ndefault_agent = \"agent-001\"", None),
    ];
    for (i, (text, want)) in cases.into_iter().enumerate() {
        let file = dir.path().join(format!("w{i}.toml"));
        std::fs::write(&file, format!("[schemes]\n{text}\n")).expect("write");
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_herdsim"))
            .arg("validate")
            .arg(&file)
            .output()
            .expect("herdsim runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{text}: {err}");
        let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
        match want {
            Some((key, at)) => {
                assert_eq!(warnings.len(), 1, "{text}: {err}");
                assert!(
                    warnings[0].contains(&format!("key `{key}`")) && warnings[0].contains(at),
                    "{text}: {err}"
                );
            }
            None => assert!(warnings.is_empty(), "{text}: {err}"),
        }
    }
}

/// `schemes.default_agent` names an agent by its number, whatever the
/// padding: `agent-0` is valid across a sweep of the agent count from 5
/// to 1500 (whose ids are `agent-000` and `agent-0000`), and it is the
/// agent that answers: under `mentions` with no mentions, every question
/// answered once.
#[test]
fn the_default_agent_is_named_by_its_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("sweep.toml");
    std::fs::write(
        &file,
        "[schemes]\nscheme = \"mentions\"\ndefault_agent = \"agent-0\"\n[sweep]\n\"agents.0.count\" = [5, 1500]\n",
    )
    .expect("write");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_herdsim"))
        .arg("validate")
        .arg(&file)
        .output()
        .expect("herdsim runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    for name in ["agent-0", "agent-000", "agent-00000"] {
        let toml = scenario(
            "respond_p = 0.6",
            "count = 200",
            &format!("scheme = \"mentions\"\ndefault_agent = \"{name}\""),
        );
        let r = run(&toml, PolicyKind::None, 3);
        assert_eq!(get(&r, "unanswered_rate"), 0.0, "{name}");
        assert_eq!(get(&r, "responses_per_msg"), 1.0, "{name}");
    }
}

/// `selector`, no faults, fixed delays: exactly one answer a question (the
/// selection is no answer), and the TTFR is the operator post's downlink
/// to the selector (40) + the selection (1500) + its uplink (40) + the
/// selection's downlink to the chosen agent (40) + its inference (4000) +
/// its uplink (40): 5660 ms, for every question. The bill: two calls a
/// question, 1.5 + 4 s.
#[test]
fn selector_answers_once_after_selection_and_inference() {
    let toml = scenario(
        "respond_p = 0.6\ninference = { kind = \"fixed\", ms = 4000 }",
        "count = 2000",
        "scheme = \"selector\"\n[schemes.selector]\ninference = { kind = \"fixed\", ms = 1500 }",
    );
    for policy in [PolicyKind::None, PolicyKind::Spec] {
        let r = run(&toml, policy, 7);
        assert_eq!(get(&r, "messages"), 2000.0, "{policy:?}: every post counts");
        assert_eq!(get(&r, "responses_per_msg"), 1.0, "{policy:?}");
        assert_eq!(get(&r, "duplicate_rate"), 0.0, "{policy:?}");
        assert_eq!(get(&r, "unanswered_rate"), 0.0, "{policy:?}");
        assert_eq!(get(&r, "starters_per_msg"), 1.0, "{policy:?}");
        assert_eq!(get(&r, "inference_calls_per_msg"), 2.0, "{policy:?}");
        assert_eq!(get(&r, "inference_s_per_msg"), 5.5, "{policy:?}");
        // Exact up to the TTFR histogram's 3 significant digits (0.1%).
        for p in ["ttfr_p50_ms", "ttfr_p95_ms", "ttfr_p99_ms"] {
            let got = get(&r, p);
            assert!((got - 5660.0).abs() <= 5.66, "{policy:?} {p} = {got}");
        }
    }
}

/// `selector` with a lognormal selection (p50 1500, p99 6000 ms) and a
/// fixed 4000 ms answer: the TTFR is 4160 + S, so its median sits at the
/// selection's median (5660 ms), checked as the owner's TTFR is:
/// |F(p_hat) - 0.5| within 3.89 binomial standard errors. The bill per question is
/// 4 s plus the lognormal's mean exp(mu + sigma^2 / 2), within 3.89
/// standard errors of a mean over n questions (the lognormal's sd /
/// sqrt(n)).
#[test]
fn selector_ttfr_and_bill_follow_the_selection_lognormal() {
    let n = 20_000u32;
    let toml = scenario(
        "respond_p = 0.6\ninference = { kind = \"fixed\", ms = 4000 }",
        &format!("count = {n}"),
        "scheme = \"selector\"",
    );
    let r = run(&toml, PolicyKind::None, 13);
    assert_eq!(get(&r, "messages"), f64::from(n));
    assert_eq!(get(&r, "duplicate_rate"), 0.0);
    assert_eq!(get(&r, "unanswered_rate"), 0.0);
    let std = Normal::new(0.0, 1.0).expect("normal");
    let mu = 1500f64.ln();
    let sigma = (6000f64 / 1500.0).ln() / std.inverse_cdf(0.99);
    let got = get(&r, "ttfr_p50_ms");
    let f = std.cdf(((got - 4160.0).ln() - mu) / sigma);
    let tol = Z_1E4 * (0.25 / f64::from(n)).sqrt();
    eprintln!("selector p50 {got} ms: F = {f:.4}, want 0.5 +- {tol:.4}");
    assert!((f - 0.5).abs() < tol, "p50 {got}: F = {f}");
    let mean = (mu + sigma * sigma / 2.0).exp() / 1000.0;
    let sd = ((sigma * sigma).exp() - 1.0).sqrt() * mean;
    let want = 4.0 + mean;
    let secs = get(&r, "inference_s_per_msg");
    let tol = Z_1E4 * sd / f64::from(n).sqrt();
    eprintln!("selector bill {secs} s, want {want:.4} +- {tol:.4}");
    assert!((secs - want).abs() < tol, "{secs} s, want {want}");
    assert_eq!(get(&r, "inference_calls_per_msg"), 2.0);
}

/// A hung selection leaves its question unanswered: the unanswered share
/// is the selector's hang_p (0.2), within 3.89 binomial standard errors.
/// A crashing selector loses every question posted while it is down: with
/// crash_p 0.2 and a restart far longer than the run, it answers until its
/// first crash and nothing after.
#[test]
fn a_hung_or_crashed_selector_leaves_questions_unanswered() {
    let (n, hang) = (10_000u32, 0.2);
    let toml = scenario(
        "respond_p = 0.6",
        &format!("count = {n}"),
        &format!("scheme = \"selector\"\n[schemes.selector]\nhang_p = {hang}"),
    );
    let r = run(&toml, PolicyKind::None, 3);
    let got = get(&r, "unanswered_rate");
    let tol = Z_1E4 * (hang * (1.0 - hang) / f64::from(n)).sqrt();
    eprintln!("hung selector: unanswered {got:.4}, want {hang} +- {tol:.4}");
    assert!((got - hang).abs() < tol);
    assert_eq!(get(&r, "duplicate_rate"), 0.0);
    // Selections take 1.5 s on average, posts come a minute apart: the
    // first crash comes at about question 1 / 0.2 = 5; after it the
    // selector is gone (restart 1e10 ms, past the run's 6e8 ms) and every later question is
    // unanswered: at least 9 900 of 10 000 (the first crash is later
    // than question 100 with probability 0.8^100, about 2e-10).
    let toml = format!(
        "{}\n[server]\nrestart = {{ kind = \"fixed\", ms = 1e10 }}\n",
        scenario(
            "respond_p = 0.6",
            &format!("count = {n}"),
            "scheme = \"selector\"\n[schemes.selector]\ncrash_p = 0.2",
        )
    );
    let r = run(&toml, PolicyKind::None, 3);
    let got = get(&r, "unanswered_rate");
    eprintln!("crashed selector: unanswered {got:.4}");
    assert!((0.99..1.0).contains(&got), "{got}");
}

/// The selector's fallback. A chosen agent that hangs (hang_p h) leaves
/// the question unanswered unless the fallback's new pick answers: it
/// fails when it picks the same agent (1/5: it is still hung on the
/// question) or another that hangs too (4/5 x h), so unanswered is
/// h (1/5 + 4h/5) (0.132 for h = 0.3) against h without a fallback.
/// Answers (4 s + the hops) come before the fallback (5 s), so no
/// duplicate. Tolerance: 3.89 binomial standard errors.
#[test]
fn the_selector_fallback_rescues_a_hung_choice() {
    let (n, h) = (10_000u32, 0.3);
    let agents =
        format!("respond_p = 0.6\nhang_p = {h}\ninference = {{ kind = \"fixed\", ms = 4000 }}");
    for (fallback, want) in [(0, h), (5000, h * (0.2 + 0.8 * h))] {
        let toml = scenario(
            &agents,
            &format!("count = {n}"),
            &format!("scheme = \"selector\"\nfallback_ms = {fallback}"),
        );
        let r = run(&toml, PolicyKind::None, 21);
        let got = get(&r, "unanswered_rate");
        let tol = Z_1E4 * (want * (1.0 - want) / f64::from(n)).sqrt();
        eprintln!("fallback {fallback}: unanswered {got:.4}, want {want:.4} +- {tol:.4}");
        assert!((got - want).abs() < tol, "fallback {fallback}: {got}");
        assert_eq!(get(&r, "duplicate_rate"), 0.0);
    }
}

/// A fallback when the chosen agent is only slow (10 s, fallback 5 s)
/// costs a duplicate whenever the new pick is another agent (4/5), and a
/// second selection every question: 2 selections + 1.8 answers = 3.8
/// calls a question on average. Tolerance: 3.89 binomial standard errors.
#[test]
fn a_fallback_on_a_slow_choice_costs_a_duplicate() {
    let n = 5_000u32;
    let toml = scenario(
        "respond_p = 0.6\ninference = { kind = \"fixed\", ms = 10000 }",
        &format!("count = {n}"),
        "scheme = \"selector\"\nfallback_ms = 5000\n[schemes.selector]\ninference = { kind = \"fixed\", ms = 1500 }",
    );
    let r = run(&toml, PolicyKind::None, 8);
    let got = get(&r, "duplicate_rate");
    let tol = Z_1E4 * (0.8 * 0.2 / f64::from(n)).sqrt();
    eprintln!("slow choice: duplicates {got:.4}, want 0.8 +- {tol:.4}");
    assert!((got - 0.8).abs() < tol, "{got}");
    assert_eq!(get(&r, "unanswered_rate"), 0.0);
    let calls = get(&r, "inference_calls_per_msg");
    assert!((calls - 3.8).abs() < tol, "{calls}");
}

/// The loop breaker. Two agents answering each other (`reply_to_agent_p`
/// 1, `max_depth` 10) under claims: every message gets one answer (the
/// claim's loser aborts; the author never answers itself), so a question
/// starts a chain of `max_depth` agent messages, the last unanswered.
/// With `breaker_after = 3` an agent answers no agent message once it has
/// seen 3 since the operator's post: the chain stops at 3 agent messages.
/// The answered (wanted) messages are then the question and the first 2
/// replies: `messages` is 3 a question against 10 without the breaker.
/// Exact: posts 20 minutes apart, so every chain ends before the next.
#[test]
fn the_breaker_stops_a_cascade_after_n_agent_messages() {
    let w = "count = 50\narrivals = \"fixed\"\nmean_gap_ms = 1200000\nreply_to_agent_p = 1.0\nmax_depth = 10";
    let a = "respond_p = 1.0\ninference = { kind = \"fixed\", ms = 4000 }";
    let two = |s: &str| scenario(a, w, s).replacen("count = 5\n", "count = 2\n", 1);
    for (breaker, per_q) in [(0u32, 10.0), (3, 3.0), (1, 1.0)] {
        let r = run(
            &two(&format!("breaker_after = {breaker}")),
            PolicyKind::Spec,
            6,
        );
        assert_eq!(get(&r, "messages"), 50.0 * per_q, "breaker {breaker}");
        assert_eq!(get(&r, "responses_per_msg"), 1.0, "breaker {breaker}");
    }
}

/// The owner's fallback. A hung owner (hang_p h = 0.2) leaves its question
/// unanswered without a fallback (h); with `fallback_ms` 10 s (longer than
/// an owner's answer, 40 + 3000 + 4000 + 40 ms, so no fallback fires on a
/// healthy owner: no duplicate) the next seat takes the question and
/// hangs independently: h^2 = 0.04; with 2 fallbacks h^3 = 0.008, under
/// `none`. Under `spec` the hung owner's claim is still live (a TTL of
/// 45 s, longer than 10 s): the fallback sees it and skips, so
/// unanswered stays h.
/// Tolerance: 3.89 binomial standard errors.
#[test]
fn the_owner_fallback_takes_a_hung_owners_question() {
    let (n, h) = (20_000u32, 0.2);
    let a = format!(
        "respond_p = 0.6\nhang_p = {h}\ncsma = {{ kind = \"fixed\", ms = 3000 }}\ninference = {{ kind = \"fixed\", ms = 4000 }}"
    );
    for policy in [PolicyKind::None, PolicyKind::Spec] {
        for (schemes, want) in [
            ("scheme = \"owner\"", h),
            ("scheme = \"owner\"\nfallback_ms = 10000", h * h),
            (
                "scheme = \"owner\"\nfallback_ms = 10000\nmax_fallbacks = 2",
                h * h * h,
            ),
        ] {
            let want = if policy == PolicyKind::Spec { h } else { want };
            let r = run(&scenario(&a, &format!("count = {n}"), schemes), policy, 17);
            let got = get(&r, "unanswered_rate");
            let tol = Z_1E4 * (want * (1.0 - want) / f64::from(n)).sqrt();
            eprintln!("{policy:?} {schemes:?}: unanswered {got:.4}, want {want:.4} +- {tol:.4}");
            assert!((got - want).abs() < tol, "{policy:?} {schemes}: {got}");
            assert_eq!(get(&r, "duplicate_rate"), 0.0, "{policy:?} {schemes}");
        }
    }
}

/// The owner's fallback under `spec`, in closed form. A hung owner
/// (hang_p h = 0.2) claims the question and holds its claim for the TTL;
/// a fallback that has seen that claim live skips at its fallback time,
/// as a CSMA wait that saw it does. With a 45 s TTL and fallbacks at 10 s
/// and 20 s, every question costs exactly its owner's one inference
/// (1.00 calls a question, no second claim, nothing aborted). With a 5 s
/// TTL (longer than a healthy owner's 4 s inference, shorter than the
/// fallback) the hung owner's claim has expired when the fallback looks:
/// it takes the question, and hangs with probability h, so calls are
/// 1 + h and unanswered h^2, as under `none` (3.89 binomial SE).
#[test]
fn the_owner_fallback_under_spec_skips_a_live_claim() {
    let (n, h) = (20_000u32, 0.2);
    let a = format!(
        "respond_p = 0.6\nhang_p = {h}\ncsma = {{ kind = \"fixed\", ms = 3000 }}\ninference = {{ kind = \"fixed\", ms = 4000 }}"
    );
    let schemes = "scheme = \"owner\"\nfallback_ms = 10000\nmax_fallbacks = 2";
    let with_ttl = |ttl: u32| {
        format!(
            "{}\n[server]\nttl_ms = {ttl}\n",
            scenario(&a, &format!("count = {n}"), schemes)
        )
    };
    let r = run(&with_ttl(45_000), PolicyKind::Spec, 17);
    assert_eq!(get(&r, "inference_calls_per_msg"), 1.0);
    assert_eq!(get(&r, "duplicate_rate"), 0.0);
    let got = get(&r, "unanswered_rate");
    let tol = Z_1E4 * (h * (1.0 - h) / f64::from(n)).sqrt();
    assert!((got - h).abs() < tol, "45 s TTL: unanswered {got}");

    let r = run(&with_ttl(5_000), PolicyKind::Spec, 17);
    let calls = get(&r, "inference_calls_per_msg");
    // Two fallbacks: 1 + h + h^2 calls, h^3 unanswered. The extra calls
    // of a question are 0, 1 or 2 with probabilities 1 - h, h (1 - h),
    // h^2: variance h + 3h^2 - (h + h^2)^2.
    let want = 1.0 + h + h * h;
    let var = h + 3.0 * h * h - (h + h * h).powi(2);
    let tol_c = Z_1E4 * (var / f64::from(n)).sqrt();
    eprintln!("5 s TTL: calls {calls:.4}, want {want:.4} +- {tol_c:.4}");
    assert!((calls - want).abs() < tol_c, "5 s TTL: calls {calls}");
    let got = get(&r, "unanswered_rate");
    let want = h * h * h;
    let tol = Z_1E4 * (want * (1.0 - want) / f64::from(n)).sqrt();
    eprintln!("5 s TTL: unanswered {got:.4}, want {want:.4} +- {tol:.4}");
    assert!((got - want).abs() < tol, "5 s TTL: unanswered {got}");
    assert_eq!(get(&r, "duplicate_rate"), 0.0);
}

/// A selector that crashes (crash_p c per selection) and is down for
/// D = disconnect detection + restart (5 s + 10 s) loses the question it
/// crashed on and every question posted while it is down (D / G of them
/// on average, Poisson posts G = 60 s apart). Renewal-reward over one
/// crash cycle (1/c questions up, the last lost, then D / G lost):
/// unanswered = (1 + D/G) / (1/c + D/G) = 0.2381 for c = 0.2. Time to
/// recover is D: the selector answers again once it is back.
/// Tolerance: the losses come in clusters (one crash loses 1 + D/G
/// questions), which widens the binomial standard error by about
/// sqrt(1.25); 3.89 of those, plus 0.005 for what the renewal form
/// leaves out (a question posted during the selection that crashes is
/// lost too: about c x 1.5 s / 60 s of questions).
#[test]
fn a_crashed_selector_loses_its_down_time() {
    let (n, c, d, g) = (10_000u32, 0.2, 15_000.0, 60_000.0);
    let toml = format!(
        "{}\n[server]\ndisconnect_detect = {{ kind = \"fixed\", ms = 5000 }}\nrestart = {{ kind = \"fixed\", ms = 10000 }}\n",
        scenario(
            "respond_p = 0.6",
            &format!("count = {n}\narrivals = \"poisson\"\nmean_gap_ms = {g}"),
            &format!("scheme = \"selector\"\n[schemes.selector]\ncrash_p = {c}"),
        )
    );
    let want = (1.0 + d / g) / (1.0 / c + d / g);
    let r = run(&toml, PolicyKind::None, 5);
    let got = get(&r, "unanswered_rate");
    let tol = Z_1E4 * (1.25 * want * (1.0 - want) / f64::from(n)).sqrt() + 0.005;
    eprintln!("selector down {d} ms: unanswered {got:.4}, want {want:.4} +- {tol:.4}");
    assert!((got - want).abs() < tol, "{got}");
    assert_eq!(get(&r, "duplicate_rate"), 0.0);
}
