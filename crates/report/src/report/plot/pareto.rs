//! The trade-off figure of `herdsim tune`: one panel per quality metric
//! (the objective, the duplicate rate, the wasted-inference rate, ...)
//! against the p95 time to first response, every evaluated candidate as a
//! dot, the Pareto front (no other candidate is both faster and better) as
//! a step line, the latency budget as a dashed rule with the region beyond
//! it shaded, the current settings and the recommendation marked with
//! their 95% confidence intervals on both axes.

use super::draw::{
    self, Axes, BLUE, BROWN, GREEN, Header, LIGHT_GREY, LegendEntry, ORANGE, PURPLE, Plot, SKY,
    Shape, Swatch, Ticks, VERMILLION, de,
};
use super::layout::{self, HeaderRows};
use super::output::{self, Figure, Format};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use std::path::Path;

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
    /// Its group in [`ParetoChart::groups`] (the scheme it ran under,
    /// with `tune --schemes`), if any.
    pub group: Option<usize>,
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
    /// The legend's words for the recommendation (default: "recommended
    /// (95% CI)"), e.g. how many replications its mean is over.
    pub chosen_label: Option<String>,
    /// Names of the groups the points belong to (`tune --schemes`: one per
    /// scheme, `scheme open`): each drawn in its own colour and shape, with
    /// a legend entry. Empty: every candidate alike.
    pub groups: Vec<String>,
}

/// The colours and shapes of the groups, in order (then round again). The
/// front's green, the current settings' orange and the recommendation's
/// vermillion are left out; the shapes tell groups apart in grey too.
const GROUP_STYLES: [(RGBColor, Shape); 4] = [
    (BLUE, Shape::Circle),
    (PURPLE, Shape::TriangleDown),
    (BROWN, Shape::Square),
    (SKY, Shape::Cross),
];

/// The colour and shape of a candidate of `group`.
fn group_style(group: Option<usize>) -> (RGBColor, Shape) {
    group.map_or((BLUE, Shape::Circle), |g| {
        GROUP_STYLES[g % GROUP_STYLES.len()]
    })
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

/// [`pareto_figure`] drawn in memory as SVG, by the same drawing code:
/// the SVG text. `herdsim ui` shows it; nothing is written.
pub fn pareto_svg(chart: &ParetoChart) -> anyhow::Result<String> {
    output::ensure_fonts()?;
    let bytes = output::encode(Format::Svg, pareto_size(chart.panels.len()), chart)?;
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("the SVG is not UTF-8"))
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

/// Where a panel's points go: the scales and ranges of its axes.
#[derive(Debug, Clone, PartialEq)]
struct Frame {
    /// Factor from ms to the x unit, and the unit's name.
    xs: f64,
    xunit: &'static str,
    /// Factor from the metric to the y axis (100 for percent).
    ys: f64,
    x: (f64, f64),
    y: (f64, f64),
    /// Candidates above the top of the y axis (drawn on its edge).
    above: usize,
}

impl Frame {
    /// The frame of panel `panel`: every candidate and the budget in x, the
    /// region around the recommendation and the current settings in y.
    fn of(chart: &ParetoChart, panel: usize) -> Frame {
        let finite: Vec<&ParetoPoint> = chart
            .points
            .iter()
            .filter(|p| p.x_ms.0.is_finite() && p.ys.get(panel).is_some_and(|y| y.0.is_finite()))
            .collect();
        let x_max_raw = finite
            .iter()
            .map(|p| p.x_ms.0 + p.x_ms.1)
            .chain(chart.budget_ms)
            .fold(f64::NEG_INFINITY, f64::max);
        let (xs, xunit) = layout::time_unit(x_max_raw);
        let ys = if chart.panels[panel].percent {
            100.0
        } else {
            1.0
        };
        let (mut x0, mut x1) = finite
            .iter()
            .map(|p| ((p.x_ms.0 - p.x_ms.1) * xs, (p.x_ms.0 + p.x_ms.1) * xs))
            .chain(chart.budget_ms.map(|b| (b * xs, b * xs)))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (lo, hi)| {
                (a.min(lo), b.max(hi))
            });
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        let pad = ((x1 - x0) * 0.06).max(x1.abs() * 0.01).max(1e-6);
        let y_hi = finite
            .iter()
            .map(|p| (p.ys[panel].0 + p.ys[panel].1) * ys)
            .fold(0.0_f64, f64::max);
        // Rates and the objective are never negative: a CI reaching below
        // zero is cut at the axis.
        let y0 = finite
            .iter()
            .map(|p| p.ys[panel].0 * ys)
            .fold(0.0_f64, f64::min);
        // Focus on the region around the recommendation and the current
        // settings when far worse candidates would squash it; those are
        // drawn on the top edge.
        let top = match y_focus(&chart.points, panel).map(|c| c * ys) {
            Some(c) if y_hi > c * 1.2 => c,
            _ => y_hi,
        };
        let mut y1 = top + (top - y0) * 0.08;
        if y1 - y0 < 1e-12 {
            y1 = y0 + if ys == 100.0 { 1.0 } else { 0.01 };
        }
        let above = finite.iter().filter(|p| p.ys[panel].0 * ys > y1).count();
        Frame {
            xs,
            xunit,
            ys,
            x: ((x0 - pad).max(0.0), x1 + pad),
            y: (y0, y1),
            above,
        }
    }

    /// Where point `p` goes in panel `panel`, if it has a value there.
    fn at(&self, p: &ParetoPoint, panel: usize) -> Option<(f64, f64)> {
        let y = p.ys.get(panel)?;
        (p.x_ms.0.is_finite() && y.0.is_finite()).then_some((p.x_ms.0 * self.xs, y.0 * self.ys))
    }
}

impl ParetoChart {
    fn legend(&self) -> Vec<LegendEntry> {
        let budget = self.budget_ms.is_some();
        let mark = Swatch::Mark;
        let has = |m: Mark| self.points.iter().any(|p| p.mark == m);
        let candidate = if budget {
            "candidate within the budget"
        } else {
            "candidate"
        };
        let front = Swatch::Line(GREEN, Shape::Circle, false);
        let budget_rule = Swatch::Rule(VERMILLION, true);
        // With groups, one entry per group that has a point, in its colour.
        let groups: Vec<LegendEntry> = self
            .groups
            .iter()
            .enumerate()
            .filter(|(g, _)| self.points.iter().any(|p| p.group == Some(*g)))
            .map(|(g, name)| {
                let (color, shape) = group_style(Some(g));
                LegendEntry::new(mark(shape, color, true), name.as_str())
            })
            .collect();
        let grouped = !groups.is_empty();
        let over = if grouped {
            "over the budget (grey, same shapes)"
        } else {
            "over the budget"
        };
        let entries: Vec<LegendEntry> = [
            (!grouped, mark(Shape::Circle, BLUE, true), candidate),
            (budget, mark(Shape::Circle, LIGHT_GREY, false), over),
            (true, front, "Pareto front"),
            (
                has(Mark::Current),
                mark(Shape::Square, ORANGE, true),
                "current settings",
            ),
            (
                has(Mark::Chosen),
                mark(Shape::Diamond, VERMILLION, true),
                self.chosen_label
                    .as_deref()
                    .unwrap_or("recommended (95% CI)"),
            ),
            (budget, budget_rule, "p95 budget"),
        ]
        .into_iter()
        .filter(|e| e.0)
        .map(|(_, swatch, label)| LegendEntry::new(swatch, label))
        .collect();
        groups.into_iter().chain(entries).collect()
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
        let f = Frame::of(self, panel);
        let title = layout::capitalize(&axis.label);
        let caption = match f.above {
            0 => title,
            n => format!("{title} ({n} off the scale, at the top)"),
        };
        let axes = Axes {
            caption: Some((caption, draw::bold(21.0 * s))),
            margins: Axes::margins(10.0 * s, 24.0 * s),
            label_areas: ((56.0 * s) as u32, (80.0 * s) as u32),
            x: f.x,
            y: f.y,
            x_ticks: Ticks::Linear(7),
            y_ticks: Ticks::Linear(7),
            x_desc: Some(format!("p95 time to first response ({})", f.xunit)),
            y_desc: Some(if axis.percent {
                format!("{} (%)", axis.label)
            } else {
                axis.label.clone()
            }),
            fonts: (15.0 * s, 17.0 * s),
        };
        let chart = draw::axes(area, &axes)?;
        let pa = chart.plotting_area();
        if let Some(b) = self.budget_ms {
            draw_budget(pa, &f, b * f.xs, s)?;
        }
        self.draw_candidates(pa, &f, panel, s)?;
        self.draw_front(pa, &f, panel, s)?;
        self.draw_marked(pa, &f, panel, s)
    }

    /// Every candidate: blue within the budget (with groups, its group's
    /// colour and shape), grey rings over it, and a triangle on the top
    /// edge when off the scale.
    fn draw_candidates<DB: DrawingBackend>(
        &self,
        pa: &Plot<DB>,
        f: &Frame,
        panel: usize,
        s: f64,
    ) -> anyhow::Result<()> {
        let r = (4.0 * s).round().max(2.0) as i32;
        for p in self.points.iter().filter(|p| p.mark == Mark::Candidate) {
            let Some((x, y)) = f.at(p, panel) else {
                continue;
            };
            let (base, own) = group_style(p.group);
            let shape = if y > f.y.1 { Shape::TriangleUp } else { own };
            let color = if p.feasible {
                base.mix(0.7)
            } else {
                LIGHT_GREY.to_rgba()
            };
            draw::marker(pa, (x, y.min(f.y.1)), shape, r, color, p.feasible)?;
        }
        Ok(())
    }

    /// The Pareto front, as a step line.
    fn draw_front<DB: DrawingBackend>(
        &self,
        pa: &Plot<DB>,
        f: &Frame,
        panel: usize,
        s: f64,
    ) -> anyhow::Result<()> {
        let mut line: Vec<(f64, f64)> = Vec::new();
        for i in front(&self.points, panel) {
            let Some((x, y)) = f.at(&self.points[i], panel) else {
                continue;
            };
            if let Some(&(_, prev_y)) = line.last() {
                line.push((x, prev_y));
            }
            line.push((x, y.min(f.y.1)));
        }
        if line.is_empty() {
            return Ok(());
        }
        let width = (2.5 * s).round().max(1.0) as u32;
        draw::path(pa, line, GREEN.stroke_width(width))
    }

    /// The current settings, then the recommendation on top, with their
    /// CIs on both axes.
    fn draw_marked<DB: DrawingBackend>(
        &self,
        pa: &Plot<DB>,
        f: &Frame,
        panel: usize,
        s: f64,
    ) -> anyhow::Result<()> {
        for (mark, shape, color, size) in [
            (Mark::Current, Shape::Square, ORANGE, 8.0),
            (Mark::Chosen, Shape::Diamond, VERMILLION, 9.0),
        ] {
            for p in self.points.iter().filter(|p| p.mark == mark) {
                let Some((x, y)) = f.at(p, panel) else {
                    continue;
                };
                let (xc, yc) = (p.x_ms.1 * f.xs, p.ys[panel].1 * f.ys);
                let st = color.stroke_width((2.0 * s).round().max(1.0) as u32);
                draw::error_bar(pa, (x - xc, y), (x + xc, y), 0, st)?;
                let (lo, hi) = ((y - yc).max(f.y.0), (y + yc).min(f.y.1));
                draw::error_bar(pa, (x, lo), (x, hi), 0, st)?;
                let r = (size * s).round() as i32;
                draw::marker(pa, (x, y), shape, r, color.to_rgba(), true)?;
            }
        }
        Ok(())
    }
}

/// The region over the budget shaded, and the budget (at `bx` on the x
/// axis) as a dashed rule with its value.
fn draw_budget<DB: DrawingBackend>(
    pa: &Plot<DB>,
    f: &Frame,
    bx: f64,
    s: f64,
) -> anyhow::Result<()> {
    let ((x0, x1), (y0, y1)) = (f.x, f.y);
    if bx < x1 {
        let shade = LIGHT_GREY.mix(0.12).filled();
        pa.draw(&Rectangle::new([(bx.max(x0), y0), (x1, y1)], shade))
            .map_err(de)?;
    }
    if bx < x0 || bx > x1 {
        return Ok(());
    }
    let st = VERMILLION.stroke_width((2.0 * s).round().max(1.0) as u32);
    let (dash, gap) = ((9.0 * s) as i32, (6.0 * s) as i32);
    draw::dashed(pa, vec![(bx, y0), (bx, y1)], (dash, gap), st)?;
    let dec = layout::tick_decimals(x0, x1, 7);
    let label = format!("budget {} {}", layout::tick(bx, dec + 1), f.xunit);
    let st = draw::font(15.0 * s).color(&VERMILLION);
    let offset = (-(6.0 * s) as i32, (18.0 * s) as i32);
    draw::text(pa, (bx, y1), offset, label, &st, (HPos::Right, VPos::Top))
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

impl Figure for ParetoChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let s = layout::scale_factor(root.dim_in_pixel(), pareto_size(self.panels.len()));
        let legend = self.legend();
        let body = draw::header(
            root,
            &Header {
                title: &self.title,
                subtitle: &self.subtitle,
                legend: &legend,
                sizes: (28.0 * s, 17.0 * s, 18.0 * s),
                rows: HeaderRows::scaled(s, 38.0, 26.0),
            },
        )?;
        let cells = draw::cells(&body, s, (1, self.panels.len().max(1)));
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
            group: None,
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
                    group: Some(i as usize % 3),
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
            chosen_label: None,
            groups: vec![
                "scheme open".into(),
                "scheme owner".into(),
                "scheme mentions".into(),
            ],
        };
        for name in ["p.png", "p.svg"] {
            let out = dir.path().join(name);
            pareto_figure(&chart, &out).expect("draws");
            assert!(std::fs::metadata(&out).expect("written").len() > 1000);
        }
        // Issue 47: with groups (tune --schemes), the legend says which is
        // which, one entry per group in its own colour and shape, instead
        // of one for every candidate.
        let labels: Vec<String> = chart.legend().into_iter().map(|e| e.label).collect();
        assert_eq!(
            &labels[..3],
            ["scheme open", "scheme owner", "scheme mentions"]
        );
        assert!(
            !labels.iter().any(|l| l.starts_with("candidate")),
            "{labels:?}"
        );
        let styles: Vec<(RGBColor, Shape)> = (0..3).map(|g| group_style(Some(g))).collect();
        assert!(styles[0] != styles[1] && styles[1] != styles[2] && styles[0] != styles[2]);
    }

    #[test]
    fn frame_holds_the_budget_and_focuses_on_the_recommendation() {
        let mut points: Vec<ParetoPoint> = (0..10)
            .map(|i| pt(3000.0 + 1000.0 * f64::from(i), 0.001 * f64::from(i + 1)))
            .collect();
        points[9].ys[0].0 = 0.9; // far worse than the rest
        points[2].mark = Mark::Chosen;
        let chart = ParetoChart {
            title: String::new(),
            subtitle: String::new(),
            budget_ms: Some(20000.0),
            panels: vec![ParetoAxis {
                label: "duplicate rate".into(),
                percent: true,
            }],
            points,
            chosen_label: None,
            groups: Vec::new(),
        };
        let f = Frame::of(&chart, 0);
        assert_eq!((f.xs, f.xunit, f.ys), (0.001, "s", 100.0));
        // 3 s to 20 s (the budget), padded by 6%.
        assert!(
            (f.x.0 - 1.98).abs() < 1e-9 && (f.x.1 - 21.02).abs() < 1e-9,
            "{f:?}"
        );
        // Three times the recommendation's 0.3%, plus 8% headroom.
        assert_eq!(f.y.0, 0.0);
        assert!((f.y.1 - 0.972).abs() < 1e-9, "{f:?}");
        assert_eq!(f.above, 1);
        assert_eq!(f.at(&chart.points[2], 0), Some((5.0, 0.3)));
        assert_eq!(f.at(&chart.points[2], 1), None);
    }
}
