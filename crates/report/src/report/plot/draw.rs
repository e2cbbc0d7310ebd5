//! Drawing shared by the figures: palette, text styles, markers, the
//! header (title, subtitle, legend), axes in one house style, error bars,
//! boxes and arrows. Where things go comes from [`super::layout`]; this
//! module only turns it into plotters calls.

use super::layout::{self, HeaderRows, LogAxis, SWATCH_GAP, SWATCH_W};
use super::output::FAMILY;
use anyhow::anyhow;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::{CoordTranslate, Shift};
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Convert any plotters drawing error into an `anyhow::Error`.
pub fn de<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

/// A chart with f64 axes, and its plotting area (data coordinates).
pub type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;
pub type Plot<DB> = DrawingArea<DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

pub const BACKGROUND: RGBColor = RGBColor(255, 255, 255);
pub const INK: RGBColor = RGBColor(33, 33, 33);
pub const MUTED: RGBColor = RGBColor(96, 96, 96);
pub const GRID: RGBColor = RGBColor(232, 232, 232);
pub const GRID_BOLD: RGBColor = RGBColor(205, 205, 205);

// The colour-blind-safe palette (Okabe-Ito, yellow left out: it vanishes on
// white), then a few extra distinct colours. Every figure takes its colours
// from here.
pub const BLUE: RGBColor = RGBColor(0, 114, 178);
pub const ORANGE: RGBColor = RGBColor(230, 159, 0);
pub const GREEN: RGBColor = RGBColor(0, 158, 115);
pub const VERMILLION: RGBColor = RGBColor(213, 94, 0);
pub const PURPLE: RGBColor = RGBColor(204, 121, 167);
pub const SKY: RGBColor = RGBColor(86, 180, 233);
pub const GREY: RGBColor = RGBColor(110, 110, 110);
pub const BROWN: RGBColor = RGBColor(140, 86, 75);
pub const VIOLET: RGBColor = RGBColor(148, 103, 189);
pub const TEAL: RGBColor = RGBColor(23, 190, 207);
/// For what is out of play (over budget, never ending).
pub const LIGHT_GREY: RGBColor = RGBColor(150, 150, 150);

const PALETTE: [RGBColor; 10] = [
    BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY, GREY, BROWN, VIOLET, TEAL,
];

/// A fixed colour for each known policy, so that a policy keeps its colour
/// across figures; other values take palette colours in order.
pub fn policy_color(name: &str) -> Option<RGBColor> {
    match name {
        "spec" => Some(BLUE),
        "agentchat-0.36" => Some(ORANGE),
        "tombstone" => Some(GREEN),
        "server-time" => Some(PURPLE),
        "none" => Some(GREY),
        _ => None,
    }
}

/// Colours for a list of series keys: known policy names keep their own,
/// the others take the unused palette colours in order.
pub fn assign_colors(names: &[String], by_policy: bool) -> Vec<RGBColor> {
    let fixed: Vec<Option<RGBColor>> = names
        .iter()
        .map(|n| if by_policy { policy_color(n) } else { None })
        .collect();
    let mut free = PALETTE
        .iter()
        .copied()
        .filter(|c| !fixed.contains(&Some(*c)))
        .collect::<Vec<_>>()
        .into_iter()
        .cycle();
    fixed
        .into_iter()
        .map(|c| c.unwrap_or_else(|| free.next().unwrap_or(PALETTE[0])))
        .collect()
}

pub fn font(size: f64) -> TextStyle<'static> {
    TextStyle::from((FAMILY, size).into_font()).color(&INK)
}

pub fn bold(size: f64) -> TextStyle<'static> {
    TextStyle::from((FAMILY, size, FontStyle::Bold).into_font()).color(&INK)
}

/// Width in pixels of `text` in `style`.
pub fn text_width(text: &str, style: &TextStyle) -> i32 {
    style
        .font
        .box_size(text)
        .map(|(w, _)| w as i32)
        .unwrap_or((text.chars().count() as f64 * style.font.get_size() * 0.55) as i32)
}

/// Shorten `text` with an ellipsis so that it fits in `max` pixels.
pub fn fit_text(text: &str, style: &TextStyle, max: i32) -> String {
    if text_width(text, style) <= max {
        return text.to_string();
    }
    let mut chars: Vec<char> = text.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let s: String = chars.iter().collect::<String>() + "…";
        if text_width(&s, style) <= max {
            return s;
        }
    }
    String::new()
}

/// Draw `s` at `at` moved by `offset` pixels, anchored at `anchor`
/// (horizontal, vertical).
pub fn text<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    offset: (i32, i32),
    s: impl Into<String>,
    style: &TextStyle,
    anchor: (HPos, VPos),
) -> anyhow::Result<()> {
    let st = style.pos(Pos::new(anchor.0, anchor.1));
    put(area, at, Text::new(s.into(), offset, st))
}

/// Draw `e`, whose coordinates are pixel offsets, at the point `at`.
pub fn put<DB: DrawingBackend, CT: CoordTranslate, E>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    e: E,
) -> anyhow::Result<()>
where
    E: Drawable<DB>,
    for<'b> &'b E: PointCollection<'b, (i32, i32)>,
{
    area.draw(&(EmptyElement::at(at) + e)).map_err(de)
}

/// A line through `points`.
pub fn path<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    points: Vec<CT::From>,
    style: ShapeStyle,
) -> anyhow::Result<()> {
    area.draw(&PathElement::new(points, style)).map_err(de)
}

/// A dashed line through `points`: dashes `dash` pixels long, `gap` apart.
pub fn dashed<DB: DrawingBackend>(
    area: &Plot<DB>,
    points: Vec<(f64, f64)>,
    (dash, gap): (i32, i32),
    style: ShapeStyle,
) -> anyhow::Result<()> {
    let line = plotters::element::DashedPathElement::new(points, dash, gap, style);
    area.draw(&line).map_err(de)
}

/// A rectangle between two corners, filled with `fill` and outlined with
/// `edge`.
pub fn boxed<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    corners: [CT::From; 2],
    fill: ShapeStyle,
    edge: ShapeStyle,
) -> anyhow::Result<()>
where
    CT::From: Clone,
{
    area.draw(&Rectangle::new(corners.clone(), fill))
        .map_err(de)?;
    area.draw(&Rectangle::new(corners, edge)).map_err(de)
}

/// An interval from `from` to `to` (a CI), with caps `cap` pixels to each
/// side at both ends (none when 0; caps are horizontal, for a vertical
/// interval).
pub fn error_bar<DB: DrawingBackend>(
    area: &Plot<DB>,
    from: (f64, f64),
    to: (f64, f64),
    cap: i32,
    style: ShapeStyle,
) -> anyhow::Result<()> {
    path(area, vec![from, to], style)?;
    if cap > 0 {
        for end in [from, to] {
            put(
                area,
                end,
                PathElement::new(vec![(-cap, 0), (cap, 0)], style),
            )?;
        }
    }
    Ok(())
}

/// A line from `from` to `to` with a head at `to`.
pub fn arrow<DB: DrawingBackend>(
    area: &Plot<DB>,
    from: (f64, f64),
    to: (f64, f64),
    color: RGBColor,
) -> anyhow::Result<()> {
    path(area, vec![from, to], color.mix(0.75).stroke_width(2))?;
    let (ax, ay) = area.map_coordinate(&from);
    let (bx, by) = area.map_coordinate(&to);
    let (dx, dy) = ((bx - ax) as f64, (by - ay) as f64);
    let len = (dx * dx + dy * dy).sqrt();
    if len < 1.0 {
        return Ok(());
    }
    let (ux, uy) = (dx / len, dy / len);
    let (l, hw) = (11.0, 5.0);
    let p1 = ((-ux * l - uy * hw) as i32, (-uy * l + ux * hw) as i32);
    let p2 = ((-ux * l + uy * hw) as i32, (-uy * l - ux * hw) as i32);
    put(area, to, Polygon::new(vec![(0, 0), p1, p2], color.filled()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Circle,
    TriangleUp,
    TriangleDown,
    Square,
    Diamond,
    Cross,
}

impl Shape {
    /// Marker shapes for series that share a colour.
    pub fn nth(i: usize) -> Shape {
        [
            Shape::Circle,
            Shape::TriangleUp,
            Shape::Square,
            Shape::Diamond,
            Shape::TriangleDown,
            Shape::Cross,
        ][i % 6]
    }
}

/// Draw a marker of `shape`, `r` pixels in radius, centred at `at`.
pub fn marker<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    shape: Shape,
    r: i32,
    color: RGBAColor,
    filled: bool,
) -> anyhow::Result<()>
where
    CT::From: Clone,
{
    let fill = if filled {
        color.filled()
    } else {
        BACKGROUND.to_rgba().filled()
    };
    let edge = color.stroke_width(2);
    let (h, t, q, d) = (r + r / 3, r * 2 / 3, r * 4 / 5, r + r / 4);
    let pts = match shape {
        Shape::Circle => {
            put(area, at.clone(), Circle::new((0, 0), r, fill))?;
            return put(area, at, Circle::new((0, 0), r, edge));
        }
        Shape::Cross => {
            let st = color.stroke_width(3);
            put(
                area,
                at.clone(),
                PathElement::new(vec![(-r, -r), (r, r)], st),
            )?;
            return put(area, at, PathElement::new(vec![(-r, r), (r, -r)], st));
        }
        Shape::TriangleUp => vec![(0, -h), (h, t), (-h, t)],
        Shape::TriangleDown => vec![(0, h), (h, -t), (-h, -t)],
        Shape::Square => vec![(-q, -q), (q, -q), (q, q), (-q, q)],
        Shape::Diamond => vec![(0, -d), (d, 0), (0, d), (-d, 0)],
    };
    let mut closed = pts.clone();
    closed.push(pts[0]);
    put(area, at.clone(), Polygon::new(pts, fill))?;
    put(area, at, PathElement::new(closed, edge))
}

/// What a legend entry shows before its label.
#[derive(Debug, Clone)]
pub enum Swatch {
    /// A line with a marker on it (a series): colour, marker, dashed.
    Line(RGBColor, Shape, bool),
    /// A filled box (an interval kind): fill, outline.
    Patch(RGBAColor, RGBColor),
    /// A lone marker: shape, colour, filled.
    Mark(Shape, RGBColor, bool),
    /// A short line (a reference line): colour, dashed.
    Rule(RGBColor, bool),
}

pub struct LegendEntry {
    pub swatch: Swatch,
    pub label: String,
}

impl LegendEntry {
    pub fn new(swatch: Swatch, label: impl Into<String>) -> LegendEntry {
        LegendEntry {
            swatch,
            label: label.into(),
        }
    }
}

fn entry_widths(entries: &[LegendEntry], style: &TextStyle) -> Vec<i32> {
    entries
        .iter()
        .map(|e| SWATCH_W + SWATCH_GAP + text_width(&e.label, style))
        .collect()
}

fn row_height(style: &TextStyle) -> i32 {
    (style.font.get_size() * 1.6) as i32
}

/// Height a legend needs in an area `area_w` pixels wide.
pub fn legend_height(entries: &[LegendEntry], style: &TextStyle, area_w: i32) -> i32 {
    let rows = layout::legend_rows(&entry_widths(entries, style), area_w - 60);
    rows.len() as i32 * row_height(style)
}

/// Draw the legend in `area`, rows centred, top to bottom.
pub fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
    style: &TextStyle,
) -> anyhow::Result<()> {
    let (w, _) = area.dim_in_pixel();
    let widths = entry_widths(entries, style);
    let places = layout::legend_places(&widths, w as i32, row_height(style));
    for (e, (x, cy)) in entries.iter().zip(places) {
        draw_swatch(area, &e.swatch, x, cy)?;
        let at = (x + SWATCH_W + SWATCH_GAP, cy);
        let left = (HPos::Left, VPos::Center);
        text(area, at, (0, 0), e.label.clone(), style, left)?;
    }
    Ok(())
}

/// A horizontal line from `x` to the end of the swatch, dashed with a dash
/// every `period` pixels, `on` long, when `dash` is given.
fn swatch_line<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x: i32,
    cy: i32,
    dash: Option<(f64, f64)>,
    style: ShapeStyle,
) -> anyhow::Result<()> {
    let end = f64::from(x + SWATCH_W);
    let pieces = match dash {
        Some((period, on)) => layout::dashes(f64::from(x), end, period, on),
        None => vec![(f64::from(x), end)],
    };
    for (a, b) in pieces {
        path(area, vec![(a as i32, cy), (b as i32, cy)], style)?;
    }
    Ok(())
}

fn draw_swatch<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    swatch: &Swatch,
    x: i32,
    cy: i32,
) -> anyhow::Result<()> {
    let mid = (x + SWATCH_W / 2, cy);
    match *swatch {
        Swatch::Line(color, shape, dashed) => {
            let dash = dashed.then_some((13.0, 8.0));
            swatch_line(area, x, cy, dash, color.stroke_width(3))?;
            marker(area, mid, shape, 6, color.to_rgba(), true)
        }
        Swatch::Patch(fill, edge) => boxed(
            area,
            [(x, cy - 8), (x + SWATCH_W, cy + 8)],
            fill.filled(),
            edge.stroke_width(1),
        ),
        Swatch::Mark(shape, color, filled) => marker(area, mid, shape, 7, color.to_rgba(), filled),
        Swatch::Rule(color, dashed) => {
            let dash = dashed.then_some((9.0, 5.0));
            swatch_line(area, x, cy, dash, color.stroke_width(2))
        }
    }
}

/// A figure's header: a title and a subtitle centred, the legend below.
pub struct Header<'a> {
    pub title: &'a str,
    pub subtitle: &'a str,
    pub legend: &'a [LegendEntry],
    /// Font sizes of the title, the subtitle and the legend.
    pub sizes: (f64, f64, f64),
    pub rows: HeaderRows,
}

/// Clear `root`, draw `h` at its top and return the area below it.
pub fn header<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    h: &Header,
) -> anyhow::Result<DrawingArea<DB, Shift>> {
    root.fill(&BACKGROUND).map_err(de)?;
    let (w, fig_h) = root.dim_in_pixel();
    let (w, fig_h) = (w as i32, fig_h as i32);
    let title_font = bold(h.sizes.0);
    let sub_font = font(h.sizes.1).color(&MUTED);
    let legend_font = font(h.sizes.2);
    let l = h
        .rows
        .place(legend_height(h.legend, &legend_font, w), fig_h);
    let top = (HPos::Center, VPos::Top);
    let title = fit_text(h.title, &title_font, w - 40);
    text(root, (w / 2, l.title_y), (0, 0), title, &title_font, top)?;
    let sub = fit_text(h.subtitle, &sub_font, w - 40);
    text(root, (w / 2, l.subtitle_y), (0, 0), sub, &sub_font, top)?;
    let (head, body) = root.split_vertically(l.height);
    if !h.legend.is_empty() {
        let (_, legend_area) = head.split_vertically(l.legend_y);
        draw_legend(&legend_area, h.legend, &legend_font)?;
    }
    Ok(body)
}

/// The body of a figure split into a grid of `rows` x `cols` panels, with
/// a margin of 8 pixels (at scale `s`) at the sides and the bottom.
pub fn cells<DB: DrawingBackend>(
    body: &DrawingArea<DB, Shift>,
    s: f64,
    (rows, cols): (usize, usize),
) -> Vec<DrawingArea<DB, Shift>> {
    let m = (8.0 * s) as i32;
    body.margin(0, m, m, m).split_evenly((rows, cols))
}

/// The tick labels of an axis.
#[derive(Debug, Clone)]
pub enum Ticks {
    /// No labels and no grid lines (the figure draws its own).
    Hidden,
    /// At most this many labels, with the decimals their step needs.
    Linear(usize),
    /// One label about every this many pixels of plotting area (3 to 12).
    Every(f64),
    /// One label per decade.
    Log(LogAxis),
}

impl Ticks {
    fn count(&self, pixels: u32) -> usize {
        match self {
            Ticks::Hidden => 0,
            Ticks::Linear(n) => *n,
            Ticks::Every(px) => ((f64::from(pixels.max(1)) / px) as usize).clamp(3, 12),
            Ticks::Log(l) => l.labels(),
        }
    }

    fn label(&self, v: f64, decimals: usize) -> String {
        match self {
            Ticks::Log(l) => l.label(v),
            _ => layout::tick(v, decimals),
        }
    }
}

/// The frame of a panel: caption, margins, ranges, ticks and axis names.
pub struct Axes {
    pub caption: Option<(String, TextStyle<'static>)>,
    /// Top, right, bottom, left.
    pub margins: [u32; 4],
    /// Height of the x label area, width of the y label area.
    pub label_areas: (u32, u32),
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub x_ticks: Ticks,
    pub y_ticks: Ticks,
    pub x_desc: Option<String>,
    pub y_desc: Option<String>,
    /// Font sizes of the tick labels and of the axis names.
    pub fonts: (f64, f64),
}

impl Axes {
    /// Margins of `m` all round but `right` on the right.
    pub fn margins(m: f64, right: f64) -> [u32; 4] {
        [m as u32, right as u32, m as u32, m as u32]
    }
}

/// Build the chart of `a` on `area` and draw its grid, axes and labels in
/// the house style.
pub fn axes<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    a: &Axes,
) -> anyhow::Result<Chart<'a, DB>>
where
    DB::ErrorType: 'static,
{
    let (x, y) = (layout::sane_range(a.x), layout::sane_range(a.y));
    let mut builder = ChartBuilder::on(area);
    if let Some((c, st)) = &a.caption {
        builder.caption(c, st.clone());
    }
    let [top, right, bottom, left] = a.margins;
    let mut chart = builder
        .margin_top(top)
        .margin_right(right)
        .margin_bottom(bottom)
        .margin_left(left)
        .x_label_area_size(a.label_areas.0)
        .y_label_area_size(a.label_areas.1)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(de)?;
    let (pw, ph) = chart.plotting_area().dim_in_pixel();
    let (xn, yn) = (a.x_ticks.count(pw), a.y_ticks.count(ph));
    let x_dec = layout::tick_decimals(x.0, x.1, xn);
    let y_dec = layout::tick_decimals(y.0, y.1, yn);
    let xfmt = |v: &f64| a.x_ticks.label(*v, x_dec);
    let yfmt = |v: &f64| a.y_ticks.label(*v, y_dec);
    let mut mesh = chart.configure_mesh();
    mesh.max_light_lines(1)
        .label_style(font(a.fonts.0).color(&MUTED))
        .axis_desc_style(font(a.fonts.1))
        .bold_line_style(GRID_BOLD.stroke_width(1))
        .light_line_style(GRID.stroke_width(1))
        .axis_style(MUTED.stroke_width(1))
        .x_labels(xn)
        .y_labels(yn)
        .x_label_formatter(&xfmt)
        .y_label_formatter(&yfmt);
    if let Ticks::Hidden = a.x_ticks {
        mesh.disable_x_mesh();
    }
    if let Ticks::Hidden = a.y_ticks {
        mesh.disable_y_mesh();
    }
    if let Some(d) = &a.x_desc {
        mesh.x_desc(d.clone());
    }
    if let Some(d) = &a.y_desc {
        mesh.y_desc(d.clone());
    }
    mesh.draw().map_err(de)?;
    Ok(chart)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colors_are_stable_for_policies() {
        let names: Vec<String> = ["x", "spec", "none"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let c = assign_colors(&names, true);
        assert_eq!(c[1], BLUE);
        assert_eq!(c[2], GREY);
        assert_ne!(c[0], c[1]);
        assert_ne!(c[0], c[2]);
    }

    #[test]
    fn legend_wraps() {
        super::super::output::ensure_fonts().expect("fonts");
        let style = font(20.0);
        let entries: Vec<LegendEntry> = (0..8)
            .map(|i| LegendEntry::new(Swatch::Rule(INK, false), format!("long legend label {i}")))
            .collect();
        let line = row_height(&style);
        assert_eq!(legend_height(&entries, &style, 100_000), line);
        assert!(legend_height(&entries, &style, 800) >= 3 * line);
    }

    #[test]
    fn ticks_count_by_pixels() {
        assert_eq!(Ticks::Every(90.0).count(900), 10);
        assert_eq!(Ticks::Every(90.0).count(10), 3);
        assert_eq!(Ticks::Every(90.0).count(5000), 12);
        assert_eq!(Ticks::Hidden.count(5000), 0);
        assert_eq!(Ticks::Linear(7).label(2.5, 1), "2.5");
    }
}
