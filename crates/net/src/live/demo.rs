//! `herdsim live` without a scenario file: a demonstration that shows the
//! protocol at work. It runs `spec` live (unless `--policy` says
//! otherwise), then says what the other side of the contrast gives on
//! the same questions (`none` simulated for a floor-control policy, `spec`
//! simulated for `none`) and what to try next.

use super::LiveError;
use crate::floor::PolicyKind;
use crate::metrics::RunResult;
use crate::model::{Prepared, simulate_posts};
use crate::scenario::{Loaded, Scenario};

/// The note printed before the demonstration: what runs, with the values
/// in force (after `--set` and `--reps`).
pub(super) fn note(base: &Scenario, policy: PolicyKind) -> String {
    format!(
        "no scenario file: a demonstration with the built-in default scenario, reduced to \
         workload.count={}, reps={} (--set and --reps change them), under {}{}; give a \
         scenario file to measure your own",
        base.workload.count,
        base.reps,
        policy.name(),
        if policy == PolicyKind::Spec {
            " (the RESPONDING_TO protocol)"
        } else {
            ""
        }
    )
}

/// The share of questions answered more than once, pooled over
/// replications (NaN without a question).
pub(super) fn duplicates(rs: &[RunResult]) -> f64 {
    let (mut dup, mut n) = (0.0, 0.0);
    for r in rs {
        if let (Some(d), Some(m)) = (r.get("duplicate_rate"), r.get("messages"))
            && !d.is_nan()
        {
            dup += (d * m).round();
            n += m;
        }
    }
    dup / n
}

/// The policy the demonstration contrasts `live` with.
fn other(live: PolicyKind) -> PolicyKind {
    if live == PolicyKind::None {
        PolicyKind::Spec
    } else {
        PolicyKind::None
    }
}

/// The text after the demonstration's table: the contrast with the other
/// side simulated on the same questions (same seeds), and what to try
/// next.
pub(super) fn epilogue(
    loaded: &Loaded,
    live_policy: PolicyKind,
    seeds: &[u64],
    live: &[RunResult],
) -> Result<String, LiveError> {
    let other = other(live_policy);
    let s = loaded.base()?;
    let p = Prepared::with_cache(&s, &loaded.base_dir, &loaded.data)
        .map_err(|e| LiveError::BadInput(format!("{}: {e}", loaded.file)))?;
    let sim = seeds
        .iter()
        .map(|&seed| simulate_posts(&p, other, seed, None).map(|(r, _)| r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LiveError::BadInput(format!("{}: {e}", loaded.file)))?;
    let pct = |x: f64| {
        if x.is_nan() {
            "n/a".to_string()
        } else {
            format!("{:.0}%", 100.0 * x)
        }
    };
    let (mine, theirs) = (pct(duplicates(live)), pct(duplicates(&sim)));
    let (me, them) = (live_policy.name(), other.name());
    let contrast = if live_policy == PolicyKind::None {
        format!(
            "without floor control ({me}, live above) {mine} of the questions were answered \
             more than once;\nunder the protocol ({them}, simulated on the same questions and \
             seeds): {theirs}"
        )
    } else {
        format!(
            "under {me} (live above) {mine} of the questions were answered more than once;\n\
             without floor control ({them}, simulated on the same questions and seeds): {theirs}"
        )
    };
    let rows = [
        (
            format!("herdsim live --policy {them}"),
            format!("the same demonstration under {them}, live"),
        ),
        (
            "herdsim live scenarios/live-check.toml --policy spec --speed 20 --compare".into(),
            "live against the simulator, metric by metric (about 50 s)".into(),
        ),
        (
            "herdsim run scenarios/default.toml".into(),
            "all five policies simulated, 20 replications of 1000 questions (seconds)".into(),
        ),
        (
            "docs/live.md".into(),
            "what live measures, and how to point it at your own server (--url)".into(),
        ),
    ];
    let mut text = format!("\n{contrast}\n\nnext:\n");
    for (cmd, why) in rows {
        text.push_str(&format!("  {cmd}\n      {why}\n"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_pooled_over_questions() {
        let metric = |name: &str| {
            crate::metrics::METRICS
                .iter()
                .position(|m| *m == name)
                .expect("metric")
        };
        let run = |dup: f64, messages: f64| {
            let mut r = RunResult {
                values: [0.0; crate::metrics::METRICS.len()],
            };
            r.values[metric("duplicate_rate")] = dup;
            r.values[metric("messages")] = messages;
            r
        };
        // 1 of 10 and 9 of 10: 10 of 20.
        let d = duplicates(&[run(0.1, 10.0), run(0.9, 10.0)]);
        assert!((d - 0.5).abs() < 1e-12, "{d}");
        assert!(duplicates(&[]).is_nan());
        assert_eq!(other(PolicyKind::None), PolicyKind::Spec);
        assert_eq!(other(PolicyKind::Tombstone), PolicyKind::None);
    }
}
