//! The figures of `herdsim calibrate`: one per fitted distribution, the
//! observed values' cumulative distribution (a wide vermillion step)
//! against what the fit predicts for them (a narrow blue line drawn on
//! top of it, so that a fit that matches the data shows inside the
//! step), and where it helps what the fit says of the values nobody saw
//! (a dashed line).

use super::draw::{self, Axes, LegendEntry, Shape, Swatch, Ticks};
use super::layout::{self, HeaderRows};
use super::output::{self, Figure, Format};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The observed values' colour, and the fitted curves'.
const OBSERVED: RGBColor = draw::VERMILLION;
const FITTED: RGBColor = draw::BLUE;

/// Line widths, px: the observed step wide and below, the fitted curves
/// narrow and on top, so that a fit that matches shows as a blue line
/// inside the vermillion one.
const OBSERVED_WIDTH: u32 = 6;
const FITTED_WIDTH: u32 = 2;

/// A curve: (x in ms, cumulative share) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed: what the fit says of values no member saw.
    pub dashed: bool,
}

/// One distribution: the observed values and the fitted curves.
#[derive(Debug, Clone, PartialEq)]
pub struct FitPlot {
    pub title: String,
    pub subtitle: String,
    pub x_label: String,
    /// Observed values, ms.
    pub observed: Vec<f64>,
    pub observed_label: String,
    pub curves: Vec<Curve>,
}

/// Draw `plot` to `out` (`.png` or `.svg`), atomically.
pub fn fit_figure(out: &Path, plot: &FitPlot) -> anyhow::Result<()> {
    let format = Format::from_path(out)?;
    output::render(out, format, (1200, 800), plot)
}

/// The x range: from 0 to a little beyond the largest observed value or
/// curve point that matters (curves are cut where they reach 0.999).
fn x_range(p: &FitPlot) -> f64 {
    let obs = p.observed.iter().copied().fold(0.0_f64, f64::max);
    let curves = p
        .curves
        .iter()
        .flat_map(|c| c.points.iter())
        .filter(|(_, y)| *y <= 0.999)
        .map(|(x, _)| *x)
        .fold(0.0_f64, f64::max);
    let hi = obs.max(curves);
    if hi > 0.0 { hi * 1.05 } else { 1.0 }
}

/// A curve's finite points up to `hi`, and where it crosses `hi` (so a
/// fitted step that goes on past the axis, a fixed gap's, keeps its last
/// flat part to the axis's end).
fn clip(points: &[(f64, f64)], hi: f64) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len());
    for &(x, y) in points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
    {
        if x <= hi {
            out.push((x, y));
            continue;
        }
        if let Some(&(x0, y0)) = out.last()
            && x0 < hi
        {
            out.push((hi, y0 + (y - y0) * (hi - x0) / (x - x0)));
        }
        break;
    }
    out
}

impl Figure for FitPlot {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let s = 1.0;
        let mut legend = vec![LegendEntry::new(
            Swatch::Line(OBSERVED, Shape::nth(0), false),
            self.observed_label.clone(),
        )];
        for c in &self.curves {
            legend.push(LegendEntry::new(
                Swatch::Rule(FITTED, c.dashed),
                c.label.clone(),
            ));
        }
        let body = draw::header(
            root,
            &draw::Header {
                title: &self.title,
                subtitle: &self.subtitle,
                legend: &legend,
                sizes: (26.0 * s, 17.0 * s, 18.0 * s),
                rows: HeaderRows::scaled(s, 38.0, 26.0),
            },
        )?;
        let cells = draw::cells(&body, s, (1, 1));
        let Some(area) = cells.first() else {
            return Ok(());
        };
        let hi = x_range(self);
        let (scale, unit) = layout::time_unit(hi);
        let axes = Axes {
            caption: None,
            margins: Axes::margins(10.0 * s, 30.0 * s),
            label_areas: ((56.0 * s) as u32, (80.0 * s) as u32),
            x: (0.0, hi * scale),
            // A little room at 0 and 1, where a step's flat parts lie:
            // drawn on the frame they would be half hidden.
            y: (-0.02, 1.02),
            x_ticks: Ticks::Linear(9),
            y_ticks: Ticks::Linear(6),
            x_desc: Some(format!("{} ({unit})", self.x_label)),
            y_desc: Some("share at or below".into()),
            fonts: (15.0 * s, 17.0 * s),
        };
        let chart = draw::axes(area, &axes)?;
        let plot = chart.plotting_area();
        // The observed cumulative distribution as a wide step, under the
        // fitted curves: where the fit is right (fixed gaps: the fitted
        // step is the observed one) the narrower fitted line shows on top
        // of the observed, neither hidden.
        let mut xs = self.observed.clone();
        xs.sort_by(f64::total_cmp);
        let n = xs.len() as f64;
        if !xs.is_empty() {
            let mut step = vec![(0.0, 0.0)];
            for (i, x) in xs.iter().enumerate() {
                let x = x * scale;
                step.push((x, i as f64 / n));
                step.push((x, (i + 1) as f64 / n));
            }
            if let Some(&(x, _)) = step.last() {
                step.push((x.max(hi * scale), 1.0));
            }
            draw::path(plot, step, OBSERVED.stroke_width(OBSERVED_WIDTH))?;
            if xs.len() <= 60 {
                for (i, x) in xs.iter().enumerate() {
                    plot.draw(&Circle::new(
                        (x * scale, (i + 1) as f64 / n),
                        5,
                        OBSERVED.filled(),
                    ))
                    .map_err(draw::de)?;
                }
            }
        }
        for c in &self.curves {
            let pts: Vec<(f64, f64)> = clip(&c.points, hi)
                .into_iter()
                .map(|(x, y)| (x * scale, y))
                .collect();
            if pts.len() < 2 {
                continue;
            }
            if c.dashed {
                draw::dashed(plot, pts, (10, 7), FITTED.stroke_width(FITTED_WIDTH))?;
            } else {
                draw::path(plot, pts, FITTED.stroke_width(FITTED_WIDTH))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A curve is cut at the axis's end where it crosses it: a fixed
    /// gap's step keeps its flat top to the end (it ended at the step).
    #[test]
    fn curves_are_cut_where_they_cross_the_axis_end() {
        let step = [(0.0, 0.0), (60.0, 0.0), (60.0, 1.0), (180.0, 1.0)];
        assert_eq!(
            clip(&step, 63.0),
            [(0.0, 0.0), (60.0, 0.0), (60.0, 1.0), (63.0, 1.0)]
        );
        let line = [(0.0, 0.0), (10.0, 0.5), (20.0, 1.0), (30.0, 1.0)];
        assert_eq!(clip(&line, 15.0), [(0.0, 0.0), (10.0, 0.5), (15.0, 0.75)]);
        assert_eq!(clip(&[(0.0, f64::NAN), (1.0, 0.5)], 2.0), [(1.0, 0.5)]);
    }

    #[test]
    fn draws_a_png_and_an_svg() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = FitPlot {
            title: "inference".into(),
            subtitle: "lognormal".into(),
            x_label: "inference time".into(),
            observed: vec![1000.0, 2000.0, 2500.0, 4000.0],
            observed_label: "observed (4)".into(),
            curves: vec![Curve {
                label: "fitted".into(),
                points: (0..50)
                    .map(|i| (i as f64 * 100.0, i as f64 / 50.0))
                    .collect(),
                dashed: false,
            }],
        };
        for name in ["f.png", "f.svg"] {
            let out = tmp.path().join(name);
            fit_figure(&out, &p).expect("draws");
            assert!(std::fs::metadata(&out).expect("written").len() > 1000);
        }
    }
}
