//! Metric panels from a `summary.csv`: the standard comparison grid and any
//! selection of metrics, against a swept key, one series per policy (or per
//! another key), with 95% confidence bands or whiskers.

use super::bad;
use super::draw::{self, Axes, Chart, Header, LegendEntry, Plot, Shape, Swatch, Ticks, de};
use super::layout::{self, HeaderRows, LogAxis, capitalize, grid};
use super::output::Figure;
use super::summary::Summary;
use crate::scenario::AxisLabels;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

/// The metrics of the standard comparison figure, in panel order.
pub const STANDARD_METRICS: [&str; 4] = [
    "duplicate_rate",
    "wasted_inference_rate",
    "ttfr_p95_ms",
    "unanswered_rate",
];

/// The metrics of the standard figure when its x axis is categorical (a
/// sweep of `schemes.scheme`): what each choice answers and what it costs,
/// every one with its interval.
pub const CATEGORY_METRICS: [&str; 6] = crate::metrics::SCHEME_METRICS;

/// The standard figure's metrics for a categorical x axis:
/// [`CATEGORY_METRICS`] when the summary has them all (a summary written
/// before the inference bill existed has not), else [`standard_metrics`].
pub fn category_metrics(summary: &Summary) -> Vec<String> {
    if CATEGORY_METRICS
        .iter()
        .all(|m| summary.metric_cols(m).is_some())
    {
        CATEGORY_METRICS.iter().map(|m| m.to_string()).collect()
    } else {
        standard_metrics(summary)
    }
}

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

/// `auto`, `linear` or `even` (`plot --x-scale`).
pub fn parse_x_scale(s: &str) -> Result<XScale, String> {
    match s {
        "auto" => Ok(XScale::Auto),
        "linear" => Ok(XScale::Linear),
        "even" => Ok(XScale::Even),
        _ => Err(format!("`{s}`: expected auto, linear or even")),
    }
}

/// A pixel size `WIDTHxHEIGHT` (`plot --size`).
pub fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("`{s}`: expected WIDTHxHEIGHT, e.g. 1600x1200"))?;
    let w: u32 = w.trim().parse().map_err(|_| format!("`{s}`: bad width"))?;
    let h: u32 = h.trim().parse().map_err(|_| format!("`{s}`: bad height"))?;
    Ok((w, h))
}

/// Default pixel size of a figure with `n` metric panels.
pub fn figure_size(n: usize) -> (u32, u32) {
    let (rows, cols) = grid(n);
    match n {
        0 | 1 => (1200, 800),
        2 => (1600, 700),
        3 => (2100, 760),
        4 => (1600, 1200),
        _ => (cols as u32 * 700, 140 + rows as u32 * 530),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    /// A fraction 0..1, shown as %.
    Percent,
    /// Milliseconds, shown in s when large.
    Millis,
    Plain,
}

#[derive(Debug, Clone)]
struct MetricInfo {
    /// The metric's name in `summary.csv`, without `_mean`.
    name: String,
    mean_col: usize,
    ci_col: Option<usize>,
    title: String,
    /// Y axis description without its unit.
    axis: String,
    kind: Kind,
    /// A log axis may show it: a count, or a share whose answer is how
    /// close to zero it gets (duplicates, waste, unanswered). A share
    /// whose good end is 100% (one starter) stays linear: a log axis
    /// would blow its smallest values up into a dramatic trend.
    log_ok: bool,
}

/// A share drawn on a log axis when the series live on different scales:
/// one whose answer is how close to zero it gets (lower is better in the
/// metric catalogue: duplicates, unanswered, waste).
fn log_share(name: &str) -> bool {
    crate::metrics::metric(name)
        .is_some_and(|m| m.share && m.better == crate::metrics::catalogue::Better::Lower)
}

/// Title, axis name and kind of a metric: from the metric catalogue
/// ([`crate::metrics::CATALOGUE`]), else from its name (a `_rate` is a
/// percentage, a `_ms` a time).
pub(super) fn describe(name: &str) -> (String, String, Kind) {
    if let Some(m) = crate::metrics::metric(name) {
        let kind = if m.share {
            Kind::Percent
        } else if m.unit == "s" {
            Kind::Millis
        } else {
            Kind::Plain
        };
        return (m.title.to_string(), m.axis.to_string(), kind);
    }
    let kind = if name.ends_with("_rate") {
        Kind::Percent
    } else if name.ends_with("_ms") {
        Kind::Millis
    } else {
        Kind::Plain
    };
    (name.to_string(), name.replace('_', " "), kind)
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
    /// The earlier series it equals in every panel (same x values, means
    /// and CIs): its legend entry says so, and it is drawn over that one
    /// in long dashes with larger hollow markers, so that both stay visible.
    same_as: Option<usize>,
}

/// A figure of metric panels, ready to draw.
pub(crate) struct PanelFigure<'a> {
    summary: &'a Summary,
    names: Names,
    x: XAxis,
    x_name: String,
    series: Vec<Series>,
    metrics: Vec<MetricInfo>,
    title: String,
    subtitle: String,
    /// What the panels cannot show by themselves: series that give the
    /// same numbers at a category, values that do not exist ([`Self::notes`]).
    notes: Vec<String>,
}

impl<'a> PanelFigure<'a> {
    pub fn new(
        summary: &'a Summary,
        spec: &PlotSpec,
        labels: &[AxisLabels],
    ) -> anyhow::Result<Self> {
        let names = Names::new(summary, labels);
        let file = summary.path.display().to_string();
        let columns = summary.key_names.join(", ");
        // Series key.
        let by_name = spec.by.as_deref().unwrap_or("policy");
        let by = summary.key_col(by_name).ok_or_else(|| {
            bad(format!(
                "{file}: --by: no column `{by_name}` (columns: {columns})"
            ))
        })?;
        let x_col = match spec.x.as_deref() {
            Some(name) => Some(summary.key_col(name).ok_or_else(|| {
                bad(format!(
                    "{file}: --x: no column `{name}` (columns: {columns})"
                ))
            })?),
            None => default_x(summary),
        };
        if x_col == Some(by) {
            return Err(bad(format!(
                "{file}: --x and --by name the same column `{}`",
                summary.key_names[by]
            )));
        }
        let x = match x_col {
            None => XAxis::Bars,
            Some(c) => x_axis(summary, c, spec.x_scale, &names),
        };
        // A sweep of a categorical key (`schemes.scheme`), on the x axis or
        // splitting the series, compares choices: their answers and bill.
        let categorical = summary
            .param_cols()
            .any(|c| summary.distinct(c).len() > 1 && !summary.is_numeric(c));
        let (metric_names, metrics) = metric_infos(summary, spec, categorical, &file)?;
        let x_name = x_col.map(|c| names.axis(c)).unwrap_or_default();
        let mut series = build_series(summary, by, x_col, &names);
        if !matches!(x, XAxis::Bars) {
            mark_identical(summary, &mut series, &metrics, x_col, by);
        }
        let (title, subtitle) = titles(summary, spec, &metric_names, &metrics, &x, &x_name);
        let mut figure = PanelFigure {
            summary,
            names,
            x,
            x_name,
            series,
            metrics,
            title,
            subtitle,
            notes: Vec::new(),
        };
        figure.notes = figure.category_notes();
        Ok(figure)
    }

    /// Sentences for a reader that the marks alone would not tell, on a
    /// categorical x axis, where series stand side by side at each
    /// category: a series giving exactly the numbers of an earlier one at
    /// a category in every panel (`owner` under `none` and under `spec`),
    /// and a metric with no value for a series at a category (no question
    /// answered: no time to first response), drawn as `n/a`. Also printed
    /// by `herdsim run` and `herdsim plot` on stderr.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    fn category_notes(&self) -> Vec<String> {
        let XAxis::Categorical { col, cats } = &self.x else {
            return Vec::new();
        };
        let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
        let row_at = |si: usize, cat: &str| {
            self.series[si]
                .rows
                .iter()
                .copied()
                .find(|&r| self.summary.rows[r].keys[*col] == cat)
        };
        let equal = |a: usize, b: usize| {
            let (ra, rb) = (&self.summary.rows[a], &self.summary.rows[b]);
            self.metrics.iter().all(|m| {
                same(ra.values[m.mean_col], rb.values[m.mean_col])
                    && m.ci_col.is_none_or(|c| same(ra.values[c], rb.values[c]))
            })
        };
        // As the printed table shows a value: mean ±CI in its unit, to the
        // digits its CI supports.
        let printed = |r: usize, m: &MetricInfo| {
            let row = &self.summary.rows[r];
            let (_, scale) = crate::report::table::unit(&m.name);
            let ci = m.ci_col.map(|c| row.values[c] * scale);
            let ci = ci.filter(|c| c.is_finite());
            let b = crate::report::table::bounds(&m.name);
            crate::report::table::mean_ci_in(row.values[m.mean_col] * scale, ci, b)
        };
        let looks_equal =
            |a: usize, b: usize| self.metrics.iter().all(|m| printed(a, m) == printed(b, m));
        // (series j, series i it equals, exactly or not) -> the categories
        // where it does.
        let mut pairs: Vec<((usize, usize, bool), Vec<String>)> = Vec::new();
        for cat in cats {
            for j in 0..self.series.len() {
                if self.series[j].same_as.is_some() {
                    continue; // the legend says it already
                }
                let Some(rj) = row_at(j, cat) else { continue };
                let exact = (0..j).find(|&i| row_at(i, cat).is_some_and(|ri| equal(ri, rj)));
                let found = exact.map(|i| (i, true)).or_else(|| {
                    (0..j)
                        .find(|&i| row_at(i, cat).is_some_and(|ri| looks_equal(ri, rj)))
                        .map(|i| (i, false))
                });
                let Some((i, exact)) = found else { continue };
                let shown = self.names.value(*col, cat);
                match pairs.iter_mut().find(|p| p.0 == (j, i, exact)) {
                    Some(p) => p.1.push(shown),
                    None => pairs.push(((j, i, exact), vec![shown])),
                }
            }
        }
        let mut notes: Vec<String> = pairs
            .into_iter()
            .map(|((j, i, exact), at)| {
                let how = if exact {
                    "the same numbers in every panel"
                } else {
                    "the same in every panel to the digits the table prints"
                };
                format!(
                    "{} = {} at {}: {how}",
                    self.series[j].label,
                    self.series[i].label,
                    and_list(&at)
                )
            })
            .collect();
        // Values that do not exist: drawn as n/a, said once per metric.
        for m in &self.metrics {
            let mut missing: Vec<String> = Vec::new();
            for cat in cats {
                let none: Vec<&str> = (0..self.series.len())
                    .filter(|&si| {
                        row_at(si, cat)
                            .is_some_and(|r| self.summary.rows[r].values[m.mean_col].is_nan())
                    })
                    .map(|si| self.series[si].label.as_str())
                    .collect();
                if !none.is_empty() {
                    let shown = self.names.value(*col, cat);
                    if none.len() == self.series.len() {
                        missing.push(shown);
                    } else {
                        missing.push(format!("{shown} ({})", none.join(", ")));
                    }
                }
            }
            if !missing.is_empty() {
                notes.push(format!(
                    "{}: n/a at {} (nothing measured: no question answered)",
                    m.title,
                    and_list(&missing)
                ));
            }
        }
        notes
    }

    pub fn metric_count(&self) -> usize {
        self.metrics.len()
    }

    fn legend(&self) -> Vec<LegendEntry> {
        self.series
            .iter()
            .map(|s| {
                let dashed = s.dashed || s.same_as.is_some();
                LegendEntry::new(Swatch::Line(s.color, s.shape, dashed), s.label.clone())
            })
            .collect()
    }

    /// Per series, whether it lies exactly on an earlier series in this
    /// panel (its points `all[j]` equal `all[i]`, i < j): such a series is
    /// drawn over the other in long dashes with larger hollow markers.
    fn overlays(all: &[Vec<Pt>]) -> Vec<bool> {
        (0..all.len())
            .map(|j| !all[j].is_empty() && (0..j).any(|i| all[i] == all[j]))
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
                padded_range(&vals)
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
                // A share's band and whiskers stay within 0..100 %, as the
                // table prints its interval.
                let (lo, hi) = match m.kind {
                    Kind::Percent => ((mean - ci).max(0.0), (mean + ci).min(scale)),
                    _ => (mean - ci, mean + ci),
                };
                (mean.is_finite() && x.is_finite()).then_some((x, mean, lo, hi))
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts
    }

    fn x_desc(&self) -> String {
        match &self.x {
            XAxis::Bars => String::new(),
            XAxis::Even { .. } => {
                format!("{}, sweep points evenly spaced", self.x_with_unit())
            }
            _ => self.x_with_unit(),
        }
    }

    /// The x axis's name with the unit of its key (a label the scenario
    /// gives the axis keeps the key's unit).
    fn x_with_unit(&self) -> String {
        let key = match &self.x {
            XAxis::Numeric { col } | XAxis::Even { col, .. } | XAxis::Categorical { col, .. } => {
                self.summary.key_names[*col].as_str()
            }
            XAxis::Bars => "",
        };
        let unit = with_unit(key);
        let unit = unit.strip_prefix(key).unwrap_or("");
        format!("{}{unit}", self.x_name)
    }

    /// Labels drawn by hand at each category or sweep point (none on a
    /// numeric axis).
    fn category_labels(&self) -> Vec<String> {
        match &self.x {
            XAxis::Bars => self.series.iter().map(|s| s.label.clone()).collect(),
            XAxis::Categorical { col, cats } => {
                cats.iter().map(|v| self.names.value(*col, v)).collect()
            }
            XAxis::Even { labels, .. } => labels.clone(),
            XAxis::Numeric { .. } => Vec::new(),
        }
    }

    /// The unit of metric `m` and its points, per series, in that unit.
    fn scaled_points(&self, m: &MetricInfo) -> (Unit, Vec<Vec<Pt>>) {
        let unit = Unit::of(m.kind);
        let all = (0..self.series.len())
            .map(|si| self.points(si, m, unit.scale))
            .collect();
        (unit, all)
    }

    /// The frame of metric `m`'s panel: a caption when there are several
    /// panels, the y axis `y` in `unit`, and `extra` pixels more under the x
    /// axis for staggered category labels.
    fn axes(&self, m: &MetricInfo, y: &YAxis, unit: Unit, extra: u32, s: f64) -> Axes {
        let log = if y.log.is_some() { ", log scale" } else { "" };
        let categorical = !matches!(self.x, XAxis::Numeric { .. });
        Axes {
            // A single panel is named by the figure title.
            caption: (self.metrics.len() > 1)
                .then(|| (format!("{}{log}", m.title), draw::bold(22.0 * s))),
            margins: Axes::margins(10.0 * s, 26.0 * s),
            label_areas: ((58.0 * s) as u32 + extra, (84.0 * s) as u32),
            x: self.x_range(),
            y: y.range,
            x_ticks: if categorical {
                Ticks::Hidden
            } else {
                Ticks::Linear(X_LABELS)
            },
            y_ticks: match &y.log {
                Some(l) => Ticks::Log(l.clone()),
                None => Ticks::Linear(Y_LABELS),
            },
            x_desc: (!matches!(self.x, XAxis::Bars)).then(|| self.x_desc()),
            y_desc: Some(format!("{}{}{log}", m.axis, unit.axis_suffix())),
            fonts: (16.0 * s, 18.0 * s),
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
        let (unit, mut all) = self.scaled_points(m);
        let bars = matches!(self.x, XAxis::Bars);
        let y = YAxis::choose(m.kind, bars, m.log_ok, &mut all);
        let font = draw::font(16.0 * s).color(&draw::MUTED);
        let labels = self.category_labels();
        let widest = labels.iter().map(|l| draw::text_width(l, &font)).max();
        let (w, h) = area.dim_in_pixel();
        let fit = CategoryFit::of(widest.unwrap_or(0), labels.len(), w, s);
        let line_h = (font.font.get_size() * 1.3) as i32;
        let extra = if fit.stagger { line_h as u32 } else { 0 };
        let chart = draw::axes(area, &self.axes(m, &y, unit, extra, s))?;
        let style = LabelStyle {
            font: &font,
            fit,
            line_h,
            s,
        };
        draw_category_labels(area, &chart, &labels, y.range.0, &style)?;
        if y.empty {
            let st = draw::font(18.0 * s).color(&draw::MUTED);
            let mid = (w as i32 / 2, h as i32 / 2);
            let centre = (HPos::Center, VPos::Center);
            return draw::text(area, mid, (0, 0), "no data", &st, centre);
        }
        let pa = chart.plotting_area();
        if bars {
            self.draw_bars(pa, &all, y.range, unit, s)?;
        } else {
            self.draw_series(pa, &all, y.range, s)?;
            self.draw_overlay_note(area, &all, s)?;
            self.draw_missing(pa, m, y.range, s)?;
        }
        // A panel of zeros says so, rather than leave an empty frame to read.
        let points = all.iter().flatten();
        if all.iter().any(|p| !p.is_empty()) && points.clone().all(|p| all_zero(*p)) {
            let st = draw::font(18.0 * s).color(&draw::MUTED);
            let mid = (w as i32 / 2, h as i32 / 2);
            let what = if bars {
                "every policy"
            } else {
                "every series at every point"
            };
            let text = format!("0 for {what}");
            return draw::text(area, mid, (0, 0), text, &st, (HPos::Center, VPos::Center));
        }
        Ok(())
    }

    /// Series that lie exactly on another in this panel only (the legend
    /// names those equal in every panel): said in the panel's top right
    /// corner, "= here: spec, specialised channels on spec, everyone answers".
    fn overlay_notes(&self, all: &[Vec<Pt>]) -> Vec<String> {
        let mut notes = Vec::new();
        for j in 0..all.len() {
            if all[j].is_empty() || self.series[j].same_as.is_some() {
                continue;
            }
            if let Some(i) = (0..j).find(|&i| all[i] == all[j]) {
                notes.push(format!(
                    "{} = {} here",
                    self.series[j].label, self.series[i].label
                ));
            }
        }
        notes
    }

    /// `n/a` where a series has no value at a category (no question
    /// answered: no time to first response), so that an empty place does
    /// not read as a value left out of the figure.
    fn draw_missing<DB: DrawingBackend>(
        &self,
        pa: &Plot<DB>,
        m: &MetricInfo,
        (y0, y1): (f64, f64),
        s: f64,
    ) -> anyhow::Result<()> {
        if !matches!(self.x, XAxis::Categorical { .. }) {
            return Ok(());
        }
        let font = draw::font(15.0 * s).color(&draw::MUTED);
        let y = y0 + (y1 - y0) * 0.04;
        for (si, sr) in self.series.iter().enumerate() {
            for &r in &sr.rows {
                if self.summary.rows[r].values[m.mean_col].is_nan() {
                    let at = (self.x_of(r, si), y);
                    let anchor = (HPos::Center, VPos::Bottom);
                    draw::text(pa, at, (0, 0), "n/a", &font, anchor)?;
                }
            }
        }
        Ok(())
    }

    fn draw_overlay_note<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        all: &[Vec<Pt>],
        s: f64,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let font = draw::font(15.0 * s).color(&draw::MUTED);
        let (w, _) = area.dim_in_pixel();
        let line_h = (15.0 * s * 1.3) as i32;
        // Under the caption, right-aligned over the plot.
        let top = (48.0 * s) as i32;
        for (k, note) in self.overlay_notes(all).iter().enumerate() {
            let at = (w as i32 - (12.0 * s) as i32, top + k as i32 * line_h);
            draw::text(area, at, (0, 0), note, &font, (HPos::Right, VPos::Top))?;
        }
        Ok(())
    }

    /// One bar per series with its CI and its value on top.
    fn draw_bars<DB: DrawingBackend>(
        &self,
        pa: &Plot<DB>,
        all: &[Vec<Pt>],
        (y0, y1): (f64, f64),
        unit: Unit,
        s: f64,
    ) -> anyhow::Result<()> {
        let clamp = |v: f64| v.clamp(y0, y1);
        let cap = (6.0 * s).round().max(2.0) as i32;
        let value_font = draw::font(15.0 * s);
        for (si, pts) in all.iter().enumerate() {
            let c = self.series[si].color;
            for &(x, mean, lo, hi) in pts {
                let base = 0.0_f64.clamp(y0, y1);
                let corners = [(x - 0.32, base), (x + 0.32, clamp(mean))];
                pa.draw(&Rectangle::new(corners, c.mix(0.85).filled()))
                    .map_err(de)?;
                whisker(pa, x, (clamp(lo), clamp(hi)), cap, draw::INK)?;
                let value = format!("{}{}", bar_value(mean, hi - mean), unit.value_suffix());
                let (offset, anchor) = ((0, -(6.0 * s) as i32), (HPos::Center, VPos::Bottom));
                draw::text(pa, (x, clamp(hi)), offset, value, &value_font, anchor)?;
            }
        }
        Ok(())
    }

    /// Lines with their CI bands (whiskers where a series has one point),
    /// or points with whiskers on a categorical axis. Bands first, then
    /// lines, then markers, so that nothing hides a line.
    fn draw_series<DB: DrawingBackend>(
        &self,
        pa: &Plot<DB>,
        all: &[Vec<Pt>],
        (y0, y1): (f64, f64),
        s: f64,
    ) -> anyhow::Result<()> {
        let clamp = |v: f64| v.clamp(y0, y1);
        let lines = self.x.lines();
        let over = Self::overlays(all);
        if lines {
            self.draw_lines(pa, all, &over, (y0, y1), s)?;
        }
        let mark_r = (5.0 * s).round().max(2.0) as i32;
        let ring_r = (9.0 * s).round().max(4.0) as i32;
        let cap = (6.0 * s).round().max(2.0) as i32;
        // The series on top of an equal one last: a larger hollow marker
        // around the one below, which is drawn again inside it, so that both
        // show even in the same colour (one policy under two settings).
        for top in [false, true] {
            for (si, pts) in all.iter().enumerate().filter(|(si, _)| over[*si] == top) {
                let sr = &self.series[si];
                let below = (0..si).find(|&i| all[i] == *pts).map(|i| &self.series[i]);
                for &(x, mean, lo, hi) in pts {
                    let at = (x, clamp(mean));
                    if !top && (!lines || pts.len() < 2) {
                        whisker(pa, x, (clamp(lo), clamp(hi)), cap, sr.color)?;
                    }
                    let c = sr.color.to_rgba();
                    match below.filter(|_| top) {
                        Some(b) => {
                            draw::marker(pa, at, sr.shape, ring_r, c, false)?;
                            draw::marker(pa, at, b.shape, mark_r, b.color.to_rgba(), true)?;
                        }
                        None => draw::marker(pa, at, sr.shape, mark_r, c, true)?,
                    }
                }
            }
        }
        Ok(())
    }

    /// The CI bands, then the lines (dashed for the series so marked),
    /// then the lines of the series that lie on an equal one (`over`),
    /// in short dashes that let the one below show between them.
    fn draw_lines<DB: DrawingBackend>(
        &self,
        pa: &Plot<DB>,
        all: &[Vec<Pt>],
        over: &[bool],
        (y0, y1): (f64, f64),
        s: f64,
    ) -> anyhow::Result<()> {
        let clamp = |v: f64| v.clamp(y0, y1);
        let alpha = (0.5 / self.series.len() as f64).clamp(0.08, 0.2);
        for (si, pts) in all.iter().enumerate() {
            let flat = pts.iter().all(|p| p.2 == p.1 && p.3 == p.1);
            if over[si] || pts.len() < 2 || flat {
                continue;
            }
            let mut band: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, clamp(p.3))).collect();
            band.extend(pts.iter().rev().map(|p| (p.0, clamp(p.2))));
            let fill = self.series[si].color.mix(alpha).filled();
            pa.draw(&Polygon::new(band, fill)).map_err(de)?;
        }
        let line_w = (2.5 * s).round().max(1.0) as u32;
        for top in [false, true] {
            for (si, pts) in all.iter().enumerate().filter(|(si, _)| over[*si] == top) {
                let sr = &self.series[si];
                let style = sr.color.stroke_width(line_w);
                let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, clamp(p.1))).collect();
                if top {
                    // Long dashes: the equal series below shows between them.
                    draw::dashed(pa, line, ((14.0 * s) as i32, (12.0 * s) as i32), style)?;
                } else if sr.dashed {
                    draw::dashed(pa, line, ((10.0 * s) as i32, (6.0 * s) as i32), style)?;
                } else {
                    draw::path(pa, line, style)?;
                }
            }
        }
        Ok(())
    }
}

/// A bar's value as the table prints it: to the precision its CI
/// supports (two significant digits of the CI, at most three of the
/// mean), so that 0.065% and 0.0998% do not both read 0.1%.
fn bar_value(mean: f64, ci: f64) -> String {
    let ci = (ci.is_finite() && ci > 0.0).then_some(ci);
    let d = crate::report::table::decimals(mean, ci);
    layout::tick(mean, d)
}

/// A CI from `lo` to `hi` at `x`, with caps, when it has a length.
fn whisker<DB: DrawingBackend>(
    pa: &Plot<DB>,
    x: f64,
    (lo, hi): (f64, f64),
    cap: i32,
    color: RGBColor,
) -> anyhow::Result<()> {
    if hi <= lo {
        return Ok(());
    }
    draw::error_bar(pa, (x, lo), (x, hi), cap, color.stroke_width(2))
}

/// The metrics to plot (their names as given, and what to draw of each).
fn metric_infos(
    summary: &Summary,
    spec: &PlotSpec,
    categorical: bool,
    file: &str,
) -> anyhow::Result<(Vec<String>, Vec<MetricInfo>)> {
    let names: Vec<String> = if spec.metrics.is_empty() && categorical {
        category_metrics(summary)
    } else if spec.metrics.is_empty() {
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
            name: base.to_string(),
            mean_col,
            ci_col,
            title,
            axis,
            kind,
            log_ok: kind == Kind::Plain || log_share(base),
        });
    }
    if metrics.is_empty() {
        return Err(bad(format!("{file}: no metric to plot")));
    }
    Ok((names, metrics))
}

/// The swept key with the most distinct values, a categorical one first:
/// a sweep of a choice (`schemes.scheme`) beside a number (a fault rate,
/// the channel size) compares the choices, side by side at each number's
/// value, rather than a dozen lines told apart by marker shapes.
fn default_x(summary: &Summary) -> Option<usize> {
    let mut best: Option<(bool, usize, usize)> = None;
    for c in summary.param_cols() {
        let n = summary.distinct(c).len();
        if n < 2 {
            continue;
        }
        let cand = (!summary.is_numeric(c), n, c);
        if best.is_none_or(|(bn, bc, _)| (cand.0, cand.1) > (bn, bc)) {
            best = Some(cand);
        }
    }
    best.map(|b| b.2)
}

/// The x axis of column `c`: to scale, evenly spaced or categorical. An
/// axis whose values the scenario labels is drawn one step per value,
/// labelled.
fn x_axis(summary: &Summary, c: usize, x_scale: XScale, names: &Names) -> XAxis {
    if !summary.is_numeric(c) {
        return XAxis::Categorical {
            col: c,
            cats: summary.distinct(c),
        };
    }
    // Distinct values in order, with the text of their first row.
    let mut pts: Vec<(f64, String)> = Vec::new();
    for r in &summary.rows {
        let v = r.keys[c].parse::<f64>().unwrap_or(f64::NAN);
        if !pts.iter().any(|p| p.0 == v) {
            pts.push((v, r.keys[c].clone()));
        }
    }
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let vals: Vec<f64> = pts.iter().map(|p| p.0).collect();
    let labelled = pts.iter().any(|p| names.has_value(c, &p.1));
    let even = match x_scale {
        XScale::Even => true,
        XScale::Linear => false,
        XScale::Auto => labelled || uneven(&vals),
    };
    if even {
        XAxis::Even {
            col: c,
            vals,
            labels: pts.into_iter().map(|p| names.value(c, &p.1)).collect(),
        }
    } else {
        XAxis::Numeric { col: c }
    }
}

/// Sorted sweep points are very unevenly spaced: the largest gap is at
/// least 10 times the smallest.
fn uneven(vals: &[f64]) -> bool {
    let gaps: Vec<f64> = vals.windows(2).map(|w| w[1] - w[0]).collect();
    let min_gap = gaps.iter().copied().fold(f64::INFINITY, f64::min);
    let max_gap = gaps.iter().copied().fold(0.0, f64::max);
    gaps.len() >= 2 && max_gap >= 10.0 * min_gap
}

/// The range of a numeric axis over `vals`, padded by 4% (or around a
/// single value).
fn padded_range(vals: &[f64]) -> (f64, f64) {
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

/// What a figure calls the descriptive columns and their values: the
/// labels the scenario gives its sweep axes (`labels.toml`), else a key by
/// the shortest end of its dotted name no other key shares (as the table
/// heads it) and a value as the CSV writes it.
#[derive(Debug, Clone, Default)]
struct Names {
    /// The columns' keys (`key_names`).
    keys: Vec<String>,
    /// Per column of `key_names`: its name in a legend.
    cols: Vec<String>,
    /// Per column: whether the name is a label (not a key).
    labelled: Vec<bool>,
    /// Per column: (value as in the CSV, its label).
    values: Vec<Vec<(String, String)>>,
}

impl Names {
    fn new(summary: &Summary, labels: &[AxisLabels]) -> Names {
        let params = summary.param_cols();
        let keys: Vec<String> = summary.key_names[params.clone()].to_vec();
        let short = crate::report::table::short_keys(&keys);
        let mut names = Names {
            keys: summary.key_names.clone(),
            ..Names::default()
        };
        for (c, key) in summary.key_names.iter().enumerate() {
            let given = labels.iter().find(|l| l.key == *key);
            let label = given.and_then(|l| l.label.clone());
            names.labelled.push(label.is_some());
            names.cols.push(match label {
                Some(l) => l,
                None if params.contains(&c) => short[c - params.start].clone(),
                None => key.clone(),
            });
            names
                .values
                .push(given.map(|l| l.values.clone()).unwrap_or_default());
        }
        names
    }

    /// The name of column `c` on an axis and in a title: its label, else
    /// its dotted key.
    fn axis(&self, c: usize) -> String {
        if self.labelled[c] {
            self.cols[c].clone()
        } else {
            self.keys[c].clone()
        }
    }

    fn has_value(&self, c: usize, v: &str) -> bool {
        self.values[c].iter().any(|(x, _)| x == v)
    }

    /// Value `v` of column `c`: its label, else `v`.
    fn value(&self, c: usize, v: &str) -> String {
        self.values[c]
            .iter()
            .find(|(x, _)| x == v)
            .map_or_else(|| v.to_string(), |(_, l)| l.clone())
    }

    /// Value `v` of column `c` in a legend: its label alone, else
    /// `name=value`.
    fn entry(&self, c: usize, v: &str) -> String {
        if self.has_value(c, v) {
            self.value(c, v)
        } else {
            format!("{}={v}", self.cols[c])
        }
    }
}

/// Mark every series that equals an earlier one in every metric: the same
/// rows' x values, means and CIs. Its legend entry then names the series
/// it equals ("tombstone = spec").
fn mark_identical(
    summary: &Summary,
    series: &mut [Series],
    metrics: &[MetricInfo],
    x_col: Option<usize>,
    by: usize,
) {
    let same_value = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
    let equal = |a: &Series, b: &Series| {
        a.rows.len() == b.rows.len()
            && a.rows.iter().zip(&b.rows).all(|(&i, &j)| {
                let (ri, rj) = (&summary.rows[i], &summary.rows[j]);
                x_col.is_none_or(|c| ri.keys[c] == rj.keys[c])
                    && metrics.iter().all(|m| {
                        same_value(ri.values[m.mean_col], rj.values[m.mean_col])
                            && m.ci_col
                                .is_none_or(|c| same_value(ri.values[c], rj.values[c]))
                    })
            })
    };
    for j in 1..series.len() {
        let Some(i) =
            (0..j).find(|&i| series[i].same_as.is_none() && equal(&series[i], &series[j]))
        else {
            continue;
        };
        // "tombstone, crash_p=0.2" equal to "spec, crash_p=0.2": say
        // "tombstone = spec, crash_p=0.2"; otherwise name the whole label.
        let (bi, bj) = (
            &summary.rows[series[i].rows[0]],
            &summary.rows[series[j].rows[0]],
        );
        let (vi, vj) = (&bi.keys[by], &bj.keys[by]);
        let label = match (
            series[j].label.strip_prefix(vj.as_str()),
            series[i].label.strip_prefix(vi.as_str()),
        ) {
            (Some(rest_j), Some(rest_i)) if rest_j == rest_i => format!("{vj} = {vi}{rest_j}"),
            _ => format!("{} (= {})", series[j].label, series[i].label),
        };
        series[j].label = label;
        series[j].same_as = Some(i);
    }
}

/// One series per value of column `by`, split further by every other
/// column that varies (besides x): those share the colour of their `by`
/// value and differ in marker shape and dashes.
fn build_series(summary: &Summary, by: usize, x_col: Option<usize>, names: &Names) -> Vec<Series> {
    let extras: Vec<usize> = (0..summary.key_names.len())
        .filter(|&c| c != by && Some(c) != x_col && summary.distinct(c).len() > 1)
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
        let ci = combos.iter().position(|c| *c == combo).unwrap_or_else(|| {
            combos.push(combo.clone());
            combos.len() - 1
        });
        let bi = by_values.iter().position(|v| *v == bv).unwrap_or(0);
        let mut label = if by_is_name {
            bv.clone()
        } else {
            names.entry(by, &bv)
        };
        for (j, &c) in extras.iter().enumerate() {
            label.push_str(&format!(", {}", names.entry(c, &combo[j])));
        }
        keys.push(key);
        series.push(Series {
            label,
            color: colors[bi],
            shape: Shape::nth(ci),
            dashed: ci % 2 == 1,
            rows: vec![i],
            same_as: None,
        });
    }
    series
}

/// The figure's title (`spec.title`, or what is plotted against what for
/// which scenario) and subtitle (replications and what the CI shows).
fn titles(
    summary: &Summary,
    spec: &PlotSpec,
    names: &[String],
    metrics: &[MetricInfo],
    x: &XAxis,
    x_name: &str,
) -> (String, String) {
    let standard = spec.metrics.is_empty()
        || names
            .iter()
            .map(|n| n.strip_suffix("_mean").unwrap_or(n))
            .eq(STANDARD_METRICS.iter().copied());
    let category = names.iter().map(String::as_str).eq(CATEGORY_METRICS);
    let what = if category {
        "answers, latency and the inference bill".to_string()
    } else if standard && names.iter().any(|n| n == "single_starter_rate") {
        "duplicates, wasted inference, latency and single starters".to_string()
    } else if standard {
        "duplicates, wasted inference, latency and unanswered messages".to_string()
    } else {
        let t: Vec<String> = metrics.iter().map(|m| m.title.to_lowercase()).collect();
        t.join(", ")
    };
    let what = match x {
        XAxis::Bars if standard => "floor-control policies compared".to_string(),
        XAxis::Bars => what,
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
        // One replication has no spread to show: no bands, no whiskers.
        Some(r) if r == "1" => {
            "One replication per point: the values of a single run, with no confidence \
             interval"
                .to_string()
        }
        Some(r) => format!("Mean over {r} replications per point; {interval}"),
        None => format!("Mean over replications; {interval}"),
    };
    (title, subtitle)
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [a] => a.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A point: (x, mean, low end of the CI, high end).
type Pt = (f64, f64, f64, f64);

/// A point whose mean and CI are all zero.
fn all_zero(p: Pt) -> bool {
    p.1 == 0.0 && p.2 == 0.0 && p.3 == 0.0
}

/// The display unit of a metric.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Unit {
    /// Factor from the stored value.
    scale: f64,
    /// "%", "s", "ms" or "".
    name: &'static str,
}

impl Unit {
    /// Rates in %, times in s, counts as they are: the units of the
    /// printed tables (the metric catalogue's).
    fn of(kind: Kind) -> Unit {
        let (scale, name) = match kind {
            Kind::Percent => (100.0, "%"),
            // As the tables print them, whatever their size.
            Kind::Millis => (0.001, "s"),
            Kind::Plain => (1.0, ""),
        };
        Unit { scale, name }
    }

    /// Appended to an axis name: " (%)".
    fn axis_suffix(&self) -> String {
        match self.name {
            "" => String::new(),
            n => format!(" ({n})"),
        }
    }

    /// Appended to a value: "%", " s".
    fn value_suffix(&self) -> String {
        match self.name {
            "" | "%" => self.name.to_string(),
            n => format!(" {n}"),
        }
    }
}

/// The y axis of a panel.
#[derive(Debug, Clone, PartialEq)]
struct YAxis {
    range: (f64, f64),
    log: Option<LogAxis>,
    /// No point to draw.
    empty: bool,
}

impl YAxis {
    /// The y axis for the points `all` (per series) of a metric of `kind`;
    /// on a log axis the points are moved to their log positions.
    ///
    /// A log axis when the series live on different scales (one policy
    /// near 80%, another near 0.1%): on a linear axis the small one is a
    /// flat line at zero and its trend, the thing a reader came to see, is
    /// invisible. Rates and counts keep zero on a linear axis; a latency
    /// that never comes near zero gets the room for its differences
    /// instead (bars always start at zero).
    fn choose(kind: Kind, bars: bool, log_ok: bool, all: &mut [Vec<Pt>]) -> YAxis {
        let pts = || all.iter().flatten();
        let lo = pts().map(|p| p.2).fold(f64::INFINITY, f64::min);
        let hi = pts().map(|p| p.3).fold(f64::NEG_INFINITY, f64::max);
        let empty = !lo.is_finite();
        let log = if bars || empty || !log_ok || kind == Kind::Millis {
            None
        } else {
            let col = |k: fn(&Pt) -> f64| pts().map(k).collect::<Vec<f64>>();
            LogAxis::choose(&col(|p| p.1), &col(|p| p.2), &col(|p| p.3))
        };
        let range = if let Some(l) = &log {
            for p in all.iter_mut().flatten() {
                *p = (p.0, l.pos(p.1), l.pos(p.2), l.pos(p.3));
            }
            (l.zero_row(), l.top)
        } else if empty {
            (0.0, 1.0)
        } else {
            let min_mean = pts().map(|p| p.1).fold(f64::INFINITY, f64::min);
            linear_range(kind, bars, lo, hi, min_mean)
        };
        // A marker on an edge (a 0, a share at 100%, a log axis's zero row)
        // is drawn whole; a bar starts on the axis and needs no room.
        let range = if bars || empty {
            range
        } else {
            layout::edge_room(range, all.iter().flatten().map(|p| p.1))
        };
        YAxis { range, log, empty }
    }
}

/// A linear y range holding `lo..hi`, 10% headroom on top.
fn linear_range(kind: Kind, bars: bool, lo: f64, hi: f64, min_mean: f64) -> (f64, f64) {
    let y0 = if min_mean < 0.0 {
        lo - (hi - lo) * 0.08
    } else if kind == Kind::Millis && !bars && lo > 0.4 * hi {
        let step = layout::tick_step(0.0, hi - lo, 4);
        ((lo - (hi - lo) * 0.1) / step).floor() * step
    } else {
        0.0
    };
    let mut y1 = hi + (hi - y0).abs() * 0.1;
    if kind == Kind::Percent && hi <= 100.0 {
        y1 = y1.min(100.0);
    }
    if y1 - y0 < 1e-9 {
        y1 = y0
            + if kind == Kind::Percent {
                1.0
            } else {
                1.0_f64.max(y0.abs() * 0.1)
            };
    }
    (y0, y1)
}

/// How the category labels fit under a panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CategoryFit {
    /// On two alternating rows: they would collide on one.
    stagger: bool,
    /// Widest a label may be (longer ones are shortened).
    max_w: i32,
}

impl CategoryFit {
    /// `n` labels, the widest `widest` pixels, under a panel `area_w`
    /// pixels wide at scale `s`.
    fn of(widest: i32, n: usize, area_w: u32, s: f64) -> CategoryFit {
        let slot = (area_w as f64 - 120.0 * s) / n.max(1) as f64;
        let stagger = n > 1 && widest as f64 > slot * 0.9;
        let max_w = if stagger {
            (slot * 1.8) as i32
        } else {
            (slot * 0.95).max(40.0) as i32
        };
        CategoryFit { stagger, max_w }
    }
}

/// How category labels are drawn.
struct LabelStyle<'a> {
    font: &'a TextStyle<'a>,
    fit: CategoryFit,
    line_h: i32,
    s: f64,
}

/// The category labels, each under a tick mark at its category.
fn draw_category_labels<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart<'_, DB>,
    labels: &[String],
    y0: f64,
    t: &LabelStyle,
) -> anyhow::Result<()> {
    let base = area.get_base_pixel();
    for (k, label) in labels.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(k as f64, y0));
        let (px, py) = (px - base.0, py - base.1);
        let label = draw::fit_text(label, t.font, t.fit.max_w);
        let tick_end = (px, py + (5.0 * t.s) as i32);
        draw::path(area, vec![(px, py), tick_end], draw::MUTED.stroke_width(1))?;
        let second_row = t.fit.stagger && k % 2 == 1;
        let dy = (9.0 * t.s) as i32 + if second_row { t.line_h } else { 0 };
        let top = (HPos::Center, VPos::Top);
        draw::text(area, (px, py + dy), (0, 0), label, t.font, top)?;
    }
    Ok(())
}

const X_LABELS: usize = 8;
const Y_LABELS: usize = 7;

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

impl Figure for PanelFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let n = self.metrics.len();
        let s = layout::scale_factor(root.dim_in_pixel(), figure_size(n));
        let bars = matches!(self.x, XAxis::Bars);
        let legend = if bars { Vec::new() } else { self.legend() };
        let body = draw::header(
            root,
            &Header {
                title: &self.title,
                subtitle: &self.subtitle,
                legend: &legend,
                sizes: (30.0 * s, 18.0 * s, 19.0 * s),
                rows: HeaderRows::scaled(s, 40.0, 28.0),
            },
        )?;
        // The notes under the panels, one line each.
        let note_h = (17.0 * s * 1.45) as i32;
        let body = if self.notes.is_empty() {
            body
        } else {
            let (_, h) = body.dim_in_pixel();
            let foot = note_h * self.notes.len() as i32 + (12.0 * s) as i32;
            let (panels, footer) = body.split_vertically(h as i32 - foot);
            let font = draw::font(17.0 * s).color(&draw::MUTED);
            for (k, note) in self.notes.iter().enumerate() {
                let at = ((20.0 * s) as i32, k as i32 * note_h);
                let anchor = (HPos::Left, VPos::Top);
                draw::text(&footer, at, (0, 0), format!("Note: {note}."), &font, anchor)?;
            }
            panels
        };
        let cells = draw::cells(&body, s, grid(n));
        for (m, cell) in self.metrics.iter().zip(cells.iter()) {
            self.draw_panel(cell, m, s)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_and_scales_parse() {
        assert_eq!(parse_size("1600x1200"), Ok((1600, 1200)));
        assert!(parse_size("1600").is_err());
        assert!(parse_size("ax2").is_err());
        assert_eq!(parse_x_scale("even"), Ok(XScale::Even));
        assert!(parse_x_scale("log").is_err());
    }

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
        let f = PanelFigure::new(&s, &PlotSpec::default(), &[]).expect("figure");
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
        let f = PanelFigure::new(&s, &spec, &[]).expect("figure");
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
        let f = PanelFigure::new(&s, &PlotSpec::default(), &[]).expect("figure");
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
        let f = PanelFigure::new(&s, &spec, &[]).expect("figure");
        assert_eq!(f.x_name, "ttl_ms");
        assert_eq!(f.series.len(), 3);
        assert_eq!(f.series[0].label, "max_ms=2000");
    }

    #[test]
    fn a_series_equal_to_another_says_so() {
        let s = summary(&format!(
            "{HEAD}d,spec,2000,45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,4000,45000,20,0.2,0.01,0.1,0.01,9000,100,0,0\n\
             d,tombstone,2000,45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,tombstone,4000,45000,20,0.2,0.01,0.1,0.01,9000,100,0,0\n\
             d,none,2000,45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,none,4000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n"
        ));
        let f = PanelFigure::new(&s, &PlotSpec::default(), &[]).expect("figure");
        assert_eq!(f.series[1].label, "tombstone = spec");
        assert_eq!(f.series[1].same_as, Some(0));
        // Equal in one panel only: not in the legend.
        assert_eq!(f.series[2].label, "none");
        assert_eq!(f.series[2].same_as, None);
        // In a panel, a series on an equal one is drawn on top of it.
        let pts = |m: f64| vec![(0.0, m, m, m), (1.0, m, m, m)];
        assert_eq!(
            PanelFigure::overlays(&[pts(1.0), pts(2.0), pts(1.0), Vec::new()]),
            vec![false, false, true, false]
        );
    }

    /// A categorical sweep without the bill columns keeps the standard
    /// metrics; at each category a series equal to an earlier one is
    /// said, exactly or to the printed digits, and a missing value is
    /// said once per metric; a numeric x axis has no such notes.
    #[test]
    fn categories_say_which_series_lie_on_another() {
        let head = "scenario,policy,schemes.scheme,reps,duplicate_rate_mean,duplicate_rate_ci95,wasted_inference_rate_mean,wasted_inference_rate_ci95,ttfr_p95_ms_mean,ttfr_p95_ms_ci95,unanswered_rate_mean,unanswered_rate_ci95\n";
        let s = summary(&format!(
            "{head}d,spec,open,20,0,0,0.001,0.0001,16400,300,0,0\n\
             d,none,open,20,0.8,0.01,0.7,0.01,11500,100,0,0\n\
             d,spec,owner,20,0,0,0,0,17903,195,0,0\n\
             d,none,owner,20,0,0,0,0,17895,196,0,0\n\
             d,spec,mentions,20,0,0,0,0,NaN,,1,0\n\
             d,none,mentions,20,0,0,0,0,NaN,,1,0\n"
        ));
        let f = PanelFigure::new(&s, &PlotSpec::default(), &[]).expect("figure");
        assert_eq!(f.metric_count(), 4);
        assert_eq!(
            f.notes(),
            [
                "none = spec at owner: the same in every panel to the digits the table prints",
                "none = spec at mentions: the same numbers in every panel",
                "p95 time to first response: n/a at mentions (nothing measured: no question answered)",
            ]
        );
        assert_eq!(
            and_list(&["a".into(), "b".into(), "c".into()]),
            "a, b and c"
        );
        // Beside a numeric key, the categorical one goes across.
        let head = "scenario,policy,schemes.scheme,agents.0.count,reps,duplicate_rate_mean\n";
        let s = summary(&format!(
            "{head}d,spec,open,10,5,0\nd,spec,open,100,5,0\nd,spec,open,300,5,0\n\
             d,spec,owner,10,5,0\nd,spec,owner,100,5,0\nd,spec,owner,300,5,0\n"
        ));
        assert_eq!(
            default_x(&s).map(|c| s.key_names[c].as_str()),
            Some("schemes.scheme")
        );
    }

    /// A series on another in some panels only (pile-on's "spec,
    /// specialised channels" on "spec, everyone answers" in responses per
    /// message) is named in those panels; a panel of zeros, a share's CI
    /// past 0..100 % and one replication are said or clipped; three panels
    /// make one row (issue 39, item 8).
    #[test]
    fn what_a_panel_cannot_show_is_said() {
        let s = summary(&format!(
            "{HEAD}d,spec,2000,45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,4000,45000,20,0.2,0.01,0.1,0.01,9000,100,0,0\n\
             d,none,2000,45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,none,4000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n"
        ));
        let f = PanelFigure::new(&s, &PlotSpec::default(), &[]).expect("figure");
        let notes = |title: &str| {
            let m = f.metrics.iter().find(|m| m.title.starts_with(title));
            let (_, all) = f.scaled_points(m.expect("panel"));
            (f.overlay_notes(&all), all)
        };
        assert_eq!(notes("Wasted").0, vec!["none = spec here".to_string()]);
        assert!(notes("Duplicate").0.is_empty());
        let (_, zeros) = notes("Unanswered");
        assert!(zeros.iter().flatten().all(|p| all_zero(*p)));
        // A share's band stops at 0 and 100 %.
        let s = summary(&format!(
            "{HEAD}d,spec,2000,45000,3,0.9,0.5,0.02,0.05,9000,100,0,0\n\
             d,spec,4000,45000,3,0.9,0.5,0.02,0.05,9000,100,0,0\n"
        ));
        let f = PanelFigure::new(&s, &PlotSpec::default(), &[]).expect("figure");
        for m in f.metrics.iter().filter(|m| m.kind == Kind::Percent) {
            let (_, all) = f.scaled_points(m);
            for p in all.iter().flatten() {
                assert!(p.2 >= 0.0 && p.3 <= 100.0, "{}: {p:?}", m.title);
            }
        }
        // One replication: no interval promised.
        let s = summary(&format!(
            "{HEAD}d,spec,2000,45000,1,0.1,,0.1,,9000,,0,\n\
             d,none,2000,45000,1,0.2,,0.1,,9000,,0,\n"
        ));
        let f = PanelFigure::new(&s, &PlotSpec::default(), &[]).expect("figure");
        assert!(
            f.subtitle.starts_with("One replication per point"),
            "{}",
            f.subtitle
        );
        assert!(!f.subtitle.contains("whiskers"), "{}", f.subtitle);
        assert_eq!(grid(3), (1, 3));
        assert_eq!(figure_size(3), (2100, 760));
    }

    #[test]
    fn the_scenarios_labels_name_axes_and_values() {
        let s = summary(&format!(
            "{HEAD}d,spec,2000,1000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,4000,1000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,8000,1000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,2000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,4000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n\
             d,spec,8000,45000,20,0.3,0.01,0.1,0.01,9000,100,0,0\n"
        ));
        let labels = [
            AxisLabels {
                key: "agents.0.csma.max_ms".into(),
                label: Some("CSMA window".into()),
                values: Vec::new(),
            },
            AxisLabels {
                key: "ttl_ms".into(),
                label: None,
                values: vec![("1000".into(), "short TTL".into())],
            },
        ];
        let f = PanelFigure::new(&s, &PlotSpec::default(), &labels).expect("figure");
        assert_eq!(f.x_name, "CSMA window");
        assert_eq!(f.x_desc(), "CSMA window (ms)");
        assert!(f.title.ends_with("vs CSMA window"), "{}", f.title);
        assert_eq!(f.series[0].label, "spec, short TTL");
        assert_eq!(f.series[1].label, "spec, ttl_ms=45000");
        // Labelled values on the x axis: one step each, labelled.
        let spec = PlotSpec {
            x: Some("ttl_ms".into()),
            ..PlotSpec::default()
        };
        let f = PanelFigure::new(&s, &spec, &labels).expect("figure");
        assert_eq!(f.category_labels(), vec!["short TTL", "45000"]);
    }

    #[test]
    fn bar_values_keep_the_digits_that_tell_policies_apart() {
        assert_eq!(bar_value(0.0649, 0.0061), "0.0649");
        assert_eq!(bar_value(0.0998, 0.0071), "0.0998");
        assert_eq!(bar_value(0.005, 0.011), "0.005");
        assert_eq!(bar_value(81.4, 0.5), "81.4");
        assert_eq!(bar_value(0.0, 0.0), "0");
    }

    #[test]
    fn uneven_sweeps_are_spaced_evenly() {
        let rows: String = [0, 50, 500, 5000]
            .iter()
            .map(|v| format!("d,spec,{v},45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n"))
            .collect();
        let s = summary(&format!("{HEAD}{rows}"));
        let f = PanelFigure::new(&s, &PlotSpec::default(), &[]).expect("figure");
        assert!(
            matches!(&f.x, XAxis::Even { labels, .. } if labels == &["0", "50", "500", "5000"])
        );
        assert_eq!(f.x_of(2, 0), 2.0);
        assert!(f.x_desc().ends_with("evenly spaced"));
        let spec = PlotSpec {
            x_scale: XScale::Linear,
            ..PlotSpec::default()
        };
        let f = PanelFigure::new(&s, &spec, &[]).expect("figure");
        assert!(matches!(f.x, XAxis::Numeric { .. }));
        // Near-even steps stay linear.
        let rows: String = [1000, 2000, 4000, 8000, 12000, 16000]
            .iter()
            .map(|v| format!("d,spec,{v},45000,20,0.1,0.01,0.1,0.01,9000,100,0,0\n"))
            .collect();
        let s = summary(&format!("{HEAD}{rows}"));
        let f = PanelFigure::new(&s, &PlotSpec::default(), &[]).expect("figure");
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
            let e = PanelFigure::new(&s, &spec, &[]).err().expect("fails");
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

    fn one_series(means: &[f64]) -> Vec<Vec<Pt>> {
        let pts = means.iter().enumerate();
        vec![pts.map(|(i, &m)| (i as f64, m, m * 0.9, m * 1.1)).collect()]
    }

    #[test]
    fn y_axis_keeps_zero_for_rates_and_room_for_latencies() {
        let y = YAxis::choose(Kind::Percent, false, true, &mut one_series(&[40.0, 60.0]));
        assert_eq!(y.range.0, 0.0);
        assert!((y.range.1 - 72.6).abs() < 1e-9, "{y:?}");
        assert!(y.log.is_none() && !y.empty);
        // Never above 100%.
        let y = YAxis::choose(Kind::Percent, false, true, &mut one_series(&[90.0]));
        assert_eq!(y.range, (0.0, 100.0));
        // A latency far from zero starts near its lowest value, on a step.
        let y = YAxis::choose(Kind::Millis, false, true, &mut one_series(&[9.0, 10.0]));
        assert!(y.range.0 > 0.0 && y.range.0 < 8.1, "{y:?}");
        // ... but bars start at zero.
        let y = YAxis::choose(Kind::Millis, true, true, &mut one_series(&[9.0, 10.0]));
        assert_eq!(y.range.0, 0.0);
        let y = YAxis::choose(Kind::Plain, false, true, &mut [Vec::new()]);
        assert!(y.empty);
        assert_eq!(y.range, (0.0, 1.0));
    }

    #[test]
    fn y_axis_goes_log_when_series_differ_by_30_times() {
        let mut all = one_series(&[80.0, 0.05]);
        let y = YAxis::choose(Kind::Percent, false, true, &mut all);
        let l = y.log.expect("log");
        assert_eq!(y.range, (l.zero_row(), l.top));
        // The points moved to their log positions.
        assert!((all[0][0].1 - 80f64.log10()).abs() < 1e-12);
        // Never for times, nor bars.
        let y = YAxis::choose(Kind::Millis, false, true, &mut one_series(&[80.0, 0.05]));
        assert!(y.log.is_none());
        let y = YAxis::choose(Kind::Percent, true, true, &mut one_series(&[80.0, 0.05]));
        assert!(y.log.is_none());
        // Nor a share whose good end is 100% (one starter).
        let y = YAxis::choose(Kind::Percent, false, false, &mut one_series(&[80.0, 0.05]));
        assert!(y.log.is_none());
    }

    #[test]
    fn category_labels_stagger_when_they_collide() {
        // 4 slots of (1000 - 120) / 4 = 220 px.
        let fit = CategoryFit::of(150, 4, 1000, 1.0);
        assert_eq!(
            fit,
            CategoryFit {
                stagger: false,
                max_w: 209
            }
        );
        let fit = CategoryFit::of(210, 4, 1000, 1.0);
        assert_eq!(
            fit,
            CategoryFit {
                stagger: true,
                max_w: 396
            }
        );
        // One label never staggers.
        assert!(!CategoryFit::of(5000, 1, 1000, 1.0).stagger);
    }

    #[test]
    fn units_follow_the_kind_and_the_size() {
        // Times in s, whatever their size, as the tables print them.
        let s = Unit::of(Kind::Millis);
        assert_eq!(
            (s.scale, s.axis_suffix(), s.value_suffix()),
            (0.001, " (s)".into(), " s".into())
        );
        let pct = Unit::of(Kind::Percent);
        assert_eq!(
            (pct.scale, pct.axis_suffix(), pct.value_suffix()),
            (100.0, " (%)".into(), "%".into())
        );
        let plain = Unit::of(Kind::Plain);
        assert_eq!(
            (plain.axis_suffix(), plain.value_suffix()),
            (String::new(), String::new())
        );
    }

    #[test]
    fn numeric_ranges_are_padded() {
        assert_eq!(padded_range(&[0.0, 100.0]), (-4.0, 104.0));
        assert_eq!(padded_range(&[5.0]), (4.0, 6.0));
        assert_eq!(padded_range(&[]), (0.0, 1.0));
        assert!(uneven(&[0.0, 50.0, 500.0, 5000.0]));
        assert!(!uneven(&[1000.0, 2000.0, 4000.0, 8000.0]));
        assert!(!uneven(&[0.0, 1000.0]));
    }
}
