//! The trade-off figure of `herdsim tune`: one panel per quality metric
//! (the objective, the duplicate rate, the wasted-inference rate, ...)
//! against the p95 time to first response, every evaluated candidate as a
//! dot, the Pareto front (no other candidate is both faster and better) as
//! a step line, the latency budget as a dashed rule with the region beyond
//! it shaded, the current settings and the recommendation marked with
//! their 95% confidence intervals on both axes.

use super::draw::{self, LegendEntry, Shape, Swatch, de};
use super::output::{self, Figure, Format};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

const BLUE: RGBColor = RGBColor(0, 114, 178);
const ORANGE: RGBColor = RGBColor(230, 159, 0);
const GREEN: RGBColor = RGBColor(0, 158, 115);
const VERMILLION: RGBColor = RGBColor(213, 94, 0);
const GREY: RGBColor = RGBColor(150, 150, 150);

/// How a point is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Candidate,
    /// The scenario's own settings.
    Current,
    /// The recommendation.
    Chosen,
}

/// One evaluated candidate: its p95 time to first response and one value
/// per panel, each as (mean, 95% CI half-width).
#[derive(Debug, Clone, PartialEq)]
pub struct ParetoPoint {
    pub x_ms: (f64, f64),
    pub ys: Vec<(f64, f64)>,
    /// Within the latency budget.
    pub feasible: bool,
    pub mark: Mark,
}

/// A panel's y axis.
#[derive(Debug, Clone, PartialEq)]
pub struct ParetoAxis {
    /// Panel title and axis name, e.g. "duplicate rate".
    pub label: String,
    /// A fraction shown in percent.
    pub percent: bool,
}

/// Everything the figure shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ParetoChart {
    pub title: String,
    pub subtitle: String,
    /// The bound on the mean p95 (ms), if any.
    pub budget_ms: Option<f64>,
    pub panels: Vec<ParetoAxis>,
    pub points: Vec<ParetoPoint>,
}

/// Pixel size of a figure with `panels` panels side by side.
pub fn pareto_size(panels: usize) -> (u32, u32) {
    (40 + 620 * panels.max(1) as u32, 700)
}

/// Draw `chart` to `out` (`.png` or `.svg`), atomically.
pub fn pareto_figure(chart: &ParetoChart, out: &Path) -> anyhow::Result<()> {
    let format = Format::from_path(out)?;
    output::render(out, format, pareto_size(chart.panels.len()), chart)
}

/// Indices of the points on the Pareto front of panel `panel` (lower x and
/// lower y are better), by increasing x.
pub fn front(points: &[ParetoPoint], panel: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..points.len())
        .filter(|&i| {
            points[i].x_ms.0.is_finite() && points[i].ys.get(panel).is_some_and(|y| y.0.is_finite())
        })
        .collect();
    let y = |i: usize| points[i].ys[panel].0;
    idx.sort_by(|&a, &b| {
        points[a]
            .x_ms
            .0
            .total_cmp(&points[b].x_ms.0)
            .then(y(a).total_cmp(&y(b)))
            .then(a.cmp(&b))
    });
    let mut out = Vec::new();
    let mut best = f64::INFINITY;
    for i in idx {
        if y(i) < best {
            best = y(i);
            out.push(i);
        }
    }
    out
}

impl ParetoChart {
    fn legend(&self) -> Vec<LegendEntry> {
        let mut e = vec![LegendEntry {
            swatch: Swatch::Mark {
                shape: Shape::Circle,
                color: BLUE,
                filled: true,
            },
            label: if self.budget_ms.is_some() {
                "candidate within the budget".into()
            } else {
                "candidate".into()
            },
        }];
        if self.budget_ms.is_some() {
            e.push(LegendEntry {
                swatch: Swatch::Mark {
                    shape: Shape::Circle,
                    color: GREY,
                    filled: false,
                },
                label: "over the budget".into(),
            });
        }
        e.push(LegendEntry {
            swatch: Swatch::Line {
                color: GREEN,
                shape: Shape::Circle,
                dashed: false,
            },
            label: "Pareto front".into(),
        });
        if self.points.iter().any(|p| p.mark == Mark::Current) {
            e.push(LegendEntry {
                swatch: Swatch::Mark {
                    shape: Shape::Square,
                    color: ORANGE,
                    filled: true,
                },
                label: "current settings".into(),
            });
        }
        if self.points.iter().any(|p| p.mark == Mark::Chosen) {
            e.push(LegendEntry {
                swatch: Swatch::Mark {
                    shape: Shape::Diamond,
                    color: VERMILLION,
                    filled: true,
                },
                label: "recommended (95% CI)".into(),
            });
        }
        if self.budget_ms.is_some() {
            e.push(LegendEntry {
                swatch: Swatch::Rule {
                    color: VERMILLION,
                    dashed: true,
                },
                label: "p95 budget".into(),
            });
        }
        e
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        panel: usize,
        s: f64,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let axis = &self.panels[panel];
        let finite: Vec<&ParetoPoint> = self
            .points
            .iter()
            .filter(|p| p.x_ms.0.is_finite() && p.ys.get(panel).is_some_and(|y| y.0.is_finite()))
            .collect();
        let x_max_raw = finite
            .iter()
            .map(|p| p.x_ms.0 + p.x_ms.1)
            .chain(self.budget_ms)
            .fold(f64::NEG_INFINITY, f64::max);
        let (xs, xunit) = if x_max_raw >= 2000.0 {
            (0.001, "s")
        } else {
            (1.0, "ms")
        };
        let ys = if axis.percent { 100.0 } else { 1.0 };
        let (mut x0, mut x1) = finite
            .iter()
            .map(|p| ((p.x_ms.0 - p.x_ms.1) * xs, (p.x_ms.0 + p.x_ms.1) * xs))
            .chain(self.budget_ms.map(|b| (b * xs, b * xs)))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (lo, hi)| {
                (a.min(lo), b.max(hi))
            });
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        let pad = ((x1 - x0) * 0.06).max(x1.abs() * 0.01).max(1e-6);
        let (x0, x1) = ((x0 - pad).max(0.0), x1 + pad);
        let y_hi = finite
            .iter()
            .map(|p| (p.ys[panel].0 + p.ys[panel].1) * ys)
            .fold(0.0_f64, f64::max);
        // Rates and the objective are never negative: a CI reaching below
        // zero is cut at the axis.
        let y_lo = finite
            .iter()
            .map(|p| p.ys[panel].0 * ys)
            .fold(0.0_f64, f64::min);
        // Focus on the region around the recommendation and the current
        // settings when far worse candidates would squash it; those are
        // drawn on the top edge.
        let cap = y_focus(&self.points, panel).map(|c| c * ys);
        let clipped = cap.is_some_and(|c| y_hi > c * 1.2);
        let top = match cap {
            Some(c) if clipped => c,
            _ => y_hi,
        };
        let mut y1 = top + (top - y_lo) * 0.08;
        if y1 - y_lo < 1e-12 {
            y1 = y_lo + if axis.percent { 1.0 } else { 0.01 };
        }
        let y0 = y_lo;
        let above = finite.iter().filter(|p| p.ys[panel].0 * ys > y1).count();

        let caption = if above > 0 {
            format!(
                "{} ({above} off the scale, at the top)",
                capitalize(&axis.label)
            )
        } else {
            capitalize(&axis.label)
        };
        let tick_font = draw::font(15.0 * s).color(&draw::MUTED);
        let desc_font = draw::font(17.0 * s);
        let mut chart = ChartBuilder::on(area)
            .caption(caption, draw::bold(21.0 * s))
            .margin((10.0 * s) as u32)
            .margin_right((24.0 * s) as u32)
            .x_label_area_size((56.0 * s) as u32)
            .y_label_area_size((80.0 * s) as u32)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(de)?;
        let x_dec = draw::decimals_for(draw::tick_step(x0, x1, 7));
        let y_dec = draw::decimals_for(draw::tick_step(y0, y1, 7));
        let xfmt = move |v: &f64| draw::tick(*v, x_dec);
        let yfmt = move |v: &f64| draw::tick(*v, y_dec);
        chart
            .configure_mesh()
            .x_desc(format!("p95 time to first response ({xunit})"))
            .y_desc(if axis.percent {
                format!("{} (%)", axis.label)
            } else {
                axis.label.clone()
            })
            .x_labels(7)
            .y_labels(7)
            .max_light_lines(1)
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .label_style(tick_font)
            .axis_desc_style(desc_font)
            .bold_line_style(draw::GRID_BOLD.stroke_width(1))
            .light_line_style(draw::GRID.stroke_width(1))
            .axis_style(draw::MUTED.stroke_width(1))
            .draw()
            .map_err(de)?;

        // The region over the budget, and the budget itself.
        if let Some(b) = self.budget_ms {
            let bx = b * xs;
            if bx < x1 {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(bx.max(x0), y0), (x1, y1)],
                        GREY.mix(0.12).filled(),
                    )))
                    .map_err(de)?;
            }
            if bx >= x0 && bx <= x1 {
                chart
                    .draw_series(DashedLineSeries::new(
                        vec![(bx, y0), (bx, y1)],
                        (9.0 * s) as i32,
                        (6.0 * s) as i32,
                        VERMILLION.stroke_width((2.0 * s).round().max(1.0) as u32),
                    ))
                    .map_err(de)?;
                let label = format!("budget {} {xunit}", draw::tick(bx, x_dec + 1));
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at((bx, y1))
                            + Text::new(
                                label,
                                (-(6.0 * s) as i32, (18.0 * s) as i32),
                                draw::font(15.0 * s)
                                    .color(&VERMILLION)
                                    .pos(Pos::new(HPos::Right, VPos::Top)),
                            ),
                    ))
                    .map_err(de)?;
            }
        }

        // Every candidate.
        let r = (4.0 * s).round().max(2.0) as i32;
        for p in self.points.iter().filter(|p| p.mark == Mark::Candidate) {
            let Some(y) = p.ys.get(panel) else { continue };
            if !(p.x_ms.0.is_finite() && y.0.is_finite()) {
                continue;
            }
            let at = (p.x_ms.0 * xs, (y.0 * ys).min(y1));
            if y.0 * ys > y1 {
                let color = if p.feasible {
                    BLUE.mix(0.7)
                } else {
                    GREY.to_rgba()
                };
                draw::marker(
                    chart.plotting_area(),
                    at,
                    Shape::TriangleUp,
                    r,
                    color,
                    p.feasible,
                )?;
            } else if p.feasible {
                draw::marker(
                    chart.plotting_area(),
                    at,
                    Shape::Circle,
                    r,
                    BLUE.mix(0.7),
                    true,
                )?;
            } else {
                draw::marker(
                    chart.plotting_area(),
                    at,
                    Shape::Circle,
                    r,
                    GREY.to_rgba(),
                    false,
                )?;
            }
        }

        // The Pareto front, as a step line.
        let f = front(&self.points, panel);
        if !f.is_empty() {
            let mut line = Vec::with_capacity(2 * f.len());
            for (k, &i) in f.iter().enumerate() {
                let (x, y) = (
                    self.points[i].x_ms.0 * xs,
                    (self.points[i].ys[panel].0 * ys).min(y1),
                );
                if k > 0 {
                    let prev_y = line.last().map_or(y, |p: &(f64, f64)| p.1);
                    line.push((x, prev_y));
                }
                line.push((x, y));
            }
            chart
                .draw_series(LineSeries::new(
                    line,
                    GREEN.stroke_width((2.5 * s).round().max(1.0) as u32),
                ))
                .map_err(de)?;
        }

        // Current settings, then the recommendation on top, with CIs.
        for (mark, shape, color, size) in [
            (Mark::Current, Shape::Square, ORANGE, 8.0),
            (Mark::Chosen, Shape::Diamond, VERMILLION, 9.0),
        ] {
            for p in self.points.iter().filter(|p| p.mark == mark) {
                let Some(y) = p.ys.get(panel) else { continue };
                if !(p.x_ms.0.is_finite() && y.0.is_finite()) {
                    continue;
                }
                let (x, xc) = (p.x_ms.0 * xs, p.x_ms.1 * xs);
                let (yv, yc) = (y.0 * ys, y.1 * ys);
                let st = color.stroke_width((2.0 * s).round().max(1.0) as u32);
                for seg in [
                    vec![(x - xc, yv), (x + xc, yv)],
                    vec![(x, (yv - yc).max(y0)), (x, (yv + yc).min(y1))],
                ] {
                    chart
                        .draw_series(std::iter::once(PathElement::new(seg, st)))
                        .map_err(de)?;
                }
                draw::marker(
                    chart.plotting_area(),
                    (x, yv),
                    shape,
                    (size * s).round() as i32,
                    color.to_rgba(),
                    true,
                )?;
            }
        }
        Ok(())
    }
}

/// The top of the region worth showing in panel `panel` (unscaled): three
/// times the worst upper CI of the recommendation and the current settings,
/// or, when both are zero, 1.5 times the lowest positive value on the
/// Pareto front. `None`: show everything.
fn y_focus(points: &[ParetoPoint], panel: usize) -> Option<f64> {
    let anchor = points
        .iter()
        .filter(|p| p.mark != Mark::Candidate)
        .filter_map(|p| p.ys.get(panel))
        .map(|y| y.0 + y.1)
        .filter(|v| v.is_finite())
        .fold(f64::NEG_INFINITY, f64::max);
    if anchor > 0.0 {
        return Some(anchor * 3.0);
    }
    front(points, panel)
        .iter()
        .map(|&i| points[i].ys[panel].0 + points[i].ys[panel].1)
        .filter(|v| *v > 0.0)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))))
        .map(|v| v * 1.5)
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

impl Figure for ParetoChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&draw::BACKGROUND).map_err(de)?;
        let (w, h) = root.dim_in_pixel();
        let base = pareto_size(self.panels.len());
        let s = (w as f64 / base.0 as f64)
            .min(h as f64 / base.1 as f64)
            .clamp(0.5, 3.0);
        let title_font = draw::bold(28.0 * s);
        let sub_font = draw::font(17.0 * s).color(&draw::MUTED);
        let legend_font = draw::font(18.0 * s);
        let legend = self.legend();
        let pad = (14.0 * s) as i32;
        let title_h = (38.0 * s) as i32;
        let sub_h = (26.0 * s) as i32;
        let legend_h = draw::legend_height(&legend, &legend_font, w as i32 - 60);
        let header = pad + title_h + sub_h + legend_h + pad;
        root.draw(&Text::new(
            draw::fit_text(&self.title, &title_font, w as i32 - 40),
            (w as i32 / 2, pad),
            title_font.pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(de)?;
        root.draw(&Text::new(
            draw::fit_text(&self.subtitle, &sub_font, w as i32 - 40),
            (w as i32 / 2, pad + title_h),
            sub_font.pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(de)?;
        let (head, body) = root.split_vertically(header.min(h as i32 / 2));
        let (_, legend_area) = head.split_vertically(pad + title_h + sub_h);
        draw::draw_legend(&legend_area, &legend, &legend_font)?;
        let body = body.margin(0, (8.0 * s) as i32, (8.0 * s) as i32, (8.0 * s) as i32);
        let cells = body.split_evenly((1, self.panels.len().max(1)));
        for (i, cell) in cells.iter().enumerate().take(self.panels.len()) {
            self.draw_panel(cell, i, s)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(x: f64, y: f64) -> ParetoPoint {
        ParetoPoint {
            x_ms: (x, 0.0),
            ys: vec![(y, 0.0)],
            feasible: true,
            mark: Mark::Candidate,
        }
    }

    #[test]
    fn front_keeps_the_non_dominated() {
        let pts = vec![
            pt(3.0, 1.0),
            pt(1.0, 5.0),
            pt(2.0, 5.0),
            pt(2.0, 2.0),
            pt(4.0, 1.0),
            pt(f64::NAN, 0.0),
        ];
        assert_eq!(front(&pts, 0), vec![1, 3, 0]);
    }

    #[test]
    fn draws_png_and_svg() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut points: Vec<ParetoPoint> = (0..20)
            .map(|i| {
                let x = 2000.0 + 500.0 * f64::from(i);
                ParetoPoint {
                    x_ms: (x, 50.0),
                    ys: vec![(0.3 / f64::from(i + 1), 0.01), (0.1, 0.0)],
                    feasible: x <= 9000.0,
                    mark: Mark::Candidate,
                }
            })
            .collect();
        points[3].mark = Mark::Current;
        points[14].mark = Mark::Chosen;
        let chart = ParetoChart {
            title: "t".into(),
            subtitle: "s".into(),
            budget_ms: Some(9000.0),
            panels: vec![
                ParetoAxis {
                    label: "duplicate rate".into(),
                    percent: true,
                },
                ParetoAxis {
                    label: "objective".into(),
                    percent: false,
                },
            ],
            points,
        };
        for name in ["p.png", "p.svg"] {
            let out = dir.path().join(name);
            pareto_figure(&chart, &out).expect("draws");
            assert!(std::fs::metadata(&out).expect("written").len() > 1000);
        }
    }
}
