//! The figures of a calibration: one per fitted distribution, observed
//! against fitted (docs/observe.md, "Figures").

use super::fit::{ArrivalModel, Calibration, Written};
use super::out::group_name;
use super::window;
use crate::report::plot::fit::{Curve, FitPlot, fit_figure};
use std::path::{Path, PathBuf};

/// Points of a curve from 0 to `hi`.
fn grid(hi: f64) -> Vec<f64> {
    (0..=300).map(|i| hi * i as f64 / 300.0).collect()
}

/// Times in s, as in every figure and table of herdsim's.
fn secs(ms: f64) -> String {
    super::report::t(ms)
}

/// A p-value for a caption: `-` where there is none (too few values).
fn pv(p: f64) -> String {
    if p.is_finite() {
        format!("{p:.3}")
    } else {
        "-".into()
    }
}

/// The figures' plots, each with its file name.
pub fn plots(c: &Calibration, title: &str) -> Vec<(String, FitPlot)> {
    let mut out = Vec::new();
    if let Some(a) = &c.arrivals {
        let hi = a
            .gaps
            .iter()
            .copied()
            .fold(0.0_f64, f64::max)
            .max(a.mean_gap * 3.0);
        let (label, curve) = match a.model {
            ArrivalModel::Poisson => (
                format!(
                    "Poisson (Lilliefors p = {}): exponential, mean {}",
                    pv(a.ks_p),
                    secs(a.mean_gap)
                ),
                grid(hi)
                    .into_iter()
                    .map(|x| (x, 1.0 - (-x / a.mean_gap).exp()))
                    .collect(),
            ),
            ArrivalModel::Fixed => (
                format!(
                    "fixed gaps of {} (spread {:.1}% of the mean)",
                    secs(a.mean_gap),
                    100.0 * a.cv
                ),
                vec![(0.0, 0.0), (a.mean_gap, 0.0), (a.mean_gap, 1.0), (hi, 1.0)],
            ),
            ArrivalModel::Empirical => (
                format!(
                    "exponential of the same mean, rejected (Lilliefors p = {}): the scenario resamples the gaps",
                    pv(a.ks_p)
                ),
                grid(hi)
                    .into_iter()
                    .map(|x| (x, 1.0 - (-x / a.mean_gap).exp()))
                    .collect(),
            ),
        };
        out.push((
            "fit-arrivals.png".to_string(),
            FitPlot {
                title: format!("{title}: gaps between questions"),
                subtitle: format!("{} questions; {}", a.questions, label),
                x_label: "gap".into(),
                observed: a.gaps.clone(),
                observed_label: format!("observed gaps ({})", a.gaps.len()),
                curves: vec![Curve {
                    label: match a.model {
                        ArrivalModel::Poisson => "fitted exponential".into(),
                        ArrivalModel::Fixed => "fitted fixed gap".into(),
                        ArrivalModel::Empirical => "exponential (rejected)".into(),
                    },
                    points: curve,
                    dashed: a.model == ArrivalModel::Empirical,
                }],
            },
        ));
    }
    for (i, g) in c.groups.iter().enumerate() {
        let gn = group_name(i);
        if let Some(f) = &g.wait.fit {
            let fc = &c.first_claims;
            let hi = fc.cdf.last().map_or(f.max * 1.05, |p| p.0);
            let width = (f.max - f.min).max(window::MIN_WIDTH);
            let curves = vec![
                Curve {
                    label: "fit: the first claim's wait".into(),
                    points: fc.cdf.clone(),
                    dashed: false,
                },
                Curve {
                    label: format!(
                        "fit: one agent's window {}..{}{}",
                        secs(f.min),
                        secs(f.max),
                        if f.pinned { " (given)" } else { "" }
                    ),
                    points: grid(hi)
                        .iter()
                        .map(|&x| (x, ((x - f.min) / width).clamp(0.0, 1.0)))
                        .collect(),
                    dashed: true,
                },
            ];
            let verdict = if fc.ks_p < super::fit::ALPHA {
                "uniform rejected (kept: see the report)"
            } else {
                "uniform window"
            };
            out.push((
                format!("fit-{gn}-wait.png"),
                FitPlot {
                    title: format!("{title}: {gn}, wait before starting"),
                    subtitle: format!(
                        "{} claims seen in {} opportunities, respond_p {:.3}; {} (first-claim KS p = {}){}",
                        f.claims,
                        f.opps,
                        g.respond_p,
                        verdict,
                        pv(fc.ks_p),
                        if c.groups.len() > 1 { "; first claims of all groups" } else { "" }
                    ),
                    x_label: "wait from the question to its first claim, links removed".into(),
                    observed: fc.waits.clone(),
                    observed_label: format!("first claim of each question ({})", fc.waits.len()),
                    curves,
                },
            ));
        }
        let inf = &g.inference;
        if let Some(fit) = inf.fit {
            let hi = inf
                .observed
                .iter()
                .copied()
                .fold(0.0_f64, f64::max)
                .max(fit.quantile(0.99));
            let verdict = match &inf.written {
                Written::Empirical { .. } => {
                    "lognormal rejected: the scenario resamples the measured times"
                }
                _ => "lognormal",
            };
            out.push((
                format!("fit-{gn}-inference.png"),
                FitPlot {
                    title: format!("{title}: {gn}, inference time"),
                    subtitle: format!(
                        "{} {}{}; {} p50 {} p99 {} (Lilliefors p = {})",
                        inf.observed.len(),
                        if c.no_claims {
                            "answers"
                        } else {
                            "answered claims"
                        },
                        if inf.censored.is_empty() {
                            String::new()
                        } else {
                            format!(", {} still running at the end", inf.censored.len())
                        },
                        verdict,
                        secs(fit.quantile(0.5)),
                        secs(fit.quantile(0.99)),
                        pv(inf.ks_p)
                    ),
                    x_label: if c.no_claims {
                        "from the question to the answer (the wait and the inference together)"
                            .into()
                    } else {
                        "from the claim's start to its answer".into()
                    },
                    observed: inf.observed.clone(),
                    observed_label: format!("measured ({})", inf.observed.len()),
                    curves: vec![Curve {
                        label: "fitted lognormal".into(),
                        points: grid(hi).into_iter().map(|x| (x, fit.cdf(x))).collect(),
                        dashed: false,
                    }],
                },
            ));
        }
    }
    out
}

/// Draw every figure into `dir`; the paths written.
pub fn draw(c: &Calibration, title: &str, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (name, plot) in plots(c, title) {
        let path = dir.join(name);
        fit_figure(&path, &plot)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::{export, fit, view::View};

    /// Issue 47: an export's figures speak of its answers (it has no
    /// claims) and write `-` for a p-value there is none of (too few
    /// times for a test), never `NaN`.
    #[test]
    fn an_exports_figures_speak_of_answers_not_claims() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/exports/discord/general.json");
        let s = export::Settings::default();
        let (r, name) = export::read(&p, None, &s).expect("reads");
        let m = export::map(r, &s);
        let log = export::to_log(&m, &s, &p, &name, i64::MIN);
        let mut view = View::of(&log);
        let cal = fit::calibrate(&log, &mut view, &fit::Settings::default());
        assert!(cal.no_claims);
        let plots = plots(&cal, "x");
        assert!(plots.iter().any(|(f, _)| f.ends_with("-inference.png")));
        for (file, p) in &plots {
            let words = format!("{} {} {}", p.subtitle, p.x_label, p.observed_label);
            assert!(!words.contains("claim"), "{file}: {words}");
            assert!(!words.contains("NaN"), "{file}: {words}");
        }
    }
}
