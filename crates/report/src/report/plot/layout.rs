//! Layout shared by the figures: where things go, computed from numbers
//! alone (sizes, ranges, text widths already measured), with no drawing.
//! Everything here is a plain function with unit tests; `draw` turns its
//! results into plotters calls.

/// Scale factor of a figure drawn at `size` whose fonts and margins were
/// chosen for `base`: the smaller of the two ratios, kept within 0.5..3.
pub fn scale_factor(size: (u32, u32), base: (u32, u32)) -> f64 {
    (size.0 as f64 / base.0 as f64)
        .min(size.1 as f64 / base.1 as f64)
        .clamp(0.5, 3.0)
}

/// Rows and columns of the grid of `n` panels.
pub fn grid(n: usize) -> (usize, usize) {
    match n {
        0 | 1 => (1, 1),
        // Three in a row: a 2x2 grid would leave a hole.
        2 | 3 => (1, n),
        4 => (2, 2),
        _ => (n.div_ceil(3), 3),
    }
}

/// Vertical layout of a figure's header: the title and the subtitle
/// centred, the legend rows below them, then the panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderLayout {
    pub title_y: i32,
    pub subtitle_y: i32,
    pub legend_y: i32,
    /// Where the panels start.
    pub height: i32,
}

/// Heights of a header's parts, in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRows {
    /// Space above the title and below the legend.
    pub pad: i32,
    pub title_h: i32,
    pub subtitle_h: i32,
    /// A fixed header height; `None`: as tall as its content, at most half
    /// the figure.
    pub fixed: Option<i32>,
}

impl HeaderRows {
    /// Rows scaled from their size at scale 1.
    pub fn scaled(s: f64, title_h: f64, subtitle_h: f64) -> HeaderRows {
        HeaderRows {
            pad: (14.0 * s) as i32,
            title_h: (title_h * s) as i32,
            subtitle_h: (subtitle_h * s) as i32,
            fixed: None,
        }
    }

    /// Place the rows in a figure `fig_h` pixels high, with a legend
    /// `legend_h` pixels high (0: none).
    pub fn place(&self, legend_h: i32, fig_h: i32) -> HeaderLayout {
        let legend_y = self.pad + self.title_h + self.subtitle_h;
        let content = legend_y + legend_h + if legend_h > 0 { self.pad } else { 0 };
        HeaderLayout {
            title_y: self.pad,
            subtitle_y: self.pad + self.title_h,
            legend_y,
            height: self.fixed.unwrap_or(content).min(fig_h / 2),
        }
    }
}

/// Width of a legend entry's swatch, the gap to its label, and the gap
/// between entries.
pub const SWATCH_W: i32 = 34;
pub const SWATCH_GAP: i32 = 8;
pub const ENTRY_GAP: i32 = 30;

/// Split legend entries of widths `widths` (swatch and label) into rows
/// that fit `width` pixels: indices, row by row.
pub fn legend_rows(widths: &[i32], width: i32) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut used = 0;
    for (i, &w) in widths.iter().enumerate() {
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

/// Where each legend entry goes in an area `area_w` pixels wide: the left
/// end of its swatch and the centre line of its row. Rows are centred and
/// wrap at `area_w - 60`, leaving room for a viewer's font that runs wider
/// than the embedded one.
pub fn legend_places(widths: &[i32], area_w: i32, row_h: i32) -> Vec<(i32, i32)> {
    let mut out = vec![(0, 0); widths.len()];
    for (ri, row) in legend_rows(widths, area_w - 60).iter().enumerate() {
        let total: i32 =
            row.iter().map(|&i| widths[i]).sum::<i32>() + ENTRY_GAP * (row.len() as i32 - 1);
        let mut x = (area_w - total) / 2;
        let cy = ri as i32 * row_h + row_h / 2;
        for &i in row {
            out[i] = (x, cy);
            x += widths[i] + ENTRY_GAP;
        }
    }
    out
}

/// The dashes of a dashed line from `start` to `end`: one every `period`,
/// each `on` long, the last cut at `end`.
pub fn dashes(start: f64, end: f64, period: f64, on: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut a = start;
    while a < end && period > 0.0 {
        out.push((a, (a + on).min(end)));
        a += period;
    }
    out
}

/// An axis range plotters can lay ticks on in finite time. Its tick
/// search divides the span until the ticks are too many, and walks from
/// one end to the other by the step: on an infinite or NaN end, or a span
/// so small beside the values that adding the step changes nothing (the
/// objective of `tune --objective 1,1e200,1`), it never ends. So: ends
/// that are not finite are replaced (by the other end, or 0..1), ends
/// are kept within +-1e300 (the span stays finite), and a non-zero span
/// below 1e-9 of the values (or below 1e-12) is widened about its middle
/// to that. Every range a figure of sane values has is returned as it is.
pub fn sane_range(r: (f64, f64)) -> (f64, f64) {
    const BIG: f64 = 1e300;
    let (lo, hi) = match (r.0.is_finite(), r.1.is_finite()) {
        (true, true) => r,
        (true, false) => (r.0, r.0 + 1.0),
        (false, true) => (r.1 - 1.0, r.1),
        (false, false) => (0.0, 1.0),
    };
    let (lo, hi) = (lo.clamp(-BIG, BIG), hi.clamp(-BIG, BIG));
    let span = hi - lo;
    let mag = lo.abs().max(hi.abs());
    let min_span = (mag * 1e-9).max(1e-12);
    if span == 0.0 || span.abs() >= min_span {
        return (lo, hi);
    }
    let mid = lo / 2.0 + hi / 2.0;
    let half = span.signum() * min_span / 2.0;
    (mid - half, mid + half)
}

/// Scale and unit of a time axis whose largest value is `max_ms`: seconds
/// from 2 s on, milliseconds below.
pub fn time_unit(max_ms: f64) -> (f64, &'static str) {
    if max_ms >= 2000.0 {
        (0.001, "s")
    } else {
        (1.0, "ms")
    }
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

/// Decimals of the tick labels of an axis from `lo` to `hi` with at most
/// `labels` labels.
pub fn tick_decimals(lo: f64, hi: f64, labels: usize) -> usize {
    decimals_for(tick_step(lo, hi, labels))
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

/// A base-10 log axis over whole decades, `bottom..top` in log10 units,
/// with a row one decade below `bottom` for zero (and anything a CI takes
/// below the axis), labelled `0`.
#[derive(Debug, Clone, PartialEq)]
pub struct LogAxis {
    /// log10 of the lowest decade shown.
    pub bottom: f64,
    /// log10 of the top of the axis.
    pub top: f64,
}

impl LogAxis {
    /// Decades a log axis may span at most: smaller values go to the zero row.
    const MAX_DECADES: f64 = 5.0;

    /// A log axis when the positive `means` span a factor of 30 or more
    /// (zeros sit on the zero row); `highs` and `lows` (the CI ends) may
    /// stretch it by a decade.
    pub fn choose(means: &[f64], lows: &[f64], highs: &[f64]) -> Option<LogAxis> {
        let pos = means.iter().copied().filter(|v| *v > 0.0);
        let lo = pos.clone().fold(f64::INFINITY, f64::min);
        let hi = pos.fold(f64::NEG_INFINITY, f64::max);
        if !(lo.is_finite() && hi.is_finite()) || hi < 30.0 * lo {
            return None;
        }
        let top_v = highs.iter().copied().fold(hi, f64::max);
        let top = top_v.log10().ceil().max(hi.log10() + 0.1);
        // The lowest decade holds the smallest positive mean and CI low end.
        let low = lows.iter().copied().filter(|v| *v > 0.0).fold(lo, f64::min);
        let bottom = low.log10().floor().max(top.floor() - Self::MAX_DECADES);
        Some(LogAxis { bottom, top })
    }

    pub fn zero_row(&self) -> f64 {
        self.bottom - 1.0
    }

    /// Labels on the axis: one per decade and the zero row.
    pub fn labels(&self) -> usize {
        (self.top - self.zero_row()).round() as usize + 1
    }

    /// Position of a value on the axis.
    pub fn pos(&self, v: f64) -> f64 {
        if v > 0.0 {
            v.log10().max(self.zero_row()).min(self.top)
        } else {
            self.zero_row()
        }
    }

    /// A tick label: `0` on the zero row, the decade's value on a whole
    /// decade, nothing elsewhere.
    pub fn label(&self, v: f64) -> String {
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

/// `s` with its first letter in upper case.
/// Room for a marker on an edge of a y axis `range`: a point drawn on the
/// axis's bottom (a 0 on an axis from 0) or top (100% on a share's axis
/// that ends there) would be cut in half by the plot's edge, so the range
/// is widened by 4% on each side some value of `ys` sits on (within 1% of
/// the span). Nothing changes when no value sits on an edge; no tick is
/// added beyond the old ends (they are whole steps).
pub fn edge_room((y0, y1): (f64, f64), ys: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let span = y1 - y0;
    if !(span.is_finite() && span > 0.0) {
        return (y0, y1);
    }
    let (mut low, mut high) = (false, false);
    for y in ys.into_iter().filter(|y| y.is_finite()) {
        low |= y - y0 <= span * 0.01;
        high |= y1 - y <= span * 0.01;
    }
    (
        if low { y0 - span * 0.04 } else { y0 },
        if high { y1 + span * 0.04 } else { y1 },
    )
}

pub fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Absurd ranges come back finite, ordered as given, with a span the
    /// tick step can walk (adding a tenth of the step to an end moves it),
    /// and a range of sane values comes back unchanged.
    #[test]
    fn absurd_ranges_are_made_walkable() {
        for r in [
            (0.0, 1.0),
            (2.5, 3e4),
            (-1.0, 100.0),
            (5.0, 5.0),
            (1.0, 0.0),
        ] {
            assert_eq!(sane_range(r), r);
        }
        let absurd = [
            (0.0, f64::INFINITY),
            (f64::NEG_INFINITY, 3.0),
            (f64::NAN, f64::NAN),
            (-f64::MAX, f64::MAX),
            (1e200, 1e200 * (1.0 + 1e-15)),
            (1e200, 1.08e200),
            (0.0, 1e-300),
            (7.0, 7.0 + 1e-14),
        ];
        for r in absurd {
            let (lo, hi) = sane_range(r);
            assert!(
                lo.is_finite() && hi.is_finite() && (hi - lo).is_finite(),
                "{r:?}"
            );
            let step = tick_step(lo.min(hi), lo.max(hi), 12) / 10.0;
            assert!(lo.min(hi) + step > lo.min(hi), "{r:?}: step {step}");
        }
    }

    /// plotters' own tick search finishes on every absurd range once it
    /// is made sane (the figure of `tune --objective 1,1e200,1` drew for
    /// ever): a chart on an in-memory bitmap with each range as its y axis.
    #[test]
    fn a_chart_with_absurd_ranges_is_drawn() {
        use plotters::prelude::*;
        super::super::output::ensure_fonts().expect("fonts");
        for r in [
            (0.0, f64::INFINITY),
            (-f64::MAX, f64::MAX),
            (1e200, 1e200 * (1.0 + 1e-15)),
            (0.0, 1e-300),
        ] {
            let mut buf = vec![0u8; 200 * 150 * 3];
            let root = BitMapBackend::with_buffer(&mut buf, (200, 150)).into_drawing_area();
            let axes = super::super::draw::Axes {
                caption: None,
                margins: [5, 5, 5, 5],
                label_areas: (20, 40),
                x: r,
                y: r,
                x_ticks: super::super::draw::Ticks::Every(60.0),
                y_ticks: super::super::draw::Ticks::Every(40.0),
                x_desc: None,
                y_desc: None,
                fonts: (10.0, 10.0),
            };
            super::super::draw::axes(&root, &axes).expect("drawn");
        }
    }

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
        assert_eq!(tick_decimals(0.0, 0.66, 7), 1);
    }

    #[test]
    fn scale_follows_the_tighter_side_within_bounds() {
        assert_eq!(scale_factor((1600, 1200), (1600, 1200)), 1.0);
        assert_eq!(scale_factor((3200, 1200), (1600, 1200)), 1.0);
        assert_eq!(scale_factor((800, 1200), (1600, 1200)), 0.5);
        assert_eq!(scale_factor((200, 150), (1600, 1200)), 0.5);
        assert_eq!(scale_factor((20000, 20000), (1600, 1200)), 3.0);
    }

    #[test]
    fn grids_hold_every_panel() {
        assert_eq!(grid(1), (1, 1));
        assert_eq!(grid(2), (1, 2));
        assert_eq!(grid(3), (1, 3));
        assert_eq!(grid(4), (2, 2));
        assert_eq!(grid(7), (3, 3));
        for n in 1..20 {
            let (r, c) = grid(n);
            assert!(r * c >= n);
        }
    }

    #[test]
    fn header_rows_stack_and_fit() {
        let rows = HeaderRows::scaled(1.0, 40.0, 28.0);
        let l = rows.place(30, 1200);
        assert_eq!((l.title_y, l.subtitle_y, l.legend_y), (14, 54, 82));
        assert_eq!(l.height, 82 + 30 + 14);
        // No legend, no padding below it.
        assert_eq!(rows.place(0, 1200).height, 82);
        // Never more than half the figure.
        assert_eq!(rows.place(900, 1200).height, 600);
        let fixed = HeaderRows {
            fixed: Some(170),
            ..HeaderRows::scaled(1.0, 40.0, 32.0)
        };
        assert_eq!(fixed.place(30, 1000).legend_y, 86);
        assert_eq!(fixed.place(300, 1000).height, 170);
    }

    #[test]
    fn legend_wraps_and_centres_rows() {
        assert_eq!(legend_rows(&[100; 8], 100_000).len(), 1);
        // 100 + 30 + 100 fits in 240, a third does not.
        assert_eq!(
            legend_rows(&[100, 100, 100, 100, 100], 240),
            vec![vec![0, 1], vec![2, 3], vec![4]]
        );
        // An entry wider than the legend gets a row of its own.
        assert_eq!(legend_rows(&[500, 10], 240), vec![vec![0], vec![1]]);
        let p = legend_places(&[100, 100, 100], 300, 20);
        // Rows wrap at 300 - 60: two entries, then one, each row centred.
        assert_eq!(p, vec![(35, 10), (165, 10), (100, 30)]);
    }

    #[test]
    fn dashes_end_at_the_end() {
        assert_eq!(
            dashes(0.0, 34.0, 13.0, 8.0),
            vec![(0.0, 8.0), (13.0, 21.0), (26.0, 34.0)]
        );
        assert_eq!(dashes(0.0, 34.0, 9.0, 5.0).len(), 4);
        assert!(dashes(1.0, 1.0, 1.0, 1.0).is_empty());
        assert!(dashes(0.0, 1.0, 0.0, 1.0).is_empty());
    }

    #[test]
    fn times_switch_to_seconds_at_two() {
        assert_eq!(time_unit(1999.0), (1.0, "ms"));
        assert_eq!(time_unit(2000.0), (0.001, "s"));
    }

    fn choose(means: &[f64]) -> Option<LogAxis> {
        let lows: Vec<f64> = means.iter().map(|m| m * 0.9).collect();
        let highs: Vec<f64> = means.iter().map(|m| m * 1.1).collect();
        LogAxis::choose(means, &lows, &highs)
    }

    #[test]
    fn log_axis_only_when_the_series_span_a_factor_of_30() {
        assert_eq!(choose(&[50.0, 80.0, 0.0]), None);
        assert_eq!(choose(&[0.0, 0.0]), None);
        let l = choose(&[80.0, 0.72, 0.03]).expect("log");
        assert_eq!((l.bottom, l.zero_row()), (-2.0, -3.0));
        assert!(l.top >= 80f64.log10() + 0.1 && l.top <= 2.1, "{l:?}");
    }

    #[test]
    fn log_decades_are_whole_and_labelled() {
        // A tiny value cannot stretch the axis past five decades, and the
        // bottom stays on a whole decade so that every decade is labelled.
        let l = choose(&[90.0, 0.000_001]).expect("log");
        assert_eq!(l.bottom, l.bottom.round());
        assert_eq!(l.bottom, -3.0);
        assert_eq!(l.labels(), 7);
        assert_eq!(l.label(l.zero_row()), "0");
        assert_eq!(l.label(-3.0), "0.001");
        assert_eq!(l.label(0.0), "1");
        assert_eq!(l.label(2.0), "100");
        assert_eq!(l.label(0.5), "");
        assert_eq!(l.pos(0.0), l.zero_row());
        assert_eq!(l.pos(1e-9), l.zero_row());
        assert!((l.pos(10.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn capitalizes_the_first_letter() {
        assert_eq!(capitalize("duplicate rate"), "Duplicate rate");
        assert_eq!(capitalize(""), "");
    }

    /// Issue 47: a point at 0 on an axis from 0 (or at 100% on one ending
    /// there) gets room to be drawn whole; one inside leaves the range alone.
    #[test]
    fn markers_on_an_edge_get_room() {
        assert_eq!(edge_room((0.0, 100.0), [0.0, 50.0]), (-4.0, 100.0));
        assert_eq!(edge_room((0.0, 100.0), [100.0, 50.0]), (0.0, 104.0));
        assert_eq!(edge_room((0.0, 100.0), [0.0, 100.0]), (-4.0, 104.0));
        assert_eq!(edge_room((0.0, 100.0), [3.0, 90.0]), (0.0, 100.0));
        assert_eq!(edge_room((0.0, 100.0), [f64::NAN]), (0.0, 100.0));
        assert_eq!(edge_room((1.0, 1.0), [1.0]), (1.0, 1.0));
    }
}
