//! The `herdsim live --compare` figure: one panel per metric, the live and
//! the simulated mean with their 95% confidence intervals side by side,
//! and whether they agree. Its input, one [`Line`] per metric, is defined
//! here and computed by `live::compare` (which re-exports it), so that
//! report imports nothing from live.

use super::draw::{self, de};
use super::layout::{decimals_for, tick, tick_step};
use super::output::{self, Figure, Format};
use crate::metrics::stats::Summary;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// How a metric is tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// Two-proportion z on pooled message counts.
    Proportion,
    /// Welch's t on replication values.
    Welch,
}

/// One metric, live against simulated.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub metric: &'static str,
    pub live: Summary,
    pub sim: Summary,
    pub test: Test,
    /// z or t statistic (NaN when it cannot be computed).
    pub stat: f64,
    /// Two-sided p-value (NaN when it cannot be computed).
    pub p: f64,
    /// The tolerance on |live - sim| (absolute, in the metric's unit).
    pub tolerance: f64,
    pub agree: bool,
}

const LIVE: RGBColor = RGBColor(213, 94, 0);
const SIM: RGBColor = RGBColor(0, 114, 178);
const COLS: usize = 3;

struct Versus<'a> {
    title: &'a str,
    lines: &'a [Line],
}

/// Draw the comparison `lines` to `out` (`.png` or `.svg`), atomically.
pub fn versus_figure(out: &Path, title: &str, lines: &[Line]) -> anyhow::Result<()> {
    let format = Format::from_path(out)?;
    let rows = lines.len().div_ceil(COLS).max(1) as u32;
    output::render(
        out,
        format,
        (1500, 80 + 360 * rows),
        &Versus { title, lines },
    )
}

impl Figure for Versus<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&draw::BACKGROUND).map_err(de)?;
        let (top, body) = root.split_vertically(70);
        top.draw(&Text::new(
            self.title.to_string(),
            (20, 12),
            draw::bold(24.0),
        ))
        .map_err(de)?;
        top.draw(&Text::new(
            "orange: live, blue: simulated with the measured link delays; bars: 95% CI over replications"
                .to_string(),
            (20, 42),
            draw::font(17.0).color(&draw::MUTED),
        ))
        .map_err(de)?;
        let rows = self.lines.len().div_ceil(COLS).max(1);
        let panels = body.split_evenly((rows, COLS));
        for (line, area) in self.lines.iter().zip(panels.iter()) {
            panel(area, line)?;
        }
        Ok(())
    }
}

/// The chart's coordinates: the two sides on x, the metric on y.
type Coords =
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>;

/// The half-width of a summary's 95% CI (0 under two replications).
fn ci(s: &crate::metrics::stats::Summary) -> f64 {
    if s.n >= 2 { s.ci95 } else { 0.0 }
}

/// The top of the y axis: 15% above the highest CI end, at least `lo` +
/// 1, and never past `cap` (a share's axis ends at 100%).
fn y_top(pts: &[(f64, crate::metrics::stats::Summary, RGBColor)], lo: f64, cap: f64) -> f64 {
    let hi = pts
        .iter()
        .map(|(_, s, _)| (s.mean + ci(s)).min(cap))
        .filter(|x| x.is_finite())
        .fold(0.0_f64, f64::max);
    let mut y1 = (hi + (hi - lo) * 0.15).min(cap);
    if y1 - lo < 1e-9 {
        y1 = (lo + 1.0).min(cap);
    }
    y1
}

/// The y range of a panel: from `lo` to [`y_top`], with room for a dot
/// on either end ([`super::layout::edge_room`]).
fn y_range(
    pts: &[(f64, crate::metrics::stats::Summary, RGBColor)],
    lo: f64,
    cap: f64,
) -> (f64, f64) {
    let y1 = y_top(pts, lo, cap);
    super::layout::edge_room((lo, y1), pts.iter().map(|(_, s, _)| s.mean))
}

/// The x axis label of a side: `live` at 0, `simulated` at 1.
fn side_label(v: &f64) -> String {
    if v.abs() < 0.3 {
        "live".into()
    } else if (v - 1.0).abs() < 0.3 {
        "simulated".into()
    } else {
        String::new()
    }
}

/// One metric's panel: the live and the simulated side.
fn panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, l: &Line) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    // In the unit the tables show the metric in (rates in %, times in s).
    let (unit, scale) = crate::report::table::unit(l.metric);
    let scaled = |s: crate::metrics::stats::Summary| crate::metrics::stats::Summary {
        mean: s.mean * scale,
        ci95: s.ci95 * scale,
        n: s.n,
    };
    let pts = [(0.0, scaled(l.live), LIVE), (1.0, scaled(l.sim), SIM)];
    // Every compared metric is a share, a count or a time: never below 0,
    // so a CI reaching below it is cut at the axis; a share's CI is also
    // cut at 100%.
    let lo = 0.0_f64;
    let cap = if l.metric.ends_with("_rate") {
        scale
    } else {
        f64::INFINITY
    };
    let (y0, y1) = y_range(&pts, lo, cap);
    let (title, _, _) = super::panels::describe(l.metric);
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" ({unit})")
    };
    let caption = format!(
        "{title}{unit}: {}",
        if l.agree { "agree" } else { "DISAGREE" }
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, draw::bold(18.0))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.6f64..1.6f64, {
            let (y0, y1) = super::layout::sane_range((y0, y1));
            y0..y1
        })
        .map_err(de)?;
    let y_dec = decimals_for(tick_step(y0, y1, 6));
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2)
        .x_label_formatter(&side_label)
        .y_labels(6)
        .y_label_formatter(&|v: &f64| tick(*v, y_dec))
        .label_style(draw::font(14.0).color(&draw::MUTED))
        .light_line_style(draw::GRID)
        .bold_line_style(draw::GRID_BOLD)
        .draw()
        .map_err(de)?;
    for (x, s, color) in pts {
        if s.mean.is_finite() {
            side(&mut chart, x, &s, color, (lo, cap))?;
        }
    }
    Ok(())
}

/// One side at `x`: a bar up to the mean, the CI as a capped whisker (cut
/// to `lo..=cap`), and a dot at the mean.
fn side<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Coords>,
    x: f64,
    s: &crate::metrics::stats::Summary,
    color: RGBColor,
    (lo, cap): (f64, f64),
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let c = ci(s);
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(x - 0.3, lo), (x + 0.3, s.mean)],
            color.mix(0.35).filled(),
        )))
        .map_err(de)?;
    if c > 0.0 {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, (s.mean - c).max(lo)), (x, (s.mean + c).min(cap))],
                color.stroke_width(3),
            )))
            .map_err(de)?;
        for y in [(s.mean - c).max(lo), (s.mean + c).min(cap)] {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x - 0.1, y), (x + 0.1, y)],
                    color.stroke_width(3),
                )))
                .map_err(de)?;
        }
    }
    chart
        .draw_series(std::iter::once(Circle::new((x, s.mean), 5, color.filled())))
        .map_err(de)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(mean: f64, ci95: f64) -> (f64, Summary, RGBColor) {
        (0.0, Summary { mean, ci95, n: 3 }, LIVE)
    }

    /// Issue 47: a share's axis ends at 100% (it ran to 115%), with room
    /// for a dot at 0 or at 100; a count's goes 15% above its highest CI.
    #[test]
    fn a_shares_axis_ends_at_100() {
        let pts = [side(95.0, 20.0), side(80.0, 5.0)];
        assert_eq!(y_top(&pts, 0.0, 100.0), 100.0);
        assert_eq!(y_range(&pts, 0.0, 100.0), (0.0, 100.0));
        let at_ends = [side(100.0, 0.0), side(0.0, 0.0)];
        assert_eq!(y_range(&at_ends, 0.0, 100.0), (-4.0, 104.0));
        let count = [side(2.0, 0.5)];
        assert!((y_top(&count, 0.0, f64::INFINITY) - 2.875).abs() < 1e-12);
        assert_eq!(y_top(&[side(0.0, 0.0)], 0.0, 100.0), 1.0);
    }
}
