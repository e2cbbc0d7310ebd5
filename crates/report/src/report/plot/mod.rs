//! Figures drawn from results: the standard comparison panel grid, plots of
//! any metrics against a swept key, and the timeline of one message from a
//! trace.
//!
//! Every figure is a PNG or an SVG, chosen by the output file's extension,
//! and is written atomically (a temporary file in the same directory, then a
//! rename). Text is drawn with an embedded font (Liberation Sans, see
//! `assets/fonts/`), so a PNG renders the same on a machine with no system
//! fonts; an SVG names the `sans-serif` family and leaves the glyphs to the
//! viewer.
//!
//! The code is split by job: `layout` computes where things go (header
//! rows, legend rows, ticks, the log axis, dashes, grids) as plain functions;
//! `draw` turns that into plotters calls once for every figure (palette,
//! fonts, markers, the header, axes in one house style, legend, error bars,
//! boxes, arrows); `output` picks the format and writes the file. Each figure
//! (`panels`, `pareto`, `timeline`) computes its own frame (ranges, units,
//! zoom) and then only draws its marks.
//!
//! Errors caused by the input (a missing file, an unknown column or metric,
//! a malformed CSV or trace line, a message that is not in the trace) are
//! [`InputError`]s inside the returned `anyhow::Error`; anything else (a
//! failed write) is not. `herdsim plot` maps the first kind to exit status 2.

mod draw;
pub mod fit;
mod layout;
mod output;
mod panels;
pub mod pareto;
mod summary;
mod timeline;
pub mod versus;

use std::path::Path;

pub use panels::{
    CATEGORY_METRICS, PlotSpec, STANDARD_METRICS, XScale, figure_size, parse_size, parse_x_scale,
};
pub use summary::Summary;
pub use timeline::{MAX_AGENT_LANES, TIMELINE_WIDTH, most_contested, timeline_height};
pub use versus::versus_figure;

// A problem with the input of a figure: the message names the file and the
// line or field at fault (crate::error, below the reports, so that
// labels.rs and this module share it without importing each other).
pub(crate) use crate::error::bad_input as bad;
pub use crate::error::{InputError, is_input_error};

/// The standard comparison figure of a sweep: a 2x2 grid of duplicate rate,
/// wasted-inference rate, p95 time to first response and unanswered rate
/// against the swept key, one line per policy with its 95% confidence band.
/// With no swept key (or none that varies) each panel shows one bar per
/// policy with its 95% CI instead. `title` replaces the default title, which
/// names the scenario. The image format follows `out`'s extension (`.png` or
/// `.svg`).
///
/// Returns the figure's notes (see [`metric_figure`]).
pub fn comparison_figure(
    summary_csv: &Path,
    out: &Path,
    title: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    let spec = PlotSpec {
        title: title.map(str::to_string),
        ..PlotSpec::default()
    };
    metric_figure(summary_csv, out, &spec)
}

/// [`comparison_figure`] drawn in memory as SVG, by the same drawing code:
/// the figure `herdsim run` draws beside `summary_csv` (the bytes of a
/// `summary.csv`), with `labels` (what `labels.toml` would hold); `shown`
/// names the summary in messages. Returns the SVG text and the figure's
/// notes. `herdsim ui` shows it; nothing is written.
pub fn comparison_svg(
    summary_csv: &[u8],
    shown: &Path,
    labels: &[crate::scenario::AxisLabels],
) -> anyhow::Result<(String, Vec<String>)> {
    let summary = Summary::from_reader(summary_csv, shown)?;
    let spec = PlotSpec::default();
    let figure = panels::PanelFigure::new(&summary, &spec, labels)?;
    let size = figure_size(figure.metric_count());
    output::ensure_fonts()?;
    let bytes = output::encode(output::Format::Svg, size, &figure)?;
    let svg = String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("the SVG is not UTF-8"))?;
    Ok((svg, figure.notes().to_vec()))
}

/// Plot the metrics of `spec` (the standard four when it names none) from a
/// `summary.csv`: one panel per metric, a single panel for a single metric.
/// See [`PlotSpec`] for the choice of x axis and series. The labels of a
/// `labels.toml` beside the CSV name the axes and values. On a categorical
/// x axis (a sweep of `schemes.scheme`) the standard metrics are
/// [`panels::CATEGORY_METRICS`], answers and their inference bill.
///
/// Returns the figure's notes, also drawn under its title: what the marks
/// alone do not tell (a series with the same numbers as another at a
/// category, a value that does not exist), one sentence each; empty when
/// there is nothing to say.
pub fn metric_figure(
    summary_csv: &Path,
    out: &Path,
    spec: &PlotSpec,
) -> anyhow::Result<Vec<String>> {
    let format = output::Format::from_path(out)?;
    let summary = Summary::load(summary_csv)?;
    let labels = crate::report::labels::read_beside(summary_csv)?;
    let figure = panels::PanelFigure::new(&summary, spec, &labels)?;
    let size = spec
        .size
        .unwrap_or_else(|| figure_size(figure.metric_count()));
    output::render(out, format, size, &figure)?;
    Ok(figure.notes().to_vec())
}

/// [`timeline_figure`] drawn in memory as SVG, by the same drawing code,
/// from the bytes of a trace (`shown` names it in messages): the SVG text
/// and the message drawn. `herdsim ui` shows it; nothing is written.
pub fn timeline_svg(
    trace: &[u8],
    shown: &Path,
    msg_id: Option<&str>,
) -> anyhow::Result<(String, String)> {
    let tl = timeline::Timeline::read(timeline::Trace::Bytes(trace, shown), msg_id)?;
    let fig = timeline::TimelineFigure {
        timeline: &tl,
        title: None,
    };
    let size = (TIMELINE_WIDTH, timeline_height(tl.lane_count()));
    output::ensure_fonts()?;
    let bytes = output::encode(output::Format::Svg, size, &fig)?;
    let svg = String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("the SVG is not UTF-8"))?;
    Ok((svg, tl.msg_id.clone()))
}

/// Draw the timeline of one message from a trace (JSON Lines written by
/// `herdsim run --trace`): one lane per agent that handled it, with CSMA
/// waits, inferences and their ends, and the RESPONDING_TO, YIELD and MSG
/// exchanges marked. With `msg_id` `None` the most contested message is
/// drawn (the first with the most inferences). Returns the id drawn.
pub fn timeline_figure(
    trace: &Path,
    msg_id: Option<&str>,
    out: &Path,
    title: Option<&str>,
) -> anyhow::Result<String> {
    let format = output::Format::from_path(out)?;
    let tl = timeline::Timeline::load(trace, msg_id)?;
    let fig = timeline::TimelineFigure {
        timeline: &tl,
        title: title.map(str::to_string),
    };
    let size = (TIMELINE_WIDTH, timeline_height(tl.lane_count()));
    output::render(out, format, size, &fig)?;
    Ok(tl.msg_id.clone())
}
