//! The timeline of one message from a trace (JSON Lines, one replication):
//! a lane for the server and one per agent that handled the message, with
//! CSMA waits, inferences and how they ended, and the RESPONDING_TO, YIELD
//! and MSG exchanges drawn as arrows between lanes, like a sequence chart.

use super::bad;
use super::draw::{self, LegendEntry, Shape, Swatch, de};
use super::output::Figure;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::io::BufRead;
use std::path::Path;

/// Pixel width of every timeline.
pub const TIMELINE_WIDTH: u32 = 1600;
/// Agent lanes drawn at most; the others are counted in the subtitle.
pub const MAX_AGENT_LANES: usize = 24;

const HEADER_H: u32 = 170;
const AXIS_H: u32 = 130;
const LABEL_W: u32 = 220;
const LANE_H: u32 = 64;

/// Pixel height of a timeline with `lanes` lanes (the server lane included).
pub fn timeline_height(lanes: usize) -> u32 {
    (HEADER_H + AXIS_H + LANE_H * lanes.max(1) as u32).max(420)
}

#[derive(Debug, Clone, PartialEq)]
enum End {
    /// Completed; `first` when its MSG was the first reply to reach the server.
    Reply {
        first: bool,
    },
    Aborted {
        winner: Option<String>,
    },
    Hung,
    Crashed,
    /// The trace ends before the inference does.
    Open,
}

#[derive(Debug, Clone)]
struct Infer {
    start: u64,
    planned: Option<u64>,
    end: Option<u64>,
    how: End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MarkKind {
    ClaimSent,
    MsgSent,
    YieldRecv,
    ClaimSeen,
    ReplySeen,
    Skip,
    Lost,
    Crash,
}

#[derive(Debug, Clone)]
struct Mark {
    t: u64,
    kind: MarkKind,
}

#[derive(Debug, Clone, Default)]
struct Lane {
    agent: String,
    csma: Vec<(u64, u64)>,
    infers: Vec<Infer>,
    marks: Vec<Mark>,
    skip_reason: Option<String>,
    /// Sort key: when the agent decided (CSMA fired or inference started).
    order: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArrowKind {
    Claim,
    Msg,
    Yield,
}

#[derive(Debug, Clone)]
struct Arrow {
    agent: String,
    up: bool,
    t_send: u64,
    t_recv: u64,
    kind: ArrowKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerKind {
    Post,
    ClaimRecv,
    MsgRecv,
    YieldSent,
}

/// Everything the timeline of one message shows, read from a trace.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub msg_id: String,
    t0: u64,
    post: Option<(String, String, String)>,
    lanes: Vec<Lane>,
    hidden: usize,
    server: Vec<(u64, ServerKind)>,
    arrows: Vec<Arrow>,
    first_reply: Option<(u64, String)>,
    replies: usize,
}

/// One trace line: line number, time, the parsed object.
struct Line {
    no: usize,
    t: u64,
    ev: String,
    v: Value,
}

fn id_str(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Read a trace, calling `f` for each event line (blank lines skipped).
fn scan(path: &Path, mut f: impl FnMut(Line)) -> anyhow::Result<()> {
    let shown = path.display().to_string();
    if !path.exists() {
        return Err(bad(format!("{shown}: no such file")));
    }
    let file = std::fs::File::open(path).map_err(|e| bad(format!("{shown}: cannot open: {e}")))?;
    let reader = std::io::BufReader::new(file);
    for (i, line) in reader.lines().enumerate() {
        let no = i + 1;
        let line = line.map_err(|e| bad(format!("{shown}: line {no}: cannot read: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| bad(format!("{shown}: line {no}: not a JSON object: {e}")))?;
        if !v.is_object() {
            return Err(bad(format!("{shown}: line {no}: not a JSON object")));
        }
        let t = v.get("t_us").and_then(Value::as_u64).ok_or_else(|| {
            bad(format!(
                "{shown}: line {no}: field `t_us` missing or not a non-negative integer"
            ))
        })?;
        let ev = str_of(&v, "ev")
            .ok_or_else(|| {
                bad(format!(
                    "{shown}: line {no}: field `ev` missing or not a string"
                ))
            })?
            .to_string();
        f(Line { no, t, ev, v });
    }
    Ok(())
}

/// The id of the first message with the most inferences in a trace.
pub fn most_contested(path: &Path) -> anyhow::Result<String> {
    let mut infers: HashMap<String, usize> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    scan(path, |l| {
        let Some(m) = id_str(l.v.get("msg_id")).filter(|_| l.ev == "infer") else {
            return;
        };
        if !infers.contains_key(&m) {
            order.push(m.clone());
        }
        *infers.entry(m).or_insert(0) += 1;
    })?;
    let mut best: Option<(usize, &String)> = None;
    for m in &order {
        let n = infers.get(m).copied().unwrap_or(0);
        if best.is_none_or(|(bn, _)| n > bn) {
            best = Some((n, m));
        }
    }
    best.map(|(_, m)| m.clone()).ok_or_else(|| {
        bad(format!(
            "{}: no message in the trace has an inference; name one with --msg",
            path.display()
        ))
    })
}

/// Does this event concern message `id`?
fn concerns(l: &Line, id: &str) -> bool {
    if id_str(l.v.get("msg_id")).as_deref() == Some(id) {
        return true;
    }
    if let Some(m) = l.v.get("msg") {
        if id_str(m.get("msg_id")).as_deref() == Some(id)
            || id_str(m.get("in_reply_to")).as_deref() == Some(id)
        {
            return true;
        }
        if str_of(m, "type") == Some("MSG") && id_str(m.get("id")).as_deref() == Some(id) {
            return true;
        }
    }
    false
}

impl Timeline {
    /// Read the timeline of `msg_id` (or of the most contested message) from
    /// a trace file.
    pub fn load(path: &Path, msg_id: Option<&str>) -> anyhow::Result<Timeline> {
        let shown = path.display().to_string();
        let mut posts: Vec<String> = Vec::new();
        let id = match msg_id {
            Some(id) => id.to_string(),
            None => most_contested(path)?,
        };
        let mut lines: Vec<Line> = Vec::new();
        let mut crashes: Vec<Line> = Vec::new();
        scan(path, |l| {
            if l.ev == "post" && posts.len() < 6 {
                posts.extend(id_str(l.v.get("msg_id")));
            }
            if l.ev == "crash" {
                crashes.push(l);
            } else if concerns(&l, &id) {
                lines.push(l);
            }
        })?;
        if lines.is_empty() {
            let known = if posts.is_empty() {
                "the trace has no posts".to_string()
            } else {
                let more = if posts.len() > 5 { ", …" } else { "" };
                format!(
                    "posts include {}{more}",
                    posts[..posts.len().min(5)].join(", ")
                )
            };
            return Err(bad(format!(
                "{shown}: no message `{id}` in the trace ({known})"
            )));
        }
        lines.extend(crashes);
        lines.sort_by_key(|l| (l.t, l.no));
        Ok(Self::build(id, &lines))
    }

    fn build(id: String, lines: &[Line]) -> Timeline {
        // Which agents handled the message.
        let touching = |l: &Line| -> Option<String> {
            match l.ev.as_str() {
                "csma" | "skip" | "infer" | "abort" | "done" | "send" => {
                    str_of(&l.v, "agent").map(str::to_string)
                }
                "lost" if str_of(&l.v, "dir") == Some("up") => {
                    str_of(&l.v, "agent").map(str::to_string)
                }
                _ => None,
            }
        };
        let mut lanes: Vec<Lane> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for l in lines {
            if let Some(a) = touching(l)
                && !index.contains_key(&a)
            {
                index.insert(a.clone(), lanes.len());
                lanes.push(Lane {
                    agent: a,
                    order: u64::MAX,
                    ..Lane::default()
                });
            }
        }
        let post = lines.iter().find(|l| l.ev == "post");
        let t0 = post
            .map(|l| l.t)
            .unwrap_or_else(|| lines.first().map(|l| l.t).unwrap_or(0));
        let post_info = post.map(|l| {
            (
                str_of(&l.v, "kind").unwrap_or("channel").to_string(),
                str_of(&l.v, "from").unwrap_or("?").to_string(),
                str_of(&l.v, "to").unwrap_or("?").to_string(),
            )
        });

        // The message is live until its last event or planned timer; a crash
        // after that belongs to other messages (unless an inference hangs).
        let live_until = lines
            .iter()
            .filter(|l| l.ev != "crash")
            .map(|l| {
                l.t.max(l.v.get("until_us").and_then(Value::as_u64).unwrap_or(0))
            })
            .max()
            .unwrap_or(t0);

        let mut server: Vec<(u64, ServerKind)> = Vec::new();
        if post.is_some() {
            server.push((t0, ServerKind::Post));
        }
        let mut arrows: Vec<Arrow> = Vec::new();
        let mut pending_up: HashMap<(String, &'static str), VecDeque<u64>> = HashMap::new();
        let mut pending_down: HashMap<String, VecDeque<u64>> = HashMap::new();
        let mut first_reply: Option<(u64, String)> = None;
        let mut replies = 0;

        for l in lines {
            let agent = str_of(&l.v, "agent").map(str::to_string);
            let lane = agent.as_ref().and_then(|a| index.get(a).copied());
            let msg = l.v.get("msg");
            let mtype = msg.and_then(|m| str_of(m, "type"));
            let is_reply =
                msg.is_some_and(|m| id_str(m.get("in_reply_to")).as_deref() == Some(id.as_str()));
            match (l.ev.as_str(), lane) {
                ("csma", Some(i)) => {
                    let until = l.v.get("until_us").and_then(Value::as_u64).unwrap_or(l.t);
                    lanes[i].csma.push((l.t, until.max(l.t)));
                    lanes[i].order = lanes[i].order.min(until);
                }
                ("skip", Some(i)) => {
                    lanes[i].marks.push(Mark {
                        t: l.t,
                        kind: MarkKind::Skip,
                    });
                    lanes[i].skip_reason = Some(str_of(&l.v, "reason").unwrap_or("").to_string());
                }
                ("infer", Some(i)) => {
                    let planned = l.v.get("until_us").and_then(Value::as_u64);
                    lanes[i].infers.push(Infer {
                        start: l.t,
                        planned,
                        end: None,
                        how: if planned.is_none() {
                            End::Hung
                        } else {
                            End::Open
                        },
                    });
                    lanes[i].order = lanes[i].order.min(l.t);
                }
                ("abort", Some(i)) => {
                    let winner = str_of(&l.v, "winner").map(str::to_string);
                    if let Some(inf) = lanes[i].infers.iter_mut().rev().find(|f| f.end.is_none()) {
                        inf.end = Some(l.t);
                        inf.how = End::Aborted { winner };
                    }
                }
                ("done", Some(i)) => {
                    if let Some(inf) = lanes[i].infers.iter_mut().rev().find(|f| f.end.is_none()) {
                        inf.end = Some(l.t);
                        inf.how = End::Reply { first: false };
                    }
                }
                ("crash", Some(i)) => {
                    let hanging = lanes[i]
                        .infers
                        .iter()
                        .any(|f| f.end.is_none() && f.how == End::Hung);
                    if l.t >= t0 && (l.t <= live_until || hanging) {
                        lanes[i].marks.push(Mark {
                            t: l.t,
                            kind: MarkKind::Crash,
                        });
                        if let Some(inf) =
                            lanes[i].infers.iter_mut().rev().find(|f| f.end.is_none())
                        {
                            inf.end = Some(l.t);
                            inf.how = End::Crashed;
                        }
                    }
                }
                ("send", Some(i)) => {
                    let kind = match mtype {
                        Some("RESPONDING_TO") => Some((MarkKind::ClaimSent, "RESPONDING_TO")),
                        Some("MSG") if is_reply => Some((MarkKind::MsgSent, "MSG")),
                        _ => None,
                    };
                    if let Some((mk, ty)) = kind {
                        lanes[i].marks.push(Mark { t: l.t, kind: mk });
                        if let Some(a) = &agent {
                            pending_up
                                .entry((a.clone(), ty))
                                .or_default()
                                .push_back(l.t);
                        }
                    }
                }
                ("server_recv", _) => {
                    let (sk, ty, ak) = match mtype {
                        Some("RESPONDING_TO") => {
                            (ServerKind::ClaimRecv, "RESPONDING_TO", ArrowKind::Claim)
                        }
                        Some("MSG") if is_reply => (ServerKind::MsgRecv, "MSG", ArrowKind::Msg),
                        _ => continue,
                    };
                    server.push((l.t, sk));
                    if sk == ServerKind::MsgRecv {
                        replies += 1;
                        if first_reply.is_none() {
                            first_reply = Some((l.t, agent.clone().unwrap_or_default()));
                        }
                    }
                    let sent = match (&agent, lane) {
                        (Some(a), Some(_)) => pending_up
                            .get_mut(&(a.clone(), ty))
                            .and_then(VecDeque::pop_front),
                        _ => None,
                    };
                    if let (Some(a), Some(ts)) = (&agent, sent) {
                        arrows.push(Arrow {
                            agent: a.clone(),
                            up: true,
                            t_send: ts,
                            t_recv: l.t,
                            kind: ak,
                        });
                    }
                }
                ("server_send", _) if mtype == Some("YIELD") => {
                    server.push((l.t, ServerKind::YieldSent));
                    if let Some(to) = str_of(&l.v, "to") {
                        pending_down
                            .entry(to.to_string())
                            .or_default()
                            .push_back(l.t);
                    }
                }
                ("recv", Some(i)) => match mtype {
                    Some("YIELD") => {
                        lanes[i].marks.push(Mark {
                            t: l.t,
                            kind: MarkKind::YieldRecv,
                        });
                        let sent = agent
                            .as_ref()
                            .and_then(|a| pending_down.get_mut(a))
                            .and_then(VecDeque::pop_front);
                        if let (Some(a), Some(ts)) = (&agent, sent) {
                            arrows.push(Arrow {
                                agent: a.clone(),
                                up: false,
                                t_send: ts,
                                t_recv: l.t,
                                kind: ArrowKind::Yield,
                            });
                        }
                    }
                    Some("RESPONDING_TO") | Some("FLOOR_CLAIMED") => lanes[i].marks.push(Mark {
                        t: l.t,
                        kind: MarkKind::ClaimSeen,
                    }),
                    Some("MSG") if is_reply => lanes[i].marks.push(Mark {
                        t: l.t,
                        kind: MarkKind::ReplySeen,
                    }),
                    _ => {}
                },
                ("lost", Some(i)) => {
                    lanes[i].marks.push(Mark {
                        t: l.t,
                        kind: MarkKind::Lost,
                    });
                    if str_of(&l.v, "dir") == Some("down") {
                        if mtype == Some("YIELD")
                            && let Some(q) = agent.as_ref().and_then(|a| pending_down.get_mut(a))
                        {
                            q.pop_front();
                        }
                    } else if let Some(a) = &agent {
                        let ty = match mtype {
                            Some("RESPONDING_TO") => Some("RESPONDING_TO"),
                            Some("MSG") => Some("MSG"),
                            _ => None,
                        };
                        if let Some(q) = ty.and_then(|ty| pending_up.get_mut(&(a.clone(), ty))) {
                            q.pop_front();
                        }
                    }
                }
                _ => {} // other events, and unknown `ev` values, are ignored
            }
        }

        // Close inferences the trace leaves open, and find the first reply.
        for lane in &mut lanes {
            for inf in &mut lane.infers {
                if inf.end.is_none() && inf.how == End::Open {
                    inf.end = inf.planned;
                }
            }
            let is_first = first_reply.as_ref().is_some_and(|(_, a)| *a == lane.agent);
            if let Some(inf) = lane
                .infers
                .iter_mut()
                .find(|f| is_first && matches!(f.how, End::Reply { .. }))
            {
                inf.how = End::Reply { first: true };
            }
            if lane.order == u64::MAX {
                lane.order = lane.marks.first().map(|m| m.t).unwrap_or(u64::MAX);
            }
        }
        // Lanes in the order the agents decided; those that inferred are kept
        // first when there are too many to draw.
        lanes.sort_by(|a, b| a.order.cmp(&b.order).then_with(|| a.agent.cmp(&b.agent)));
        let mut hidden = 0;
        if lanes.len() > MAX_AGENT_LANES {
            let (mut keep, rest): (Vec<Lane>, Vec<Lane>) =
                lanes.into_iter().partition(|l| !l.infers.is_empty());
            keep.truncate(MAX_AGENT_LANES);
            let room = MAX_AGENT_LANES - keep.len();
            hidden = rest.len().saturating_sub(room);
            keep.extend(rest.into_iter().take(room));
            keep.sort_by(|a, b| a.order.cmp(&b.order).then_with(|| a.agent.cmp(&b.agent)));
            lanes = keep;
        }
        let shown: Vec<&str> = lanes.iter().map(|l| l.agent.as_str()).collect();
        arrows.retain(|a| shown.contains(&a.agent.as_str()));

        Timeline {
            msg_id: id,
            t0,
            post: post_info,
            lanes,
            hidden,
            server,
            arrows,
            first_reply,
            replies,
        }
    }

    /// Lanes drawn: the server and one per agent shown.
    pub fn lane_count(&self) -> usize {
        self.lanes.len() + 1
    }

    fn rel_ms(&self, t: u64) -> f64 {
        (t as f64 - self.t0 as f64) / 1000.0
    }

    /// Last time anything happens, in ms after the post.
    fn end_ms(&self) -> f64 {
        let mut end: f64 = 0.0;
        let mut see = |t: u64| end = end.max(self.rel_ms(t));
        for l in &self.lanes {
            l.csma.iter().for_each(|c| see(c.1));
            for inf in &l.infers {
                see(inf.start);
                if let Some(e) = inf.end {
                    see(e);
                }
            }
            l.marks.iter().for_each(|m| see(m.t));
        }
        self.server.iter().for_each(|s| see(s.0));
        end
    }

    fn outcome(&self, lane: &Lane) -> String {
        if let Some(inf) = lane.infers.last() {
            return match &inf.how {
                End::Reply { first: true } => match &self.first_reply {
                    Some((t, _)) => format!("first reply, +{} ms", fmt_ms(self.rel_ms(*t))),
                    None => "first reply".to_string(),
                },
                End::Reply { first: false } => {
                    if lane.marks.iter().any(|m| m.kind == MarkKind::Lost) {
                        "reply (lost?)".to_string()
                    } else {
                        "duplicate reply".to_string()
                    }
                }
                End::Aborted { winner: Some(w) } => format!("aborted, yielded to {w}"),
                End::Aborted { winner: None } => "aborted".to_string(),
                End::Hung => "hung: never answers".to_string(),
                End::Crashed => "crashed".to_string(),
                End::Open => "still inferring".to_string(),
            };
        }
        match lane.skip_reason.as_deref() {
            Some("seen_claim") => "skipped: saw a claim".to_string(),
            Some("seen_response") => "skipped: saw a reply".to_string(),
            Some(r) if !r.is_empty() => format!("skipped: {r}"),
            Some(_) => "skipped".to_string(),
            None if lane.marks.iter().any(|m| m.kind == MarkKind::Crash) => "crashed".to_string(),
            None => "waiting".to_string(),
        }
    }
}

fn fmt_ms(v: f64) -> String {
    format!("{v:.0}")
}

// Colours of the timeline.
const CSMA_FILL: RGBColor = RGBColor(204, 222, 240);
const CSMA_EDGE: RGBColor = RGBColor(120, 160, 200);
const FIRST: RGBColor = RGBColor(0, 158, 115);
const DUP: RGBColor = RGBColor(148, 103, 189);
const ABORTED: RGBColor = RGBColor(230, 159, 0);
const HUNG: RGBColor = RGBColor(150, 150, 150);
const CLAIM: RGBColor = RGBColor(0, 114, 178);
const REPLY: RGBColor = RGBColor(0, 128, 90);
const YIELD: RGBColor = RGBColor(200, 30, 45);
const LOST: RGBColor = RGBColor(220, 0, 0);

fn infer_color(how: &End) -> RGBColor {
    match how {
        End::Reply { first: true } => FIRST,
        End::Reply { first: false } => DUP,
        End::Aborted { .. } => ABORTED,
        End::Hung | End::Open => HUNG,
        End::Crashed => RGBColor(90, 90, 90),
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
            out.push(LegendEntry {
                swatch: Swatch::Patch {
                    fill: CSMA_FILL.to_rgba(),
                    edge: CSMA_EDGE,
                },
                label: "CSMA wait".into(),
            });
        }
        let mut seen: Vec<&'static str> = Vec::new();
        for how in [
            End::Reply { first: true },
            End::Reply { first: false },
            End::Aborted { winner: None },
            End::Hung,
            End::Crashed,
        ] {
            let present = tl.lanes.iter().flat_map(|l| &l.infers).any(|f| {
                std::mem::discriminant(&f.how) == std::mem::discriminant(&how)
                    && infer_label(&f.how) == infer_label(&how)
                    || (how == End::Hung && f.how == End::Open)
            });
            let label = infer_label(&how);
            if present && !seen.contains(&label) {
                seen.push(label);
                out.push(LegendEntry {
                    swatch: Swatch::Patch {
                        fill: infer_color(&how).mix(0.85),
                        edge: infer_color(&how),
                    },
                    label: label.into(),
                });
            }
        }
        let has = |k: MarkKind| tl.lanes.iter().flat_map(|l| &l.marks).any(|m| m.kind == k);
        for (k, shape, color, filled, label) in [
            (
                MarkKind::ClaimSent,
                Shape::TriangleUp,
                CLAIM,
                true,
                "RESPONDING_TO sent",
            ),
            (
                MarkKind::YieldRecv,
                Shape::TriangleDown,
                YIELD,
                true,
                "YIELD received",
            ),
            (
                MarkKind::MsgSent,
                Shape::Diamond,
                REPLY,
                true,
                "MSG (reply) sent",
            ),
            (
                MarkKind::ClaimSeen,
                Shape::Circle,
                CLAIM,
                false,
                "claim seen",
            ),
            (
                MarkKind::ReplySeen,
                Shape::Square,
                REPLY,
                false,
                "reply seen",
            ),
            (MarkKind::Skip, Shape::Cross, draw::MUTED, true, "skip"),
            (MarkKind::Lost, Shape::Cross, LOST, true, "lost in transit"),
            (MarkKind::Crash, Shape::Cross, draw::INK, true, "crash"),
        ] {
            if has(k) {
                out.push(LegendEntry {
                    swatch: Swatch::Mark {
                        shape,
                        color,
                        filled,
                    },
                    label: label.into(),
                });
            }
        }
        if tl.first_reply.is_some() {
            out.push(LegendEntry {
                swatch: Swatch::Rule {
                    color: FIRST,
                    dashed: true,
                },
                label: "first reply at the server".into(),
            });
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

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What one lane panel shows.
struct PanelOpts<'s> {
    x0: f64,
    x1: f64,
    /// Lane names and outcomes on the left (the main panel only).
    labels: bool,
    caption: &'s str,
    /// The zoomed window, shaded on the main panel.
    highlight: Option<(f64, f64)>,
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
        let (x0, x1) = (o.x0, o.x1);
        let (aw, _) = area.dim_in_pixel();
        let left = if o.labels { LABEL_W } else { 18 };
        let mut chart = ChartBuilder::on(area)
            .caption(o.caption, draw::bold(18.0).color(&draw::MUTED))
            .margin_top(4)
            .margin_bottom(14)
            .margin_left(left)
            .margin_right(22)
            .x_label_area_size(62)
            .build_cartesian_2d(x0..x1, -0.5..(n as f64 - 0.5))
            .map_err(de)?;
        let plot_w = chart.plotting_area().dim_in_pixel().0.max(1) as f64;
        let x_labels = ((plot_w / 90.0) as usize).clamp(3, 12);
        let dec = draw::decimals_for(draw::tick_step(x0, x1, x_labels));
        let xfmt = move |v: &f64| draw::tick(*v, dec);
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(x_labels)
            .max_light_lines(1)
            .x_label_formatter(&xfmt)
            .x_desc(if aw > 700 {
                "time since the post reached the server (ms)"
            } else {
                "ms since the post"
            })
            .label_style(draw::font(16.0).color(&draw::MUTED))
            .axis_desc_style(draw::font(18.0))
            .bold_line_style(draw::GRID_BOLD.stroke_width(1))
            .light_line_style(draw::GRID.stroke_width(1))
            .axis_style(draw::MUTED.stroke_width(1))
            .draw()
            .map_err(de)?;

        let inside = |x: f64| x >= x0 && x <= x1;
        let clip = |x: f64| x.clamp(x0, x1);
        let px_per_ms = plot_w / (x1 - x0);
        // Lane y: the server on top, then agents in decision order.
        let y_of = |lane: usize| (n - 1 - lane) as f64;
        let base = area.get_base_pixel();
        let to_area = |p: (i32, i32)| (p.0 - base.0, p.1 - base.1);
        for i in 0..n {
            let y = y_of(i);
            if i % 2 == 1 {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0, y - 0.5), (x1, y + 0.5)],
                        RGBColor(245, 246, 248).filled(),
                    )))
                    .map_err(de)?;
            }
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x0, y), (x1, y)],
                    RGBColor(215, 215, 215).stroke_width(1),
                )))
                .map_err(de)?;
            if !o.labels {
                continue;
            }
            let (px, py) = to_area(chart.backend_coord(&(x0, y)));
            let right = px - 12;
            let room = left as i32 - 20;
            if i == 0 {
                let st = draw::bold(17.0);
                area.draw(&Text::new(
                    "server",
                    (right, py),
                    st.pos(Pos::new(HPos::Right, VPos::Center)),
                ))
                .map_err(de)?;
                continue;
            }
            let lane = &tl.lanes[i - 1];
            let st = draw::font(17.0);
            let name = draw::fit_text(&lane.agent, &st, room);
            area.draw(&Text::new(
                name,
                (right, py - 10),
                st.pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(de)?;
            let color = match lane.infers.last().map(|f| &f.how) {
                Some(End::Reply { first: true }) => REPLY,
                Some(how) => infer_color(how),
                None => draw::MUTED,
            };
            let st = draw::font(14.5).color(&color);
            let outcome = draw::fit_text(&tl.outcome(lane), &st, room);
            area.draw(&Text::new(
                outcome,
                (right, py + 11),
                st.pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(de)?;
        }

        // The zoomed window, shaded.
        if let Some((a, b)) = o.highlight {
            let min_w = 10.0 / px_per_ms;
            let mid = (a + b) / 2.0;
            let (a, b) = if b - a < min_w {
                (mid - min_w / 2.0, mid + min_w / 2.0)
            } else {
                (a, b)
            };
            let top = n as f64 - 0.5;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(clip(a), -0.5), (clip(b), top)],
                    RGBColor(255, 226, 120).mix(0.35).filled(),
                )))
                .map_err(de)?;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(clip(a), -0.5), (clip(b), top)],
                    RGBColor(214, 170, 0).stroke_width(1),
                )))
                .map_err(de)?;
        }

        // First reply: a dashed rule across every lane.
        if let Some((t, _)) = &tl.first_reply {
            let x = tl.rel_ms(*t);
            if inside(x) {
                let top = n as f64 - 0.5;
                let seg = (top + 0.5) / (n as f64 * 6.0);
                let mut y = -0.5;
                while y < top {
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(x, y), (x, (y + seg * 0.6).min(top))],
                            FIRST.stroke_width(2),
                        )))
                        .map_err(de)?;
                    y += seg;
                }
            }
        }

        // Agent lanes: CSMA waits, then inferences.
        for (li, lane) in tl.lanes.iter().enumerate() {
            let y = y_of(li + 1);
            for &(a, b) in &lane.csma {
                let (a, b) = (tl.rel_ms(a), tl.rel_ms(b));
                if b < x0 || a > x1 {
                    continue;
                }
                let r = [(clip(a), y - 0.13), (clip(b), y + 0.13)];
                chart
                    .draw_series(std::iter::once(Rectangle::new(r, CSMA_FILL.filled())))
                    .map_err(de)?;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        r,
                        CSMA_EDGE.stroke_width(1),
                    )))
                    .map_err(de)?;
            }
            for inf in &lane.infers {
                let a = tl.rel_ms(inf.start);
                let b = inf.end.map(|e| tl.rel_ms(e)).unwrap_or(f64::INFINITY);
                if b < x0 || a > x1 {
                    continue;
                }
                let c = infer_color(&inf.how);
                let faint = inf.end.is_none();
                let r = [(clip(a), y - 0.22), (clip(b), y + 0.22)];
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        r,
                        c.mix(if faint { 0.4 } else { 0.85 }).filled(),
                    )))
                    .map_err(de)?;
                chart
                    .draw_series(std::iter::once(Rectangle::new(r, c.stroke_width(1))))
                    .map_err(de)?;
                if let End::Aborted { .. } = inf.how
                    && inside(b)
                {
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(b, y - 0.3), (b, y + 0.3)],
                            YIELD.stroke_width(3),
                        )))
                        .map_err(de)?;
                }
                if faint && o.labels && inside(a) {
                    // Say why the bar runs off the edge.
                    let label = if inf.how == End::Hung {
                        "hung, never ends"
                    } else {
                        "still running"
                    };
                    chart
                        .draw_series(std::iter::once(
                            EmptyElement::at((clip(a), y))
                                + Text::new(
                                    label,
                                    (8, 0),
                                    draw::font(14.0)
                                        .color(&draw::INK)
                                        .pos(Pos::new(HPos::Left, VPos::Center)),
                                ),
                        ))
                        .map_err(de)?;
                }
            }
        }

        // Arrows between agents and the server.
        let pa = chart.plotting_area().clone();
        for ar in &tl.arrows {
            let Some(li) = tl.lanes.iter().position(|l| l.agent == ar.agent) else {
                continue;
            };
            let (ts, tr) = (tl.rel_ms(ar.t_send), tl.rel_ms(ar.t_recv));
            if !inside(ts) || !inside(tr) {
                continue;
            }
            let ya = y_of(li + 1);
            let ys = y_of(0);
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
            arrow(&mut chart, &pa, from, to, color)?;
        }

        // Server lane marks.
        let ys = y_of(0);
        for &(t, kind) in &tl.server {
            let x = tl.rel_ms(t);
            if !inside(x) {
                continue;
            }
            match kind {
                ServerKind::Post => {
                    draw::marker(&pa, (x, ys), Shape::Circle, 7, draw::INK.to_rgba(), true)?;
                    pa.draw(
                        &(EmptyElement::at((x, ys))
                            + Text::new(
                                "post",
                                (10, -8),
                                draw::bold(15.0).pos(Pos::new(HPos::Left, VPos::Bottom)),
                            )),
                    )
                    .map_err(de)?;
                }
                ServerKind::ClaimRecv => {
                    draw::marker(&pa, (x, ys), Shape::Circle, 4, CLAIM.to_rgba(), true)?
                }
                ServerKind::MsgRecv => {
                    draw::marker(&pa, (x, ys), Shape::Diamond, 6, REPLY.to_rgba(), true)?
                }
                ServerKind::YieldSent => {
                    draw::marker(&pa, (x, ys), Shape::Circle, 4, YIELD.to_rgba(), true)?
                }
            }
        }
        if let Some((t, _)) = &tl.first_reply {
            let x = tl.rel_ms(*t);
            if inside(x) {
                // Left of the rule when the rule is in the right half.
                let right_half = (x - x0) > (x1 - x0) * 0.55;
                let (dx, h) = if right_half {
                    (-8, HPos::Right)
                } else {
                    (8, HPos::Left)
                };
                pa.draw(
                    &(EmptyElement::at((x, n as f64 - 0.5))
                        + Text::new(
                            format!("first reply +{} ms", fmt_ms(x)),
                            (dx, 4),
                            draw::bold(15.0).color(&REPLY).pos(Pos::new(h, VPos::Top)),
                        )),
                )
                .map_err(de)?;
            }
        }

        // Agent lane marks, on top of everything.
        for (li, lane) in tl.lanes.iter().enumerate() {
            let y = y_of(li + 1);
            for m in &lane.marks {
                let x = tl.rel_ms(m.t);
                if !inside(x) {
                    continue;
                }
                let (dy, shape, r, color, filled) = match m.kind {
                    MarkKind::ClaimSent => (0.3, Shape::TriangleUp, 7, CLAIM, true),
                    MarkKind::MsgSent => (0.3, Shape::Diamond, 7, REPLY, true),
                    MarkKind::YieldRecv => (0.3, Shape::TriangleDown, 7, YIELD, true),
                    MarkKind::ClaimSeen => (-0.33, Shape::Circle, 5, CLAIM, false),
                    MarkKind::ReplySeen => (-0.33, Shape::Square, 6, REPLY, false),
                    MarkKind::Skip => (0.0, Shape::Cross, 6, draw::MUTED, true),
                    MarkKind::Lost => (0.3, Shape::Cross, 7, LOST, true),
                    MarkKind::Crash => (0.0, Shape::Cross, 9, draw::INK, true),
                };
                draw::marker(&pa, (x, y + dy), shape, r, color.to_rgba(), filled)?;
            }
        }
        Ok(())
    }
}

impl Figure for TimelineFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let tl = self.timeline;
        root.fill(&draw::BACKGROUND).map_err(de)?;
        let (w, _) = root.dim_in_pixel();
        let title_font = draw::bold(28.0);
        let sub_font = draw::font(17.0).color(&draw::MUTED);
        let legend_font = draw::font(17.0);
        let title = self
            .title
            .clone()
            .unwrap_or_else(|| format!("Timeline of message {}", tl.msg_id));
        let title = draw::fit_text(&title, &title_font, w as i32 - 40);
        root.draw(&Text::new(
            title,
            (w as i32 / 2, 14),
            title_font.pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(de)?;
        let sub = draw::fit_text(&self.subtitle(), &sub_font, w as i32 - 40);
        root.draw(&Text::new(
            sub,
            (w as i32 / 2, 54),
            sub_font.pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(de)?;
        let legend = self.legend();
        let (head, body) = root.split_vertically(HEADER_H);
        let (_, legend_area) = head.split_vertically(86);
        draw::draw_legend(&legend_area, &legend, &legend_font)?;

        let end = tl.end_ms();
        let x1 = if end <= 0.0 { 100.0 } else { end * 1.05 };
        let x0 = -(x1 * 0.02);
        match tl.race(x1 - x0) {
            Some((a, b)) => {
                let (bw, _) = body.dim_in_pixel();
                let (main, zoom) = body.split_horizontally((bw as f64 * 0.66) as i32);
                self.draw_panel(
                    &main,
                    &PanelOpts {
                        x0,
                        x1,
                        labels: true,
                        caption: "Whole exchange (shaded: zoomed on the right)",
                        highlight: Some((a, b)),
                    },
                )?;
                self.draw_panel(
                    &zoom,
                    &PanelOpts {
                        x0: a,
                        x1: b,
                        labels: false,
                        caption: "Zoom: the race for the floor",
                        highlight: None,
                    },
                )?;
            }
            None => {
                self.draw_panel(
                    &body,
                    &PanelOpts {
                        x0,
                        x1,
                        labels: true,
                        caption: "Whole exchange",
                        highlight: None,
                    },
                )?;
            }
        }
        Ok(())
    }
}

/// A line from `from` to `to` (data coordinates) with a head at `to`.
fn arrow<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    pa: &DrawingArea<DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    from: (f64, f64),
    to: (f64, f64),
    color: RGBColor,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![from, to],
            color.mix(0.75).stroke_width(2),
        )))
        .map_err(de)?;
    let (ax, ay) = chart.backend_coord(&from);
    let (bx, by) = chart.backend_coord(&to);
    let (dx, dy) = ((bx - ax) as f64, (by - ay) as f64);
    let len = (dx * dx + dy * dy).sqrt();
    if len < 1.0 {
        return Ok(());
    }
    let (ux, uy) = (dx / len, dy / len);
    let (l, hw) = (11.0, 5.0);
    let p1 = ((-ux * l - uy * hw) as i32, (-uy * l + ux * hw) as i32);
    let p2 = ((-ux * l + uy * hw) as i32, (-uy * l - ux * hw) as i32);
    pa.draw(&(EmptyElement::at(to) + Polygon::new(vec![(0, 0), p1, p2], color.filled())))
        .map_err(de)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn trace(lines: &[&str]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        for l in lines {
            writeln!(f, "{l}").expect("write");
        }
        f
    }

    const CONTESTED: &[&str] = &[
        r##"{"t_us":1000000,"ev":"post","msg_id":"m1","from":"operator","to":"#general","kind":"channel"}"##,
        r##"{"t_us":1000000,"ev":"server_send","to":"agent-001","msg":{"type":"MSG","id":"m1","from":"operator","to":"#general","content":"hi"}}"##,
        r##"{"t_us":1040000,"ev":"recv","agent":"agent-001","msg":{"type":"MSG","id":"m1","from":"operator"}}"##,
        r##"{"t_us":1040000,"ev":"csma","agent":"agent-001","msg_id":"m1","until_us":3000000}"##,
        r##"{"t_us":1041000,"ev":"csma","agent":"agent-002","msg_id":"m1","until_us":3010000}"##,
        r##"{"t_us":1042000,"ev":"csma","agent":"agent-003","msg_id":"m1","until_us":6000000}"##,
        r##"{"t_us":3000000,"ev":"infer","agent":"agent-001","msg_id":"m1","started_at":1700000002000,"until_us":9000000}"##,
        r##"{"t_us":3000000,"ev":"send","agent":"agent-001","msg":{"type":"RESPONDING_TO","msg_id":"m1","started_at":1700000002000,"channel":"#general"}}"##,
        r##"{"t_us":3010000,"ev":"infer","agent":"agent-002","msg_id":"m1","started_at":1700000002010,"until_us":8000000}"##,
        r##"{"t_us":3010000,"ev":"send","agent":"agent-002","msg":{"type":"RESPONDING_TO","msg_id":"m1","started_at":1700000002010,"channel":"#general"}}"##,
        r##"{"t_us":3040000,"ev":"server_recv","agent":"agent-001","msg":{"type":"RESPONDING_TO","msg_id":"m1","started_at":1700000002000,"channel":"#general"}}"##,
        r##"{"t_us":3050000,"ev":"server_recv","agent":"agent-002","msg":{"type":"RESPONDING_TO","msg_id":"m1","started_at":1700000002010,"channel":"#general"}}"##,
        r##"{"t_us":3050000,"ev":"server_send","to":"agent-002","msg":{"type":"YIELD","msg_id":"m1","winner":"agent-001","channel":"#general"}}"##,
        r##"{"t_us":3060000,"ev":"wobble","agent":"agent-002"}"##,
        r##"{"t_us":3090000,"ev":"recv","agent":"agent-002","msg":{"type":"YIELD","msg_id":"m1","winner":"agent-001","channel":"#general"}}"##,
        r##"{"t_us":3090000,"ev":"abort","agent":"agent-002","msg_id":"m1","winner":"agent-001"}"##,
        r##"{"t_us":3090000,"ev":"recv","agent":"agent-003","msg":{"type":"RESPONDING_TO","msg_id":"m1","from":"agent-001","started_at":1700000002000,"channel":"#general"}}"##,
        r##"{"t_us":6000000,"ev":"skip","agent":"agent-003","msg_id":"m1","reason":"seen_claim"}"##,
        r##"{"t_us":9000000,"ev":"done","agent":"agent-001","msg_id":"m1"}"##,
        r##"{"t_us":9000000,"ev":"send","agent":"agent-001","msg":{"type":"MSG","to":"#general","content":"a","in_reply_to":"m1","id":"r1"}}"##,
        r##"{"t_us":9040000,"ev":"server_recv","agent":"agent-001","msg":{"type":"MSG","to":"#general","content":"a","in_reply_to":"m1","id":"r1"}}"##,
        r##"{"t_us":20000000,"ev":"post","msg_id":"m2","from":"operator","to":"#general","kind":"channel"}"##,
        r##"{"t_us":20040000,"ev":"infer","agent":"agent-003","msg_id":"m2","started_at":1,"until_us":null}"##,
    ];

    #[test]
    fn builds_lanes_marks_and_arrows() {
        let f = trace(CONTESTED);
        let tl = Timeline::load(f.path(), Some("m1")).expect("loads");
        assert_eq!(tl.msg_id, "m1");
        assert_eq!(tl.lane_count(), 4);
        let agents: Vec<&str> = tl.lanes.iter().map(|l| l.agent.as_str()).collect();
        assert_eq!(agents, vec!["agent-001", "agent-002", "agent-003"]);
        assert_eq!(tl.lanes[0].infers[0].how, End::Reply { first: true });
        assert_eq!(
            tl.lanes[1].infers[0].how,
            End::Aborted {
                winner: Some("agent-001".into())
            }
        );
        assert_eq!(tl.outcome(&tl.lanes[2]), "skipped: saw a claim");
        assert_eq!(tl.outcome(&tl.lanes[0]), "first reply, +8040 ms");
        // Two claims and one MSG up, one YIELD down.
        assert_eq!(tl.arrows.len(), 4);
        assert_eq!(tl.arrows.iter().filter(|a| !a.up).count(), 1);
        assert_eq!(tl.first_reply, Some((9_040_000, "agent-001".into())));
        assert!((tl.end_ms() - 8040.0).abs() < 1e-9);
    }

    #[test]
    fn default_message_is_the_most_contested() {
        let f = trace(CONTESTED);
        let tl = Timeline::load(f.path(), None).expect("loads");
        assert_eq!(tl.msg_id, "m1");
        let tl = Timeline::load(f.path(), Some("m2")).expect("loads");
        assert_eq!(tl.lanes[0].infers[0].how, End::Hung);
        assert_eq!(tl.outcome(&tl.lanes[0]), "hung: never answers");
    }

    #[test]
    fn input_errors_name_file_and_line() {
        let f = trace(CONTESTED);
        let e = Timeline::load(f.path(), Some("m9")).expect_err("fails");
        assert!(super::super::is_input_error(&e));
        assert!(e.to_string().contains("no message `m9`"), "{e}");
        assert!(e.to_string().contains("m1, m2"), "{e}");

        let f = trace(&[CONTESTED[0], "{not json"]);
        let e = Timeline::load(f.path(), Some("m1")).expect_err("fails");
        assert!(e.to_string().contains("line 2"), "{e}");
        let f = trace(&[r#"{"ev":"post"}"#]);
        let e = Timeline::load(f.path(), Some("m1")).expect_err("fails");
        assert!(e.to_string().contains("line 1: field `t_us`"), "{e}");
        let e = Timeline::load(Path::new("/nonexistent/trace.jsonl"), None).expect_err("fails");
        assert!(e.to_string().contains("no such file"), "{e}");
    }

    #[test]
    fn height_grows_with_lanes() {
        assert_eq!(timeline_height(4), HEADER_H + AXIS_H + 4 * LANE_H);
        assert!(timeline_height(1) >= 420);
    }
}
