//! Metric panels from a `summary.csv`: the standard comparison grid and any
//! selection of metrics, against a swept key, one series per policy (or per
//! another key), with 95% confidence bands or whiskers.

use super::bad;
use super::draw::{self, LegendEntry, Shape, Swatch, de};
use super::output::Figure;
use super::summary::Summary;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The metrics of the standard comparison figure, in panel order.
pub const STANDARD_METRICS: [&str; 4] = [
    "duplicate_rate",
    "wasted_inference_rate",
    "ttfr_p95_ms",
    "unanswered_rate",
];

/// The standard figure's metrics for this summary: [`STANDARD_METRICS`],
/// except that a panel of unanswered messages that would be flat at zero
/// (no faults) gives its place to the share of messages only one agent
/// started on, which is where floor control still differs then.
pub fn standard_metrics(summary: &Summary) -> Vec<String> {
    let all_zero = |m: &str| {
        summary.metric_cols(m).is_some_and(|(c, _)| {
            summary
                .rows
                .iter()
                .all(|r| r.values[c] == 0.0 || r.values[c].is_nan())
        })
    };
    STANDARD_METRICS
        .iter()
        .map(|m| {
            if *m == "unanswered_rate"
                && all_zero(m)
                && summary.metric_cols("single_starter_rate").is_some()
            {
                "single_starter_rate".to_string()
            } else {
                m.to_string()
            }
        })
        .collect()
}

/// What to plot from a summary.
#[derive(Debug, Clone, Default)]
pub struct PlotSpec {
    /// The x axis: a swept key (dotted name, or a unique last part of one),
    /// or `policy`/`scenario`. Default: the swept key with the most distinct
    /// values; with none that varies, one bar per series.
    pub x: Option<String>,
    /// Metric names (with or without `_mean`). Empty: [`STANDARD_METRICS`].
    pub metrics: Vec<String>,
    /// The column that makes the series (one colour each). Default `policy`.
    /// Other columns that vary (besides x) split series further, shown by
    /// marker shape and dashes.
    pub by: Option<String>,
    /// Figure title. Default: names the scenario and the x key.
    pub title: Option<String>,
    /// Pixel size. Default: [`figure_size`] of the number of metrics.
    pub size: Option<(u32, u32)>,
    /// How a numeric x key is spaced.
    pub x_scale: XScale,
}

/// Spacing of a numeric x axis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XScale {
    /// Linear, unless the sweep points are very unevenly spaced (the
    /// largest gap at least 10 times the smallest, e.g. 0, 50, 500, 5000):
    /// then evenly spaced.
    #[default]
    Auto,
    Linear,
    /// One equal step per sweep point, labelled with its value.
    Even,
}

/// Default pixel size of a figure with `n` metric panels.
pub fn figure_size(n: usize) -> (u32, u32) {
    let (rows, cols) = grid(n);
    match n {
        0 | 1 => (1200, 800),
        2 => (1600, 700),
        3 | 4 => (1600, 1200),
        _ => (cols as u32 * 700, 140 + rows as u32 * 530),
    }
}

fn grid(n: usize) -> (usize, usize) {
    match n {
        0 | 1 => (1, 1),
        2 => (1, 2),
        3 | 4 => (2, 2),
        _ => (n.div_ceil(3), 3),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// A fraction 0..1, shown as %.
    Percent,
    /// Milliseconds, shown in s when large.
    Millis,
    Plain,
}

#[derive(Debug, Clone)]
struct MetricInfo {
    mean_col: usize,
    ci_col: Option<usize>,
    title: String,
    /// Y axis description without its unit.
    axis: String,
    kind: Kind,
}

fn describe(name: &str) -> (String, String, Kind) {
    let (t, a, k) = match name {
        "duplicate_rate" => (
            "Duplicate responses",
            "messages with 2+ replies",
            Kind::Percent,
        ),
        "responses_per_msg" => ("Responses per message", "replies per message", Kind::Plain),
        "unanswered_rate" => (
            "Unanswered messages",
            "messages with no reply",
            Kind::Percent,
        ),
        "wasted_inference_rate" => (
            "Wasted inference time",
            "inference time wasted",
            Kind::Percent,
        ),
        "wasted_inference_count_rate" => ("Wasted inferences", "inferences wasted", Kind::Percent),
        "ttfr_p50_ms" => (
            "Median time to first response",
            "p50 time to first reply",
            Kind::Millis,
        ),
        "ttfr_p95_ms" => (
            "p95 time to first response",
            "p95 time to first reply",
            Kind::Millis,
        ),
        "ttfr_p99_ms" => (
            "p99 time to first response",
            "p99 time to first reply",
            Kind::Millis,
        ),
        "single_starter_rate" => (
            "Messages one agent started on",
            "messages with exactly one starter",
            Kind::Percent,
        ),
        "starters_per_msg" => (
            "Agents starting per message",
            "inferences started per message",
            Kind::Plain,
        ),
        "claims" => ("Claims sent", "RESPONDING_TO per run", Kind::Plain),
        "yields" => ("YIELDs sent", "YIELDs per run", Kind::Plain),
        "expired_claims" => ("Expired claims", "claims expired per run", Kind::Plain),
        "relayed" => ("Server fan-out", "messages relayed per run", Kind::Plain),
        "lost" => ("Lost messages", "messages lost per run", Kind::Plain),
        "events" => ("Simulation events", "events per run", Kind::Plain),
        other => {
            let kind = if other.ends_with("_rate") {
                Kind::Percent
            } else if other.ends_with("_ms") {
                Kind::Millis
            } else {
                Kind::Plain
            };
            return (other.to_string(), other.replace('_', " "), kind);
        }
    };
    (t.to_string(), a.to_string(), k)
}

#[derive(Debug, Clone)]
enum XAxis {
    /// No x key: one bar per series.
    Bars,
    Numeric {
        col: usize,
    },
    /// Numeric sweep points drawn one equal step apart.
    Even {
        col: usize,
        vals: Vec<f64>,
        labels: Vec<String>,
    },
    Categorical {
        col: usize,
        cats: Vec<String>,
    },
}

impl XAxis {
    /// Series are lines with bands (a numeric key), not points with whiskers.
    fn lines(&self) -> bool {
        matches!(self, XAxis::Numeric { .. } | XAxis::Even { .. })
    }
}

#[derive(Debug, Clone)]
struct Series {
    label: String,
    color: RGBColor,
    shape: Shape,
    dashed: bool,
    rows: Vec<usize>,
}

/// A figure of metric panels, ready to draw.
pub(crate) struct PanelFigure<'a> {
    summary: &'a Summary,
    x: XAxis,
    x_name: String,
    series: Vec<Series>,
    metrics: Vec<MetricInfo>,
    title: String,
    subtitle: String,
}

impl<'a> PanelFigure<'a> {
    pub fn new(summary: &'a Summary, spec: &PlotSpec) -> anyhow::Result<Self> {
        let file = summary.path.display().to_string();
        let columns = summary.key_names.join(", ");
        // Metrics.
        let names: Vec<String> = if spec.metrics.is_empty() {
            standard_metrics(summary)
        } else {
            spec.metrics.iter().map(|m| m.trim().to_string()).collect()
        };
        let mut metrics = Vec::new();
        for name in &names {
            let base = name.strip_suffix("_mean").unwrap_or(name);
            let (mean_col, ci_col) = summary.metric_cols(base).ok_or_else(|| {
                bad(format!(
                    "{file}: no metric `{base}` (no column `{base}_mean`); metrics in the file: {}",
                    summary.metrics().join(", ")
                ))
            })?;
            let (title, axis, kind) = describe(base);
            metrics.push(MetricInfo {
                mean_col,
                ci_col,
                title,
                axis,
                kind,
            });
        }
        if metrics.is_empty() {
            return Err(bad(format!("{file}: no metric to plot")));
        }

        // Series key.
        let by_name = spec.by.as_deref().unwrap_or("policy");
        let by = summary.key_col(by_name).ok_or_else(|| {
            bad(format!(
                "{file}: --by: no column `{by_name}` (columns: {columns})"
            ))
        })?;
        let varies = |c: usize| summary.distinct(c).len() > 1;

        // X axis.
        let x_col = match spec.x.as_deref() {
            Some(name) => Some(summary.key_col(name).ok_or_else(|| {
                bad(format!(
                    "{file}: --x: no column `{name}` (columns: {columns})"
                ))
            })?),
            None => {
                // The swept key with the most distinct values, numeric first.
                let mut best: Option<(bool, usize, usize)> = None;
                for c in summary.param_cols() {
                    let n = summary.distinct(c).len();
                    if n < 2 {
                        continue;
                    }
                    let cand = (summary.is_numeric(c), n, c);
                    let better = match best {
                        None => true,
                        Some((bn, bc, _)) => (cand.0, cand.1) > (bn, bc),
                    };
                    if better {
                        best = Some(cand);
                    }
                }
                best.map(|b| b.2)
            }
        };
        if x_col == Some(by) {
            return Err(bad(format!(
                "{file}: --x and --by name the same column `{}`",
                summary.key_names[by]
            )));
        }
        let x = match x_col {
            None => XAxis::Bars,
            Some(c) if summary.is_numeric(c) => {
                // Distinct values in order, with the text of their first row.
                let mut pts: Vec<(f64, String)> = Vec::new();
                for r in &summary.rows {
                    let v = r.keys[c].parse::<f64>().unwrap_or(f64::NAN);
                    if !pts.iter().any(|p| p.0 == v) {
                        pts.push((v, r.keys[c].clone()));
                    }
                }
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let gaps: Vec<f64> = pts.windows(2).map(|w| w[1].0 - w[0].0).collect();
                let min_gap = gaps.iter().copied().fold(f64::INFINITY, f64::min);
                let max_gap = gaps.iter().copied().fold(0.0, f64::max);
                let uneven = gaps.len() >= 2 && max_gap >= 10.0 * min_gap;
                let even = match spec.x_scale {
                    XScale::Even => true,
                    XScale::Linear => false,
                    XScale::Auto => uneven,
                };
                if even {
                    XAxis::Even {
                        col: c,
                        vals: pts.iter().map(|p| p.0).collect(),
                        labels: pts.into_iter().map(|p| p.1).collect(),
                    }
                } else {
                    XAxis::Numeric { col: c }
                }
            }
            Some(c) => XAxis::Categorical {
                col: c,
                cats: summary.distinct(c),
            },
        };
        let x_name = x_col
            .map(|c| summary.key_names[c].clone())
            .unwrap_or_default();

        // Other columns that vary split the series further.
        let extras: Vec<usize> = (0..summary.key_names.len())
            .filter(|&c| c != by && Some(c) != x_col && varies(c))
            .collect();
        let by_values = summary.distinct(by);
        let by_is_name = by == summary.policy_col || Some(by) == summary.scenario_col;
        let colors = draw::assign_colors(&by_values, by == summary.policy_col);
        let mut combos: Vec<Vec<String>> = Vec::new();
        let mut series: Vec<Series> = Vec::new();
        let mut keys: Vec<(String, Vec<String>)> = Vec::new();
        for (i, row) in summary.rows.iter().enumerate() {
            let bv = row.keys[by].clone();
            let combo: Vec<String> = extras.iter().map(|&c| row.keys[c].clone()).collect();
            let key = (bv.clone(), combo.clone());
            if let Some(k) = keys.iter().position(|k| *k == key) {
                series[k].rows.push(i);
                continue;
            }
            let ci = match combos.iter().position(|c| *c == combo) {
                Some(p) => p,
                None => {
                    combos.push(combo.clone());
                    combos.len() - 1
                }
            };
            let bi = by_values.iter().position(|v| *v == bv).unwrap_or(0);
            let mut label = if by_is_name {
                bv.clone()
            } else {
                format!("{}={bv}", summary.key_names[by])
            };
            for (j, &c) in extras.iter().enumerate() {
                label.push_str(&format!(", {}={}", summary.key_names[c], combo[j]));
            }
            keys.push(key);
            series.push(Series {
                label,
                color: colors[bi],
                shape: Shape::nth(ci),
                dashed: ci % 2 == 1,
                rows: vec![i],
            });
        }

        // Titles.
        let standard = spec.metrics.is_empty()
            || names
                .iter()
                .map(|n| n.strip_suffix("_mean").unwrap_or(n))
                .eq(STANDARD_METRICS.iter().copied());
        let what = if standard && names.iter().any(|n| n == "single_starter_rate") {
            "duplicates, wasted inference, latency and single starters".to_string()
        } else if standard {
            "duplicates, wasted inference, latency and unanswered messages".to_string()
        } else {
            let t: Vec<String> = metrics.iter().map(|m| m.title.to_lowercase()).collect();
            t.join(", ")
        };
        let what = match &x {
            XAxis::Bars => {
                if standard {
                    "floor-control policies compared".to_string()
                } else {
                    what
                }
            }
            _ => format!("{what} vs {x_name}"),
        };
        let title = match (&spec.title, summary.scenario_label()) {
            (Some(t), _) => t.clone(),
            (None, Some(s)) => format!("{s}: {what}"),
            (None, None) => capitalize(&what),
        };
        let interval = if x.lines() {
            "shaded bands: 95% confidence interval of the mean"
        } else {
            "whiskers: 95% confidence interval of the mean"
        };
        let subtitle = match summary.reps_label() {
            Some(r) => format!("Mean over {r} replications per point; {interval}"),
            None => format!("Mean over replications; {interval}"),
        };
        Ok(PanelFigure {
            summary,
            x,
            x_name,
            series,
            metrics,
            title,
            subtitle,
        })
    }

    pub fn metric_count(&self) -> usize {
        self.metrics.len()
    }

    fn legend(&self) -> Vec<LegendEntry> {
        self.series
            .iter()
            .map(|s| LegendEntry {
                swatch: Swatch::Line {
                    color: s.color,
                    shape: s.shape,
                    dashed: s.dashed,
                },
                label: s.label.clone(),
            })
            .collect()
    }

    /// x position of a row.
    fn x_of(&self, row: usize, series_index: usize) -> f64 {
        let keys = &self.summary.rows[row].keys;
        match &self.x {
            XAxis::Bars => series_index as f64,
            XAxis::Numeric { col } => keys[*col].parse::<f64>().unwrap_or(f64::NAN),
            XAxis::Even { col, vals, .. } => {
                let v = keys[*col].parse::<f64>().unwrap_or(f64::NAN);
                vals.iter()
                    .position(|&u| u == v)
                    .map_or(f64::NAN, |i| i as f64)
            }
            XAxis::Categorical { col, cats } => {
                let k = cats.iter().position(|c| *c == keys[*col]).unwrap_or(0) as f64;
                let n = self.series.len() as f64;
                if n > 1.0 {
                    let width = 0.5_f64.min(0.16 * n);
                    k + (series_index as f64 / (n - 1.0) - 0.5) * width
                } else {
                    k
                }
            }
        }
    }

    fn x_range(&self) -> (f64, f64) {
        match &self.x {
            XAxis::Bars => (-0.6, self.series.len() as f64 - 0.4),
            XAxis::Categorical { cats, .. } => (-0.5, cats.len() as f64 - 0.5),
            XAxis::Even { vals, .. } => {
                let pad = if vals.len() > 1 { 0.25 } else { 0.5 };
                (-pad, vals.len() as f64 - 1.0 + pad)
            }
            XAxis::Numeric { col } => {
                let vals: Vec<f64> = self
                    .summary
                    .rows
                    .iter()
                    .filter_map(|r| r.keys[*col].parse::<f64>().ok())
                    .collect();
                let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if !lo.is_finite() {
                    (0.0, 1.0)
                } else if lo == hi {
                    let pad = (lo.abs() * 0.1).max(1.0);
                    (lo - pad, hi + pad)
                } else {
                    let pad = (hi - lo) * 0.04;
                    (lo - pad, hi + pad)
                }
            }
        }
    }

    /// Points of one series for a metric: (x, mean, mean - ci, mean + ci),
    /// scaled for display, sorted by x, rows with no mean left out.
    fn points(&self, si: usize, m: &MetricInfo, scale: f64) -> Vec<Pt> {
        let mut pts: Vec<Pt> = self.series[si]
            .rows
            .iter()
            .filter_map(|&r| {
                let row = &self.summary.rows[r];
                let mean = row.values[m.mean_col];
                let ci = m.ci_col.map(|c| row.values[c]).unwrap_or(0.0);
                let ci = if ci.is_finite() { ci.abs() } else { 0.0 };
                let x = self.x_of(r, si);
                let (mean, ci) = (mean * scale, ci * scale);
                (mean.is_finite() && x.is_finite()).then_some((x, mean, mean - ci, mean + ci))
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts
    }

    fn x_desc(&self) -> String {
        match &self.x {
            XAxis::Bars => String::new(),
            XAxis::Even { .. } => {
                format!("{}, sweep points evenly spaced", with_unit(&self.x_name))
            }
            _ => with_unit(&self.x_name),
        }
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        m: &MetricInfo,
        s: f64,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        // Units and scale.
        let raw_max = self
            .summary
            .rows
            .iter()
            .map(|r| r.values[m.mean_col] + m.ci_col.map(|c| r.values[c]).unwrap_or(0.0))
            .filter(|v| v.is_finite())
            .fold(f64::NEG_INFINITY, f64::max);
        let (scale, unit) = match m.kind {
            Kind::Percent => (100.0, " (%)"),
            Kind::Millis if raw_max >= 2000.0 => (0.001, " (s)"),
            Kind::Millis => (1.0, " (ms)"),
            Kind::Plain => (1.0, ""),
        };
        let mut all: Vec<Vec<Pt>> = (0..self.series.len())
            .map(|si| self.points(si, m, scale))
            .collect();
        let lo = all
            .iter()
            .flatten()
            .map(|p| p.2)
            .fold(f64::INFINITY, f64::min);
        let hi = all
            .iter()
            .flatten()
            .map(|p| p.3)
            .fold(f64::NEG_INFINITY, f64::max);
        let empty = !lo.is_finite();
        let bars = matches!(self.x, XAxis::Bars);
        // A log axis when the series live on different scales (one policy
        // near 80%, another near 0.1%): on a linear axis the small one is a
        // flat line at zero and its trend, the thing a reader came to see,
        // is invisible.
        let log = if bars || empty || m.kind == Kind::Millis {
            None
        } else {
            LogAxis::choose(&all)
        };
        if let Some(l) = &log {
            for p in all.iter_mut().flatten() {
                *p = (p.0, l.pos(p.1), l.pos(p.2), l.pos(p.3));
            }
        }
        let (y0, y1) = if let Some(l) = &log {
            (l.zero_row(), l.top)
        } else if empty {
            (0.0, 1.0)
        } else {
            let min_mean = all
                .iter()
                .flatten()
                .map(|p| p.1)
                .fold(f64::INFINITY, f64::min);
            // Rates and counts keep zero on the axis; a latency that never
            // comes near zero gets the room for its differences instead
            // (bars always start at zero).
            let y0 = if min_mean < 0.0 {
                lo - (hi - lo) * 0.08
            } else if m.kind == Kind::Millis && !bars && lo > 0.4 * hi {
                let step = draw::tick_step(0.0, hi - lo, 4);
                ((lo - (hi - lo) * 0.1) / step).floor() * step
            } else {
                0.0
            };
            let mut y1 = hi + (hi - y0).abs() * 0.1;
            if m.kind == Kind::Percent && hi <= 100.0 {
                y1 = y1.min(100.0);
            }
            if y1 - y0 < 1e-9 {
                y1 = y0
                    + if m.kind == Kind::Percent {
                        1.0
                    } else {
                        1.0_f64.max(y0.abs() * 0.1)
                    };
            }
            (y0, y1)
        };
        let (x0, x1) = self.x_range();
        // Ticks drawn by hand at each category or sweep point.
        let categorical = !matches!(self.x, XAxis::Numeric { .. });
        let lines = self.x.lines();

        let tick_font = draw::font(16.0 * s).color(&draw::MUTED);
        let desc_font = draw::font(18.0 * s);
        let cat_labels: Vec<String> = match &self.x {
            XAxis::Bars => self.series.iter().map(|s| s.label.clone()).collect(),
            XAxis::Categorical { cats, .. } => cats.clone(),
            XAxis::Even { labels, .. } => labels.clone(),
            XAxis::Numeric { .. } => Vec::new(),
        };
        // Category labels stagger over two rows when they would collide,
        // and are shortened when even that is not enough.
        let (aw, _) = area.dim_in_pixel();
        let slot = (aw as f64 - 120.0 * s) / cat_labels.len().max(1) as f64;
        let widest = cat_labels
            .iter()
            .map(|l| draw::text_width(l, &tick_font))
            .max()
            .unwrap_or(0);
        let stagger = categorical && cat_labels.len() > 1 && widest as f64 > slot * 0.9;
        let max_label = if stagger {
            (slot * 1.8) as i32
        } else {
            (slot * 0.95).max(40.0) as i32
        };
        let line_h = (tick_font.font.get_size() * 1.3) as u32;
        let x_label_area = (58.0 * s) as u32 + if stagger { line_h } else { 0 };

        let mut builder = ChartBuilder::on(area);
        if self.metrics.len() > 1 {
            // A single panel is named by the figure title.
            builder.caption(&m.title, draw::bold(22.0 * s));
        }
        let mut chart = builder
            .margin((10.0 * s) as u32)
            .margin_right((26.0 * s) as u32)
            .x_label_area_size(x_label_area)
            .y_label_area_size((84.0 * s) as u32)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(de)?;
        let y_dec = draw::decimals_for(draw::tick_step(y0, y1, Y_LABELS));
        let x_dec = draw::decimals_for(draw::tick_step(x0, x1, X_LABELS));
        let log_fmt = log.clone();
        let yfmt = move |v: &f64| match &log_fmt {
            Some(l) => l.label(*v),
            None => draw::tick(*v, y_dec),
        };
        let xfmt = move |v: &f64| draw::tick(*v, x_dec);
        let y_desc = if log.is_some() {
            format!("{}{unit}, log scale", m.axis)
        } else {
            format!("{}{unit}", m.axis)
        };
        let y_labels = match &log {
            // One label per decade: the axis spans whole decades.
            Some(l) => (l.top - l.zero_row()).round() as usize + 1,
            None => Y_LABELS,
        };
        let x_desc = self.x_desc();
        {
            let mut mesh = chart.configure_mesh();
            mesh.y_desc(y_desc)
                .y_labels(y_labels)
                .max_light_lines(1)
                .y_label_formatter(&yfmt)
                .label_style(tick_font.clone())
                .axis_desc_style(desc_font.clone())
                .bold_line_style(draw::GRID_BOLD.stroke_width(1))
                .light_line_style(draw::GRID.stroke_width(1))
                .axis_style(draw::MUTED.stroke_width(1));
            if categorical {
                mesh.disable_x_mesh().x_labels(0);
                if !bars {
                    mesh.x_desc(x_desc.clone());
                }
            } else {
                mesh.x_desc(x_desc.clone())
                    .x_labels(X_LABELS)
                    .x_label_formatter(&xfmt);
            }
            mesh.draw().map_err(de)?;
        }

        // Category labels, drawn by hand at each category.
        if categorical {
            let base = area.get_base_pixel();
            for (k, label) in cat_labels.iter().enumerate() {
                let (px, py) = chart.backend_coord(&(k as f64, y0));
                let (px, py) = (px - base.0, py - base.1);
                let label = draw::fit_text(label, &tick_font, max_label);
                // Tick mark.
                area.draw(&PathElement::new(
                    vec![(px, py), (px, py + (5.0 * s) as i32)],
                    draw::MUTED.stroke_width(1),
                ))
                .map_err(de)?;
                let dy = (9.0 * s) as i32
                    + if stagger && k % 2 == 1 {
                        line_h as i32
                    } else {
                        0
                    };
                let st = tick_font.pos(Pos::new(HPos::Center, VPos::Top));
                area.draw(&Text::new(label, (px, py + dy), st))
                    .map_err(de)?;
            }
        }

        if empty {
            let (w, h) = area.dim_in_pixel();
            area.draw(&Text::new(
                "no data",
                (w as i32 / 2, h as i32 / 2),
                desc_font
                    .color(&draw::MUTED)
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(de)?;
            return Ok(());
        }

        let line_w = (2.5 * s).round().max(1.0) as u32;
        let mark_r = (5.0 * s).round().max(2.0) as i32;
        let cap = (6.0 * s).round().max(2.0) as i32;
        let clamp = |v: f64| v.clamp(y0, y1);

        if bars {
            let suffix = match unit {
                " (%)" => "%",
                " (s)" => " s",
                " (ms)" => " ms",
                _ => "",
            };
            for (si, pts) in all.iter().enumerate() {
                let c = self.series[si].color;
                for &(x, mean, lo, hi) in pts {
                    let base = 0.0_f64.clamp(y0, y1);
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(x - 0.32, base), (x + 0.32, clamp(mean))],
                            c.mix(0.85).filled(),
                        )))
                        .map_err(de)?;
                    error_bar(&mut chart, x, clamp(lo), clamp(hi), cap, draw::INK)?;
                    chart
                        .draw_series(std::iter::once(
                            EmptyElement::at((x, clamp(hi)))
                                + Text::new(
                                    format!("{}{suffix}", draw::tick(mean, y_dec + 1)),
                                    (0, -(6.0 * s) as i32),
                                    draw::font(15.0 * s).pos(Pos::new(HPos::Center, VPos::Bottom)),
                                ),
                        ))
                        .map_err(de)?;
                }
            }
            return Ok(());
        }

        // Bands first, then lines, then markers, so nothing hides a line.
        if lines {
            for (si, pts) in all.iter().enumerate() {
                if pts.len() < 2 || pts.iter().all(|p| p.2 == p.1 && p.3 == p.1) {
                    continue;
                }
                let c = self.series[si].color;
                let alpha = (0.5 / self.series.len() as f64).clamp(0.08, 0.2);
                let mut poly: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, clamp(p.3))).collect();
                poly.extend(pts.iter().rev().map(|p| (p.0, clamp(p.2))));
                chart
                    .draw_series(std::iter::once(Polygon::new(poly, c.mix(alpha).filled())))
                    .map_err(de)?;
            }
            for (si, pts) in all.iter().enumerate() {
                let sr = &self.series[si];
                let style = sr.color.stroke_width(line_w);
                let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, clamp(p.1))).collect();
                if sr.dashed {
                    let dash = (10.0 * s) as i32;
                    let gap = (6.0 * s) as i32;
                    chart
                        .draw_series(DashedLineSeries::new(line, dash, gap, style))
                        .map_err(de)?;
                } else {
                    chart
                        .draw_series(LineSeries::new(line, style))
                        .map_err(de)?;
                }
            }
        }
        for (si, pts) in all.iter().enumerate() {
            let sr = &self.series[si];
            for &(x, mean, lo, hi) in pts {
                if !lines || pts.len() < 2 {
                    error_bar(&mut chart, x, clamp(lo), clamp(hi), cap, sr.color)?;
                }
                draw::marker(
                    chart.plotting_area(),
                    (x, clamp(mean)),
                    sr.shape,
                    mark_r,
                    sr.color.to_rgba(),
                    true,
                )?;
            }
        }
        Ok(())
    }
}

/// A point: (x, mean, low end of the CI, high end).
type Pt = (f64, f64, f64, f64);

/// A base-10 log y axis over whole decades, `bottom..top` in log10 units,
/// with a row one decade below `bottom` for zero (and anything a CI takes
/// below the axis), labelled `0`.
#[derive(Debug, Clone, PartialEq)]
struct LogAxis {
    /// log10 of the lowest decade shown.
    bottom: f64,
    /// log10 of the top of the axis.
    top: f64,
}

impl LogAxis {
    /// Decades a log axis may span at most: smaller values go to the zero row.
    const MAX_DECADES: f64 = 5.0;

    /// A log axis when the positive means span a factor of 30 or more
    /// (positive values only; zeros sit on the zero row).
    fn choose(all: &[Vec<Pt>]) -> Option<LogAxis> {
        let means = all.iter().flatten().map(|p| p.1).filter(|v| *v > 0.0);
        let lo = means.clone().fold(f64::INFINITY, f64::min);
        let hi = means.fold(f64::NEG_INFINITY, f64::max);
        if !(lo.is_finite() && hi.is_finite()) || hi < 30.0 * lo {
            return None;
        }
        let top_v = all.iter().flatten().map(|p| p.3).fold(hi, f64::max);
        let top = top_v.log10().ceil().max(hi.log10() + 0.1);
        // The lowest decade holds the smallest positive mean and CI low end.
        let low = all
            .iter()
            .flatten()
            .flat_map(|p| [p.1, p.2])
            .filter(|v| *v > 0.0)
            .fold(lo, f64::min);
        let bottom = low.log10().floor().max(top.floor() - Self::MAX_DECADES);
        Some(LogAxis { bottom, top })
    }

    fn zero_row(&self) -> f64 {
        self.bottom - 1.0
    }

    /// Position of a value on the axis.
    fn pos(&self, v: f64) -> f64 {
        if v > 0.0 {
            v.log10().max(self.zero_row()).min(self.top)
        } else {
            self.zero_row()
        }
    }

    /// A tick label: `0` on the zero row, the decade's value on a whole
    /// decade, nothing elsewhere.
    fn label(&self, v: f64) -> String {
        if (v - self.zero_row()).abs() < 1e-9 {
            return "0".into();
        }
        if v < self.bottom - 1e-9 || (v - v.round()).abs() > 1e-9 {
            return String::new();
        }
        let k = v.round() as i32;
        let d = (-k).max(0) as usize;
        format!("{:.d$}", 10f64.powi(k))
    }
}

const X_LABELS: usize = 8;
const Y_LABELS: usize = 7;

type Chart<'a, 'b, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn error_bar<DB: DrawingBackend>(
    chart: &mut Chart<'_, '_, DB>,
    x: f64,
    lo: f64,
    hi: f64,
    cap: i32,
    color: RGBColor,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    if hi <= lo {
        return Ok(());
    }
    let st = color.stroke_width(2);
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(x, lo), (x, hi)],
            st,
        )))
        .map_err(de)?;
    for y in [lo, hi] {
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((x, y)) + PathElement::new(vec![(-cap, 0), (cap, 0)], st),
            ))
            .map_err(de)?;
    }
    Ok(())
}

/// A key name with its unit spelled out, from its suffix.
fn with_unit(key: &str) -> String {
    if key.ends_with("_ms") {
        format!("{key} (ms)")
    } else if key.ends_with("_us") {
        format!("{key} (µs)")
    } else if key.ends_with("_s") {
        format!("{key} (s)")
    } else if key.ends_with("_p") || key.ends_with("_rate") {
        format!("{key} (probability)")
    } else {
        key.to_string()
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

impl Figure for PanelFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&draw::BACKGROUND).map_err(de)?;
        let (w, h) = root.dim_in_pixel();
        let n = self.metrics.len();
        let base_w = figure_size(n).0 as f64;
        let base_h = figure_size(n).1 as f64;
        let s = (w as f64 / base_w).min(h as f64 / base_h).clamp(0.5, 3.0);

        let title_font = draw::bold(30.0 * s);
        let sub_font = draw::font(18.0 * s).color(&draw::MUTED);
        let legend_font = draw::font(19.0 * s);
        let bars = matches!(self.x, XAxis::Bars);
        let legend = if bars { Vec::new() } else { self.legend() };
        let pad = (14.0 * s) as i32;
        let title_h = (40.0 * s) as i32;
        let sub_h = (28.0 * s) as i32;
        let legend_h = draw::legend_height(&legend, &legend_font, w as i32 - 60);
        let header = pad + title_h + sub_h + legend_h + if legend.is_empty() { 0 } else { pad };

        let title = draw::fit_text(&self.title, &title_font, w as i32 - 40);
        root.draw(&Text::new(
            title,
            (w as i32 / 2, pad),
            title_font.pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(de)?;
        root.draw(&Text::new(
            self.subtitle.clone(),
            (w as i32 / 2, pad + title_h),
            sub_font.pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(de)?;
        let (head, body) = root.split_vertically(header.min(h as i32 / 2));
        if !legend.is_empty() {
            let (_, legend_area) = head.split_vertically(pad + title_h + sub_h);
            draw::draw_legend(&legend_area, &legend, &legend_font)?;
        }
        let body = body.margin(0, (8.0 * s) as i32, (8.0 * s) as i32, (8.0 * s) as i32);
        let (rows, cols) = grid(n);
        let cells = body.split_evenly((rows, cols));
        for (m, cell) in self.metrics.iter().zip(cells.iter()) {
            self.draw_panel(cell, m, s)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod log_axis_tests {
    use super::*;

    fn pts(means: &[f64]) -> Vec<Vec<Pt>> {
        vec![means.iter().map(|&m| (0.0, m, m * 0.9, m * 1.1)).collect()]
    }

    #[test]
    fn chosen_only_when_the_series_span_a_factor_of_30() {
        assert_eq!(LogAxis::choose(&pts(&[50.0, 80.0, 0.0])), None);
        assert_eq!(LogAxis::choose(&pts(&[0.0, 0.0])), None);
        let l = LogAxis::choose(&pts(&[80.0, 0.72, 0.03])).expect("log");
        assert_eq!((l.bottom, l.zero_row()), (-2.0, -3.0));
        assert!(l.top >= 80f64.log10() + 0.1 && l.top <= 2.1, "{l:?}");
    }

    #[test]
    fn decades_are_whole_and_labelled() {
        // A tiny value cannot stretch the axis past five decades, and the
        // bottom stays on a whole decade so that every decade is labelled.
        let l = LogAxis::choose(&pts(&[90.0, 0.000_001])).expect("log");
        assert_eq!(l.bottom, l.bottom.round());
        assert_eq!(l.bottom, -3.0);
        assert_eq!(l.label(l.zero_row()), "0");
        assert_eq!(l.label(-3.0), "0.001");
        assert_eq!(l.label(0.0), "1");
        assert_eq!(l.label(2.0), "100");
        assert_eq!(l.label(0.5), "");
        assert_eq!(l.pos(0.0), l.zero_row());
        assert_eq!(l.pos(1e-9), l.zero_row());
        assert!((l.pos(10.0) - 1.0).abs() < 1e-12);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn summary(text: &str) -> Summary {
        Summary::from_reader(text.as_bytes(), Path::new("s.csv")).expect("parses")
    }

    const HEAD: &str = "scenario,policy,agents.0.csma.max_ms,ttl_ms,reps,duplicate_rate_mean,duplicate_rate_ci95,wasted_inference_rate_mean,wasted_inference_rate_ci95,ttfr_p95_ms_mean,ttfr_p95_ms_ci95,unanswered_rate_mean,unanswered_rate_ci95\n";

    #[test]
    fn picks_the_varying_key_and_one_series_per_policy() {
        let s = summary(&format!(
            "{HEAD}d,spec,2000,45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,4000,45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,none,2000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n\
             d,none,4000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n"
        ));
        let f = PanelFigure::new(&s, &PlotSpec::default()).expect("figure");
        assert!(matches!(f.x, XAxis::Numeric { col: 2 }));
        assert_eq!(f.series.len(), 2);
        assert_eq!(f.series[0].label, "spec");
        assert_eq!(f.series[0].rows, vec![0, 1]);
        assert_eq!(f.metric_count(), 4);
        assert!(f.title.starts_with("d: "), "{}", f.title);
        assert!(f.title.ends_with("vs agents.0.csma.max_ms"), "{}", f.title);
    }

    #[test]
    fn no_swept_key_gives_bars() {
        let s = summary(
            "scenario,policy,reps,duplicate_rate_mean,duplicate_rate_ci95\nd,spec,20,0.1,0.01\nd,none,20,0.3,0.02\n",
        );
        let spec = PlotSpec {
            metrics: vec!["duplicate_rate".into()],
            ..PlotSpec::default()
        };
        let f = PanelFigure::new(&s, &spec).expect("figure");
        assert!(matches!(f.x, XAxis::Bars));
        assert_eq!(f.series.len(), 2);
    }

    #[test]
    fn a_second_varying_key_splits_series() {
        let s = summary(&format!(
            "{HEAD}d,spec,2000,1000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,4000,1000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,2000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,4000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,8000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n"
        ));
        let f = PanelFigure::new(&s, &PlotSpec::default()).expect("figure");
        // csma.max_ms has 3 values, ttl_ms 2: x is csma.max_ms.
        assert_eq!(f.x_name, "agents.0.csma.max_ms");
        assert_eq!(f.series.len(), 2);
        assert_eq!(f.series[1].label, "spec, ttl_ms=45000");
        assert!(f.series[1].dashed);
        let spec = PlotSpec {
            x: Some("ttl_ms".into()),
            by: Some("csma.max_ms".into()),
            ..PlotSpec::default()
        };
        let f = PanelFigure::new(&s, &spec).expect("figure");
        assert_eq!(f.x_name, "ttl_ms");
        assert_eq!(f.series.len(), 3);
        assert_eq!(f.series[0].label, "agents.0.csma.max_ms=2000");
    }

    #[test]
    fn uneven_sweeps_are_spaced_evenly() {
        let rows: String = [0, 50, 500, 5000]
            .iter()
            .map(|v| format!("d,spec,{v},45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n"))
            .collect();
        let s = summary(&format!("{HEAD}{rows}"));
        let f = PanelFigure::new(&s, &PlotSpec::default()).expect("figure");
        assert!(
            matches!(&f.x, XAxis::Even { labels, .. } if labels == &["0", "50", "500", "5000"])
        );
        assert_eq!(f.x_of(2, 0), 2.0);
        assert!(f.x_desc().ends_with("evenly spaced"));
        let spec = PlotSpec {
            x_scale: XScale::Linear,
            ..PlotSpec::default()
        };
        let f = PanelFigure::new(&s, &spec).expect("figure");
        assert!(matches!(f.x, XAxis::Numeric { .. }));
        // Near-even steps stay linear.
        let rows: String = [1000, 2000, 4000, 8000, 12000, 16000]
            .iter()
            .map(|v| format!("d,spec,{v},45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n"))
            .collect();
        let s = summary(&format!("{HEAD}{rows}"));
        let f = PanelFigure::new(&s, &PlotSpec::default()).expect("figure");
        assert!(matches!(f.x, XAxis::Numeric { .. }));
    }

    #[test]
    fn unknown_names_are_input_errors() {
        let s = summary(&format!(
            "{HEAD}d,spec,2000,45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n"
        ));
        for spec in [
            PlotSpec {
                metrics: vec!["nope".into()],
                ..PlotSpec::default()
            },
            PlotSpec {
                x: Some("nope".into()),
                ..PlotSpec::default()
            },
            PlotSpec {
                by: Some("nope".into()),
                ..PlotSpec::default()
            },
            PlotSpec {
                x: Some("policy".into()),
                ..PlotSpec::default()
            },
        ] {
            let e = PanelFigure::new(&s, &spec).err().expect("fails");
            assert!(super::super::is_input_error(&e));
            assert!(e.to_string().starts_with("s.csv: "), "{e}");
        }
    }

    #[test]
    fn units_come_from_key_suffixes() {
        assert_eq!(with_unit("ttl_ms"), "ttl_ms (ms)");
        assert_eq!(
            with_unit("agents.0.respond_p"),
            "agents.0.respond_p (probability)"
        );
        assert_eq!(with_unit("agents.0.count"), "agents.0.count");
    }
}
