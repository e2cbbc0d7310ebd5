//! Drawing helpers shared by the figures: palette, text styles, markers,
//! a legend strip and number formatting.

use super::output::FAMILY;
use anyhow::anyhow;
use plotters::coord::CoordTranslate;
use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Convert any plotters drawing error into an `anyhow::Error`.
pub fn de<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

pub const BACKGROUND: RGBColor = RGBColor(255, 255, 255);
pub const INK: RGBColor = RGBColor(33, 33, 33);
pub const MUTED: RGBColor = RGBColor(96, 96, 96);
pub const GRID: RGBColor = RGBColor(232, 232, 232);
pub const GRID_BOLD: RGBColor = RGBColor(205, 205, 205);

/// Colour-blind-safe palette (Okabe-Ito, yellow left out: it vanishes on
/// white), then a few extra distinct colours.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(230, 159, 0),   // orange
    RGBColor(0, 158, 115),   // green
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(110, 110, 110), // grey
    RGBColor(140, 86, 75),   // brown
    RGBColor(148, 103, 189), // violet
    RGBColor(23, 190, 207),  // teal
];

/// A fixed colour for each known policy, so that a policy keeps its colour
/// across figures; other values take palette colours in order.
pub fn policy_color(name: &str) -> Option<RGBColor> {
    match name {
        "spec" => Some(PALETTE[0]),
        "agentchat-0.36" => Some(PALETTE[1]),
        "tombstone" => Some(PALETTE[2]),
        "server-time" => Some(PALETTE[4]),
        "none" => Some(PALETTE[6]),
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
    let poly = |pts: Vec<(i32, i32)>| -> anyhow::Result<()> {
        let mut closed = pts.clone();
        closed.push(pts[0]);
        area.draw(&(EmptyElement::at(at.clone()) + Polygon::new(pts, fill)))
            .map_err(de)?;
        area.draw(&(EmptyElement::at(at.clone()) + PathElement::new(closed, edge)))
            .map_err(de)?;
        Ok(())
    };
    match shape {
        Shape::Circle => {
            area.draw(&(EmptyElement::at(at.clone()) + Circle::new((0, 0), r, fill)))
                .map_err(de)?;
            area.draw(&(EmptyElement::at(at) + Circle::new((0, 0), r, edge)))
                .map_err(de)?;
            Ok(())
        }
        Shape::TriangleUp => {
            let h = r + r / 3;
            poly(vec![(0, -h), (h, r * 2 / 3), (-h, r * 2 / 3)])
        }
        Shape::TriangleDown => {
            let h = r + r / 3;
            poly(vec![(0, h), (h, -r * 2 / 3), (-h, -r * 2 / 3)])
        }
        Shape::Square => {
            let s = r * 4 / 5;
            poly(vec![(-s, -s), (s, -s), (s, s), (-s, s)])
        }
        Shape::Diamond => {
            let s = r + r / 4;
            poly(vec![(0, -s), (s, 0), (0, s), (-s, 0)])
        }
        Shape::Cross => {
            let s = r;
            let st = color.stroke_width(3);
            area.draw(
                &(EmptyElement::at(at.clone()) + PathElement::new(vec![(-s, -s), (s, s)], st)),
            )
            .map_err(de)?;
            area.draw(&(EmptyElement::at(at) + PathElement::new(vec![(-s, s), (s, -s)], st)))
                .map_err(de)?;
            Ok(())
        }
    }
}

/// What a legend entry shows before its label.
#[derive(Debug, Clone)]
pub enum Swatch {
    /// A line with a marker on it (a series), dashed when `dashed`.
    Line {
        color: RGBColor,
        shape: Shape,
        dashed: bool,
    },
    /// A filled box (an interval kind), with an optional outline colour.
    Patch { fill: RGBAColor, edge: RGBColor },
    /// A lone marker.
    Mark {
        shape: Shape,
        color: RGBColor,
        filled: bool,
    },
    /// A short line (a reference line).
    Rule { color: RGBColor, dashed: bool },
}

pub struct LegendEntry {
    pub swatch: Swatch,
    pub label: String,
}

const SWATCH_W: i32 = 34;
const SWATCH_GAP: i32 = 8;
const ENTRY_GAP: i32 = 30;

fn entry_width(e: &LegendEntry, style: &TextStyle) -> i32 {
    SWATCH_W + SWATCH_GAP + text_width(&e.label, style)
}

/// Split legend entries into rows that fit `width` pixels.
pub fn legend_rows(entries: &[LegendEntry], style: &TextStyle, width: i32) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut used = 0;
    for (i, e) in entries.iter().enumerate() {
        let w = entry_width(e, style);
        if !cur.is_empty() && used + ENTRY_GAP + w > width {
            rows.push(std::mem::take(&mut cur));
            used = 0;
        }
        used += if cur.is_empty() { w } else { ENTRY_GAP + w };
        cur.push(i);
    }
    if !cur.is_empty() {
        rows.push(cur);
    }
    rows
}

/// Height a legend needs at `width`.
pub fn legend_height(entries: &[LegendEntry], style: &TextStyle, width: i32) -> i32 {
    let line = row_height(style);
    legend_rows(entries, style, width).len() as i32 * line
}

fn row_height(style: &TextStyle) -> i32 {
    (style.font.get_size() * 1.6) as i32
}

/// Draw the legend centred in `area`, rows top to bottom.
pub fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[LegendEntry],
    style: &TextStyle,
) -> anyhow::Result<()> {
    let (w, _) = area.dim_in_pixel();
    // Leave room for a viewer's font that runs wider than the embedded one.
    let width = w as i32 - 60;
    let line = row_height(style);
    for (ri, row) in legend_rows(entries, style, width).iter().enumerate() {
        let total: i32 = row
            .iter()
            .map(|&i| entry_width(&entries[i], style))
            .sum::<i32>()
            + ENTRY_GAP * (row.len() as i32 - 1);
        let mut x = (w as i32 - total) / 2;
        let cy = ri as i32 * line + line / 2;
        for &i in row {
            let e = &entries[i];
            draw_swatch(area, &e.swatch, x, cy)?;
            let tx = x + SWATCH_W + SWATCH_GAP;
            area.draw(&Text::new(
                e.label.clone(),
                (tx, cy),
                style.pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(de)?;
            x += entry_width(e, style) + ENTRY_GAP;
        }
    }
    Ok(())
}

fn draw_swatch<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    swatch: &Swatch,
    x: i32,
    cy: i32,
) -> anyhow::Result<()> {
    let mid = (x + SWATCH_W / 2, cy);
    match swatch {
        Swatch::Line {
            color,
            shape,
            dashed,
        } => {
            let st = color.stroke_width(3);
            if *dashed {
                for k in 0..3 {
                    let a = x + k * 13;
                    area.draw(&PathElement::new(
                        vec![(a, cy), ((a + 8).min(x + SWATCH_W), cy)],
                        st,
                    ))
                    .map_err(de)?;
                }
            } else {
                area.draw(&PathElement::new(vec![(x, cy), (x + SWATCH_W, cy)], st))
                    .map_err(de)?;
            }
            marker(area, mid, *shape, 6, color.to_rgba(), true)?;
        }
        Swatch::Patch { fill, edge } => {
            area.draw(&Rectangle::new(
                [(x, cy - 8), (x + SWATCH_W, cy + 8)],
                fill.filled(),
            ))
            .map_err(de)?;
            area.draw(&Rectangle::new(
                [(x, cy - 8), (x + SWATCH_W, cy + 8)],
                edge.stroke_width(1),
            ))
            .map_err(de)?;
        }
        Swatch::Mark {
            shape,
            color,
            filled,
        } => {
            marker(area, mid, *shape, 7, color.to_rgba(), *filled)?;
        }
        Swatch::Rule { color, dashed } => {
            let st = color.stroke_width(2);
            if *dashed {
                for k in 0..4 {
                    let a = x + k * 9;
                    area.draw(&PathElement::new(
                        vec![(a, cy), ((a + 5).min(x + SWATCH_W), cy)],
                        st,
                    ))
                    .map_err(de)?;
                }
            } else {
                area.draw(&PathElement::new(vec![(x, cy), (x + SWATCH_W, cy)], st))
                    .map_err(de)?;
            }
        }
    }
    Ok(())
}

/// The step between the labelled ticks plotters draws on an f64 axis from
/// `lo` to `hi` with at most `max_points` labels (its own algorithm: powers
/// of ten divided by 2, 5 or 10 while the labels fit).
pub fn tick_step(lo: f64, hi: f64, max_points: usize) -> f64 {
    let span = (hi - lo).abs();
    if !span.is_finite() || span < f64::EPSILON || max_points == 0 {
        return 1.0;
    }
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    let rem = |a: f64, b: f64| {
        let r = a - (a / b).floor() * b;
        if (r - b).abs() < f64::EPSILON { 0.0 } else { r }
    };
    let mut scale = 10f64.powf(span.log10().floor());
    if 1 + (span / scale).floor() as usize > max_points {
        scale *= 10.0;
    }
    'outer: for _ in 0..64 {
        let old = scale;
        for nxt in [2.0, 5.0, 10.0] {
            let mut left = lo - rem(lo, old / nxt);
            if left < lo {
                left += old / nxt;
            }
            let right = hi - rem(hi, old / nxt);
            let n = 1.0 + (right - left) / old * nxt;
            if n.round() as usize > max_points {
                break 'outer;
            }
            scale = old / nxt;
        }
        scale = old / 10.0;
    }
    scale
}

/// Decimals needed to print multiples of `step` exactly.
pub fn decimals_for(step: f64) -> usize {
    if !(step.is_finite() && step > 0.0) || step >= 1.0 {
        0
    } else {
        ((-step.log10()) - 1e-9).ceil().clamp(0.0, 8.0) as usize
    }
}

/// Format a tick value with the decimals its axis step needs.
pub fn tick(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    // "-0" is noise.
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        return format!("{:.decimals$}", 0.0);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_drop_useless_decimals() {
        assert_eq!(tick(10.0, 0), "10");
        assert_eq!(tick(2.5, 1), "2.5");
        assert_eq!(tick(-0.0001, 2), "0.00");
        assert_eq!(decimals_for(2.0), 0);
        assert_eq!(decimals_for(0.5), 1);
        assert_eq!(decimals_for(0.1), 1);
        assert_eq!(decimals_for(0.05), 2);
        assert_eq!(tick_step(0.0, 11.0, 7), 2.0);
        assert_eq!(tick_step(0.0, 0.66, 7), 0.1);
        assert_eq!(tick_step(0.0, 100.0, 7), 20.0);
    }

    #[test]
    fn colors_are_stable_for_policies() {
        let names: Vec<String> = ["x", "spec", "none"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let c = assign_colors(&names, true);
        assert_eq!(c[1], PALETTE[0]);
        assert_eq!(c[2], PALETTE[6]);
        assert_ne!(c[0], c[1]);
        assert_ne!(c[0], c[2]);
    }

    #[test]
    fn legend_wraps() {
        super::super::output::ensure_fonts().expect("fonts");
        let style = font(20.0);
        let entries: Vec<LegendEntry> = (0..8)
            .map(|i| LegendEntry {
                swatch: Swatch::Rule {
                    color: INK,
                    dashed: false,
                },
                label: format!("a fairly long legend label {i}"),
            })
            .collect();
        assert_eq!(legend_rows(&entries, &style, 100_000).len(), 1);
        assert!(legend_rows(&entries, &style, 800).len() >= 3);
    }
}
