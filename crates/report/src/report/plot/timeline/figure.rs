//! The timeline drawn: a header, then one panel of lanes over the whole
//! exchange and, when the claims race within a few milliseconds, a zoomed
//! panel of that race on the right. Where things go (the time range, the
//! zoom, lane rows) is computed first; the drawing follows in layers.

use super::{ArrowKind, End, HEADER_H, LABEL_W, Lane, MarkKind, ServerKind, Timeline, fmt_ms};
use crate::report::plot::draw::{
    self, Axes, BLUE, GREEN, Header, INK, LIGHT_GREY, LegendEntry, MUTED, ORANGE, Plot, Shape,
    Swatch, Ticks, VIOLET,
};
use crate::report::plot::layout::{self, HeaderRows};
use crate::report::plot::output::Figure;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

// Colours of the timeline.
const CSMA_FILL: RGBColor = RGBColor(204, 222, 240);
const CSMA_EDGE: RGBColor = RGBColor(120, 160, 200);
const FIRST: RGBColor = GREEN;
const DUP: RGBColor = VIOLET;
const ABORTED: RGBColor = ORANGE;
const HUNG: RGBColor = LIGHT_GREY;
const CRASHED: RGBColor = RGBColor(90, 90, 90);
const CLAIM: RGBColor = BLUE;
const REPLY: RGBColor = RGBColor(0, 128, 90);
const YIELD: RGBColor = RGBColor(200, 30, 45);
const LOST: RGBColor = RGBColor(220, 0, 0);
const LANE_SHADE: RGBColor = RGBColor(245, 246, 248);
const LANE_RULE: RGBColor = RGBColor(215, 215, 215);

fn infer_color(how: &End) -> RGBColor {
    match how {
        End::Reply { first: true } => FIRST,
        End::Reply { first: false } => DUP,
        End::Aborted { .. } => ABORTED,
        End::Hung | End::Open => HUNG,
        End::Crashed => CRASHED,
    }
}

fn infer_label(how: &End) -> &'static str {
    match how {
        End::Reply { first: true } => "inference, first reply",
        End::Reply { first: false } => "inference, duplicate reply",
        End::Aborted { .. } => "inference aborted (wasted)",
        End::Hung | End::Open => "inference that never ends",
        End::Crashed => "inference cut by a crash",
    }
}

/// How a lane mark is drawn (in the legend too): its kind, shape, radius,
/// colour, fill, offset from the lane's centre line (in lanes, up), and
/// legend label.
struct MarkStyle(MarkKind, Shape, i32, RGBColor, bool, f64, &'static str);

/// Every mark kind, in legend order.
#[rustfmt::skip]
const MARKS: [MarkStyle; 8] = [
    MarkStyle(MarkKind::ClaimSent, Shape::TriangleUp, 7, CLAIM, true, 0.3, "RESPONDING_TO sent"),
    MarkStyle(MarkKind::YieldRecv, Shape::TriangleDown, 7, YIELD, true, 0.3, "YIELD received"),
    MarkStyle(MarkKind::MsgSent, Shape::Diamond, 7, REPLY, true, 0.3, "MSG (reply) sent"),
    MarkStyle(MarkKind::ClaimSeen, Shape::Circle, 5, CLAIM, false, -0.33, "claim seen"),
    MarkStyle(MarkKind::ReplySeen, Shape::Square, 6, REPLY, false, -0.33, "reply seen"),
    MarkStyle(MarkKind::Skip, Shape::Cross, 6, MUTED, true, 0.0, "skip"),
    MarkStyle(MarkKind::Lost, Shape::Cross, 7, LOST, true, 0.3, "lost in transit"),
    MarkStyle(MarkKind::Crash, Shape::Cross, 9, INK, true, 0.0, "crash"),
];

fn mark_style(kind: MarkKind) -> &'static MarkStyle {
    MARKS.iter().find(|m| m.0 == kind).unwrap_or(&MARKS[0])
}

/// The timeline drawn as a figure.
pub(crate) struct TimelineFigure<'a> {
    pub timeline: &'a Timeline,
    pub title: Option<String>,
}

impl TimelineFigure<'_> {
    fn legend(&self) -> Vec<LegendEntry> {
        let tl = self.timeline;
        let mut out = Vec::new();
        if tl.lanes.iter().any(|l| !l.csma.is_empty()) {
            let patch = Swatch::Patch(CSMA_FILL.to_rgba(), CSMA_EDGE);
            out.push(LegendEntry::new(patch, "CSMA wait"));
        }
        let ends: Vec<&End> = tl
            .lanes
            .iter()
            .flat_map(|l| &l.infers)
            .map(|f| &f.how)
            .collect();
        let mut seen: Vec<&'static str> = Vec::new();
        for how in [
            End::Reply { first: true },
            End::Reply { first: false },
            End::Aborted { winner: None },
            End::Hung,
            End::Crashed,
        ] {
            let label = infer_label(&how);
            if ends.iter().any(|e| infer_label(e) == label) && !seen.contains(&label) {
                seen.push(label);
                let c = infer_color(&how);
                out.push(LegendEntry::new(Swatch::Patch(c.mix(0.85), c), label));
            }
        }
        let has = |k: MarkKind| tl.lanes.iter().flat_map(|l| &l.marks).any(|m| m.kind == k);
        for &MarkStyle(kind, shape, _, color, filled, _, label) in &MARKS {
            if has(kind) {
                out.push(LegendEntry::new(Swatch::Mark(shape, color, filled), label));
            }
        }
        if tl.first_reply.is_some() {
            let rule = Swatch::Rule(FIRST, true);
            out.push(LegendEntry::new(rule, "first reply at the server"));
        }
        out
    }

    fn subtitle(&self) -> String {
        let tl = self.timeline;
        let mut parts = Vec::new();
        if let Some((kind, from, to)) = &tl.post {
            parts.push(format!("{kind} post from {from} to {to}"));
        }
        let inferred = tl.lanes.iter().filter(|l| !l.infers.is_empty()).count();
        let handled = tl.lanes.len() + tl.hidden;
        parts.push(format!(
            "{handled} agent{} handled it, {inferred} inferred, {} repl{}",
            if handled == 1 { "" } else { "s" },
            tl.replies,
            if tl.replies == 1 { "y" } else { "ies" }
        ));
        match &tl.first_reply {
            Some((t, a)) => parts.push(format!(
                "first reply from {a} after {} ms",
                fmt_ms(tl.rel_ms(*t))
            )),
            None => parts.push("no reply".to_string()),
        }
        if tl.hidden > 0 {
            parts.push(format!("{} waiting agents not drawn", tl.hidden));
        }
        parts.join(" · ")
    }
}

/// What one lane panel shows.
#[derive(Debug, Clone, PartialEq)]
struct PanelOpts {
    x0: f64,
    x1: f64,
    /// Lane names and outcomes on the left (the main panel only).
    labels: bool,
    caption: &'static str,
    /// The zoomed window, shaded on the main panel.
    highlight: Option<(f64, f64)>,
}

/// The panels of a timeline whose events end `end_ms` after the post: the
/// whole exchange (with 5% room after the last event and 2% before the
/// post), and the race for the floor zoomed when `race` finds one.
fn panels(end_ms: f64, race: impl Fn(f64) -> Option<(f64, f64)>) -> Vec<PanelOpts> {
    let x1 = if end_ms <= 0.0 { 100.0 } else { end_ms * 1.05 };
    let x0 = -(x1 * 0.02);
    let whole = |caption, highlight| PanelOpts {
        x0,
        x1,
        labels: true,
        caption,
        highlight,
    };
    match race(x1 - x0) {
        Some((a, b)) => vec![
            whole("Whole exchange (shaded: zoomed on the right)", Some((a, b))),
            PanelOpts {
                x0: a,
                x1: b,
                labels: false,
                caption: "Zoom: the race for the floor",
                highlight: None,
            },
        ],
        None => vec![whole("Whole exchange", None)],
    }
}

/// The window `a..b` widened to at least `min_w` around its middle.
fn at_least(a: f64, b: f64, min_w: f64) -> (f64, f64) {
    if b - a < min_w {
        let mid = (a + b) / 2.0;
        (mid - min_w / 2.0, mid + min_w / 2.0)
    } else {
        (a, b)
    }
}

impl Timeline {
    /// The race for the floor, in ms after the post: from the first claim to
    /// the last claim, YIELD or abort that follows it closely, when it is too
    /// short to read on the whole timeline (`full` ms wide).
    fn race(&self, full: f64) -> Option<(f64, f64)> {
        let mut times: Vec<f64> = Vec::new();
        let mut claims = 0;
        let mut yields = 0;
        for l in &self.lanes {
            for m in &l.marks {
                match m.kind {
                    MarkKind::ClaimSent => claims += 1,
                    MarkKind::YieldRecv => yields += 1,
                    MarkKind::ClaimSeen => {}
                    _ => continue,
                }
                times.push(self.rel_ms(m.t));
            }
            for f in &l.infers {
                if let (End::Aborted { .. }, Some(e)) = (&f.how, f.end) {
                    times.push(self.rel_ms(e));
                }
            }
        }
        for &(t, k) in &self.server {
            if matches!(k, ServerKind::ClaimRecv | ServerKind::YieldSent) {
                times.push(self.rel_ms(t));
            }
        }
        if claims < 2 && yields == 0 {
            return None;
        }
        closely_after_first(times, full)
    }
}

/// The run of `times` from the first on, each within 4% of `full` of the
/// one before, padded; `None` when it spans more than 10% of `full`.
fn closely_after_first(mut times: Vec<f64>, full: f64) -> Option<(f64, f64)> {
    times.sort_by(f64::total_cmp);
    let start = *times.first()?;
    let gap = full * 0.04;
    let mut end = start;
    for &t in &times {
        if t - end > gap {
            break;
        }
        end = t;
    }
    if end - start > full * 0.1 {
        return None;
    }
    let pad = (end - start) * 0.25 + 2.0;
    Some((start - pad, end + pad))
}

/// One panel being drawn: the timeline, the window, and lane rows.
struct Panel<'t, 'p, DB: DrawingBackend> {
    tl: &'t Timeline,
    pa: &'p Plot<DB>,
    o: &'p PanelOpts,
    /// Rows: the server, then one per agent lane.
    n: usize,
}

impl<DB: DrawingBackend> Panel<'_, '_, DB> {
    /// Lane y: the server on top, then agents in decision order.
    fn y_of(&self, lane: usize) -> f64 {
        (self.n - 1 - lane) as f64
    }

    fn inside(&self, x: f64) -> bool {
        x >= self.o.x0 && x <= self.o.x1
    }

    fn clip(&self, x: f64) -> f64 {
        x.clamp(self.o.x0, self.o.x1)
    }

    fn top(&self) -> f64 {
        self.n as f64 - 0.5
    }

    /// Lane `i`: shaded when odd, and a rule along it.
    fn draw_lane(&self, i: usize) -> anyhow::Result<()> {
        let (x0, x1) = (self.o.x0, self.o.x1);
        let y = self.y_of(i);
        if i % 2 == 1 {
            let shade = Rectangle::new([(x0, y - 0.5), (x1, y + 0.5)], LANE_SHADE.filled());
            self.pa.draw(&shade).map_err(draw::de)?;
        }
        draw::path(self.pa, vec![(x0, y), (x1, y)], LANE_RULE.stroke_width(1))
    }

    /// The zoomed window shaded, at least 10 pixels wide.
    fn draw_highlight(&self, (a, b): (f64, f64)) -> anyhow::Result<()> {
        let px_per_ms = f64::from(self.pa.dim_in_pixel().0.max(1)) / (self.o.x1 - self.o.x0);
        let (a, b) = at_least(a, b, 10.0 / px_per_ms);
        let corners = [(self.clip(a), -0.5), (self.clip(b), self.top())];
        let (fill, edge) = (RGBColor(255, 226, 120).mix(0.35), RGBColor(214, 170, 0));
        draw::boxed(self.pa, corners, fill.filled(), edge.stroke_width(1))
    }

    /// A bar from `a` to `b` ms around lane row `y`, `h` high, cut at the
    /// window's edges; false (nothing drawn) when it is outside.
    fn span(
        &self,
        (a, b): (f64, f64),
        y: f64,
        h: f64,
        fill: RGBAColor,
        edge: RGBColor,
    ) -> anyhow::Result<bool> {
        if b < self.o.x0 || a > self.o.x1 {
            return Ok(false);
        }
        let corners = [(self.clip(a), y - h), (self.clip(b), y + h)];
        draw::boxed(self.pa, corners, fill.filled(), edge.stroke_width(1))?;
        Ok(true)
    }

    /// The first reply at the server: a dashed rule across every lane.
    fn draw_first_reply_rule(&self, x: f64) -> anyhow::Result<()> {
        let top = self.top();
        let seg = (top + 0.5) / (self.n as f64 * 6.0);
        for (a, b) in layout::dashes(-0.5, top, seg, seg * 0.6) {
            draw::path(self.pa, vec![(x, a), (x, b)], FIRST.stroke_width(2))?;
        }
        Ok(())
    }

    /// CSMA waits, then inferences coloured by how they ended.
    fn draw_bars(&self, li: usize, lane: &Lane) -> anyhow::Result<()> {
        let y = self.y_of(li + 1);
        for &(a, b) in &lane.csma {
            let ab = (self.tl.rel_ms(a), self.tl.rel_ms(b));
            self.span(ab, y, 0.13, CSMA_FILL.to_rgba(), CSMA_EDGE)?;
        }
        for inf in &lane.infers {
            let a = self.tl.rel_ms(inf.start);
            let b = inf.end.map(|e| self.tl.rel_ms(e)).unwrap_or(f64::INFINITY);
            let c = infer_color(&inf.how);
            let faint = inf.end.is_none();
            if !self.span((a, b), y, 0.22, c.mix(if faint { 0.4 } else { 0.85 }), c)? {
                continue;
            }
            if let End::Aborted { .. } = inf.how
                && self.inside(b)
            {
                let st = YIELD.stroke_width(3);
                draw::path(self.pa, vec![(b, y - 0.3), (b, y + 0.3)], st)?;
            }
            if faint && self.o.labels && self.inside(a) {
                // Say why the bar runs off the edge.
                let label = if inf.how == End::Hung {
                    "hung, never ends"
                } else {
                    "still running"
                };
                let st = draw::font(14.0).color(&INK);
                let left = (HPos::Left, VPos::Center);
                draw::text(self.pa, (self.clip(a), y), (8, 0), label, &st, left)?;
            }
        }
        Ok(())
    }

    /// Arrows between agents and the server, both ends in the window.
    fn draw_arrows(&self) -> anyhow::Result<()> {
        let tl = self.tl;
        for ar in &tl.arrows {
            let Some(li) = tl.lanes.iter().position(|l| l.agent == ar.agent) else {
                continue;
            };
            let (ts, tr) = (tl.rel_ms(ar.t_send), tl.rel_ms(ar.t_recv));
            if !self.inside(ts) || !self.inside(tr) {
                continue;
            }
            let (ya, ys) = (self.y_of(li + 1), self.y_of(0));
            let color = match ar.kind {
                ArrowKind::Claim => CLAIM,
                ArrowKind::Msg => REPLY,
                ArrowKind::Yield => YIELD,
            };
            let (from, to) = if ar.up {
                ((ts, ya + 0.3), (tr, ys - 0.12))
            } else {
                ((ts, ys - 0.12), (tr, ya + 0.3))
            };
            draw::arrow(self.pa, from, to, color)?;
        }
        Ok(())
    }

    /// The server lane: the post, claims and replies received, YIELDs sent.
    fn draw_server(&self) -> anyhow::Result<()> {
        let ys = self.y_of(0);
        for &(t, kind) in &self.tl.server {
            let x = self.tl.rel_ms(t);
            if !self.inside(x) {
                continue;
            }
            let (shape, r, color) = match kind {
                ServerKind::Post => (Shape::Circle, 7, INK),
                ServerKind::ClaimRecv => (Shape::Circle, 4, CLAIM),
                ServerKind::MsgRecv => (Shape::Diamond, 6, REPLY),
                ServerKind::YieldSent => (Shape::Circle, 4, YIELD),
            };
            draw::marker(self.pa, (x, ys), shape, r, color.to_rgba(), true)?;
            if kind == ServerKind::Post {
                let st = draw::bold(15.0);
                let anchor = (HPos::Left, VPos::Bottom);
                draw::text(self.pa, (x, ys), (10, -8), "post", &st, anchor)?;
            }
        }
        Ok(())
    }

    /// The first reply's time, beside its rule: left of it when the rule is
    /// in the right half.
    fn draw_first_reply_label(&self, x: f64) -> anyhow::Result<()> {
        let right_half = (x - self.o.x0) > (self.o.x1 - self.o.x0) * 0.55;
        let (dx, h) = if right_half {
            (-8, HPos::Right)
        } else {
            (8, HPos::Left)
        };
        let st = draw::bold(15.0).color(&REPLY);
        let label = format!("first reply +{} ms", fmt_ms(x));
        let at = (x, self.top());
        draw::text(self.pa, at, (dx, 4), label, &st, (h, VPos::Top))
    }

    /// Agent lane marks, on top of everything.
    fn draw_marks(&self) -> anyhow::Result<()> {
        for (li, lane) in self.tl.lanes.iter().enumerate() {
            let y = self.y_of(li + 1);
            for m in &lane.marks {
                let x = self.tl.rel_ms(m.t);
                if !self.inside(x) {
                    continue;
                }
                let &MarkStyle(_, shape, r, color, filled, dy, _) = mark_style(m.kind);
                draw::marker(self.pa, (x, y + dy), shape, r, color.to_rgba(), filled)?;
            }
        }
        Ok(())
    }
}

impl TimelineFigure<'_> {
    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        o: &PanelOpts,
    ) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let tl = self.timeline;
        let n = tl.lane_count();
        let left = if o.labels { LABEL_W } else { 18 };
        let x_desc = if area.dim_in_pixel().0 > 700 {
            "time since the post reached the server (ms)"
        } else {
            "ms since the post"
        };
        let axes = Axes {
            caption: Some((o.caption.to_string(), draw::bold(18.0).color(&MUTED))),
            margins: [4, 22, 14, left],
            label_areas: (62, 0),
            x: (o.x0, o.x1),
            y: (-0.5, n as f64 - 0.5),
            x_ticks: Ticks::Every(90.0),
            y_ticks: Ticks::Hidden,
            x_desc: Some(x_desc.to_string()),
            y_desc: None,
            fonts: (16.0, 18.0),
        };
        let chart = draw::axes(area, &axes)?;
        let p = Panel {
            tl,
            pa: chart.plotting_area(),
            o,
            n,
        };
        for i in 0..n {
            p.draw_lane(i)?;
            if o.labels {
                let (px, py) = chart.backend_coord(&(o.x0, p.y_of(i)));
                let base = area.get_base_pixel();
                let at = (px - base.0 - 12, py - base.1);
                self.draw_lane_label(area, i, at, left as i32 - 20)?;
            }
        }
        if let Some(h) = o.highlight {
            p.draw_highlight(h)?;
        }
        let first = tl.first_reply.as_ref().map(|(t, _)| tl.rel_ms(*t));
        let first = first.filter(|&x| p.inside(x));
        if let Some(x) = first {
            p.draw_first_reply_rule(x)?;
        }
        for (li, lane) in tl.lanes.iter().enumerate() {
            p.draw_bars(li, lane)?;
        }
        p.draw_arrows()?;
        p.draw_server()?;
        if let Some(x) = first {
            p.draw_first_reply_label(x)?;
        }
        p.draw_marks()
    }

    /// Lane `i`'s name, right-aligned at `at`, and for an agent its
    /// outcome below, both at most `room` pixels wide.
    fn draw_lane_label<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        i: usize,
        (right, py): (i32, i32),
        room: i32,
    ) -> anyhow::Result<()> {
        let anchor = (HPos::Right, VPos::Center);
        if i == 0 {
            let st = draw::bold(17.0);
            return draw::text(area, (right, py), (0, 0), "server", &st, anchor);
        }
        let tl = self.timeline;
        let lane = &tl.lanes[i - 1];
        let st = draw::font(17.0);
        let name = draw::fit_text(&lane.agent, &st, room);
        draw::text(area, (right, py - 10), (0, 0), name, &st, anchor)?;
        let color = match lane.infers.last().map(|f| &f.how) {
            Some(End::Reply { first: true }) => REPLY,
            Some(how) => infer_color(how),
            None => MUTED,
        };
        let st = draw::font(14.5).color(&color);
        let outcome = draw::fit_text(&tl.outcome(lane), &st, room);
        draw::text(area, (right, py + 11), (0, 0), outcome, &st, anchor)
    }
}

impl Figure for TimelineFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let tl = self.timeline;
        let title = self
            .title
            .clone()
            .unwrap_or_else(|| format!("Timeline of message {}", tl.msg_id));
        let legend = self.legend();
        let rows = HeaderRows {
            fixed: Some(HEADER_H as i32),
            ..HeaderRows::scaled(1.0, 40.0, 32.0)
        };
        let header = Header {
            title: &title,
            subtitle: &self.subtitle(),
            legend: &legend,
            sizes: (28.0, 17.0, 17.0),
            rows,
        };
        let body = draw::header(root, &header)?;
        let panels = panels(tl.end_ms(), |full| tl.race(full));
        if let [main, zoom] = &panels[..] {
            let (bw, _) = body.dim_in_pixel();
            let (left, right) = body.split_horizontally((bw as f64 * 0.66) as i32);
            self.draw_panel(&left, main)?;
            self.draw_panel(&right, zoom)
        } else {
            panels.iter().try_for_each(|p| self.draw_panel(&body, p))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_panel_without_a_race_two_with() {
        let p = panels(1000.0, |_| None);
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].x0, p[0].x1), (-21.0, 1050.0));
        assert!(p[0].labels && p[0].highlight.is_none());
        let p = panels(1000.0, |full| {
            assert_eq!(full, 1071.0);
            Some((10.0, 20.0))
        });
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].highlight, Some((10.0, 20.0)));
        assert_eq!((p[1].x0, p[1].x1), (10.0, 20.0));
        assert!(!p[1].labels);
        // Nothing after the post: a 100 ms window.
        assert_eq!(panels(0.0, |_| None)[0].x1, 100.0);
    }

    #[test]
    fn a_race_is_a_close_run_of_events() {
        // Within 4% of 1000 ms of each other: 100..130, padded.
        let r = closely_after_first(vec![130.0, 100.0, 110.0, 900.0], 1000.0);
        assert_eq!(r, Some((100.0 - 9.5, 130.0 + 9.5)));
        // A run longer than 10% of the whole is readable as it is.
        let slow: Vec<f64> = (0..10).map(|i| f64::from(i) * 30.0).collect();
        assert_eq!(closely_after_first(slow, 1000.0), None);
        assert_eq!(closely_after_first(Vec::new(), 1000.0), None);
    }

    #[test]
    fn narrow_windows_are_widened_around_their_middle() {
        assert_eq!(at_least(10.0, 12.0, 4.0), (9.0, 13.0));
        assert_eq!(at_least(10.0, 20.0, 4.0), (10.0, 20.0));
    }

    #[test]
    fn every_mark_kind_has_one_style() {
        for m in &MARKS {
            assert_eq!(mark_style(m.0).6, m.6);
        }
    }
}
