//! The timeline of one message from a trace (JSON Lines, one replication):
//! a lane for the server and one per agent that handled the message, with
//! CSMA waits, inferences and how they ended, and the RESPONDING_TO, YIELD
//! and MSG exchanges drawn as arrows between lanes, like a sequence chart.

mod figure;

pub(crate) use figure::TimelineFigure;

use super::bad;
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

/// Longest line a trace may have (1 MiB; an event takes a few hundred
/// bytes): a trace is read a line at a time, so its size does not matter.
pub const MAX_TRACE_LINE_BYTES: u64 = 1 << 20;

/// Read a trace, a line at a time, calling `f` for each event line (blank
/// lines skipped).
fn scan(src: Trace, f: impl FnMut(Line)) -> anyhow::Result<()> {
    match src {
        Trace::File(path) => {
            let shown = path.display().to_string();
            if !path.exists() {
                return Err(bad(format!("{shown}: no such file")));
            }
            let file = crate::files::open_input(path)
                .map_err(|e| bad(format!("{shown}: cannot open: {e}")))?;
            scan_reader(std::io::BufReader::new(file), &shown, f)
        }
        Trace::Bytes(bytes, path) => scan_reader(bytes, &path.display().to_string(), f),
    }
}

/// Where a trace is read from: a file, or its bytes in memory (named in
/// messages by a path).
#[derive(Debug, Clone, Copy)]
pub enum Trace<'a> {
    File(&'a Path),
    Bytes(&'a [u8], &'a Path),
}

fn scan_reader(
    mut reader: impl std::io::BufRead,
    shown: &str,
    mut f: impl FnMut(Line),
) -> anyhow::Result<()> {
    let mut bytes = Vec::new();
    for no in 1usize.. {
        use std::io::Read;
        bytes.clear();
        let got = (&mut reader)
            .take(MAX_TRACE_LINE_BYTES + 1)
            .read_until(b'\n', &mut bytes)
            .map_err(|e| bad(format!("{shown}: line {no}: cannot read: {e}")))?;
        if got == 0 {
            break;
        }
        if got as u64 > MAX_TRACE_LINE_BYTES && bytes.last() != Some(&b'\n') {
            return Err(bad(format!(
                "{shown}: line {no}: longer than {MAX_TRACE_LINE_BYTES} bytes, which no \
                 trace line is (docs/limits.md)"
            )));
        }
        let line = std::str::from_utf8(&bytes)
            .map_err(|e| bad(format!("{shown}: line {no}: not UTF-8 text: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
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
    most_contested_in(Trace::File(path))
}

/// [`most_contested`] of a trace file or bytes.
pub fn most_contested_in(src: Trace) -> anyhow::Result<String> {
    let path = match src {
        Trace::File(p) | Trace::Bytes(_, p) => p,
    };
    let mut infers: HashMap<String, usize> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    scan(src, |l| {
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
        Self::read(Trace::File(path), msg_id)
    }

    /// [`Timeline::load`] of a trace file or bytes.
    pub fn read(src: Trace, msg_id: Option<&str>) -> anyhow::Result<Timeline> {
        let path = match src {
            Trace::File(p) | Trace::Bytes(_, p) => p,
        };
        let shown = path.display().to_string();
        let mut posts: Vec<String> = Vec::new();
        let id = match msg_id {
            Some(id) => id.to_string(),
            None => most_contested_in(src)?,
        };
        let mut lines: Vec<Line> = Vec::new();
        let mut crashes: Vec<Line> = Vec::new();
        scan(src, |l| {
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
        let mut b = Build::new(&id, lines);
        for l in lines {
            b.event(l);
        }
        b.finish(id.clone())
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

/// The agents that handled a message, in order of first appearance.
fn lanes_of(lines: &[Line]) -> (Vec<Lane>, HashMap<String, usize>) {
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
    (lanes, index)
}

/// What an event line says about the message.
struct Ev<'l> {
    agent: Option<String>,
    mtype: Option<&'l str>,
    /// It carries a reply to the message.
    is_reply: bool,
}

/// A timeline under construction, fed one event line at a time.
struct Build<'l> {
    id: &'l str,
    lanes: Vec<Lane>,
    index: HashMap<String, usize>,
    t0: u64,
    post: Option<(String, String, String)>,
    /// The message is live until its last event or planned timer; a crash
    /// after that belongs to other messages (unless an inference hangs).
    live_until: u64,
    server: Vec<(u64, ServerKind)>,
    arrows: Vec<Arrow>,
    /// Send times of messages in flight, per agent and type (up) or per
    /// agent (YIELDs down), to pair with their arrival.
    pending_up: HashMap<(String, &'static str), VecDeque<u64>>,
    pending_down: HashMap<String, VecDeque<u64>>,
    first_reply: Option<(u64, String)>,
    replies: usize,
}

impl<'l> Build<'l> {
    fn new(id: &'l str, lines: &[Line]) -> Build<'l> {
        let (lanes, index) = lanes_of(lines);
        let post = lines.iter().find(|l| l.ev == "post");
        let t0 = post
            .map(|l| l.t)
            .unwrap_or_else(|| lines.first().map(|l| l.t).unwrap_or(0));
        let live_until = lines
            .iter()
            .filter(|l| l.ev != "crash")
            .map(|l| {
                l.t.max(l.v.get("until_us").and_then(Value::as_u64).unwrap_or(0))
            })
            .max()
            .unwrap_or(t0);
        Build {
            id,
            lanes,
            index,
            t0,
            post: post.map(|l| {
                (
                    str_of(&l.v, "kind").unwrap_or("channel").to_string(),
                    str_of(&l.v, "from").unwrap_or("?").to_string(),
                    str_of(&l.v, "to").unwrap_or("?").to_string(),
                )
            }),
            live_until,
            server: post.map(|_| (t0, ServerKind::Post)).into_iter().collect(),
            arrows: Vec::new(),
            pending_up: HashMap::new(),
            pending_down: HashMap::new(),
            first_reply: None,
            replies: 0,
        }
    }

    fn event(&mut self, l: &'l Line) {
        let msg = l.v.get("msg");
        let ev = Ev {
            agent: str_of(&l.v, "agent").map(str::to_string),
            mtype: msg.and_then(|m| str_of(m, "type")),
            is_reply: msg.is_some_and(|m| id_str(m.get("in_reply_to")).as_deref() == Some(self.id)),
        };
        let lane = ev.agent.as_ref().and_then(|a| self.index.get(a).copied());
        match (l.ev.as_str(), lane) {
            ("server_recv", _) => self.server_recv(l, &ev, lane.is_some()),
            ("server_send", _) if ev.mtype == Some("YIELD") => {
                self.server.push((l.t, ServerKind::YieldSent));
                if let Some(to) = str_of(&l.v, "to") {
                    let q = self.pending_down.entry(to.to_string()).or_default();
                    q.push_back(l.t);
                }
            }
            (_, Some(i)) => self.lane_event(i, l, &ev),
            _ => {} // other events, and unknown `ev` values, are ignored
        }
    }

    fn mark(&mut self, i: usize, t: u64, kind: MarkKind) {
        self.lanes[i].marks.push(Mark { t, kind });
    }

    /// End the lane's open inference at `t`, as `how`.
    fn end_infer(&mut self, i: usize, t: u64, how: End) {
        if let Some(inf) = self.lanes[i]
            .infers
            .iter_mut()
            .rev()
            .find(|f| f.end.is_none())
        {
            inf.end = Some(t);
            inf.how = how;
        }
    }

    fn lane_event(&mut self, i: usize, l: &Line, ev: &Ev) {
        let until = l.v.get("until_us").and_then(Value::as_u64);
        match l.ev.as_str() {
            "csma" => {
                let until = until.unwrap_or(l.t);
                self.lanes[i].csma.push((l.t, until.max(l.t)));
                self.lanes[i].order = self.lanes[i].order.min(until);
            }
            "skip" => {
                self.mark(i, l.t, MarkKind::Skip);
                self.lanes[i].skip_reason = Some(str_of(&l.v, "reason").unwrap_or("").to_string());
            }
            "infer" => {
                let how = if until.is_none() {
                    End::Hung
                } else {
                    End::Open
                };
                let inf = Infer {
                    start: l.t,
                    planned: until,
                    end: None,
                    how,
                };
                self.lanes[i].infers.push(inf);
                self.lanes[i].order = self.lanes[i].order.min(l.t);
            }
            "abort" => {
                let winner = str_of(&l.v, "winner").map(str::to_string);
                self.end_infer(i, l.t, End::Aborted { winner });
            }
            "done" => self.end_infer(i, l.t, End::Reply { first: false }),
            "crash" => self.crash(i, l.t),
            "send" => self.sent(i, l.t, ev),
            "recv" => self.received(i, l.t, ev),
            "lost" => self.lost(i, l, ev),
            _ => {}
        }
    }

    /// A crash while the message is live (or an inference hangs) ends the
    /// open inference.
    fn crash(&mut self, i: usize, t: u64) {
        let hanging = self.lanes[i]
            .infers
            .iter()
            .any(|f| f.end.is_none() && f.how == End::Hung);
        if t >= self.t0 && (t <= self.live_until || hanging) {
            self.mark(i, t, MarkKind::Crash);
            self.end_infer(i, t, End::Crashed);
        }
    }

    fn sent(&mut self, i: usize, t: u64, ev: &Ev) {
        let (mk, ty) = match ev.mtype {
            Some("RESPONDING_TO") => (MarkKind::ClaimSent, "RESPONDING_TO"),
            Some("MSG") if ev.is_reply => (MarkKind::MsgSent, "MSG"),
            _ => return,
        };
        self.mark(i, t, mk);
        if let Some(a) = &ev.agent {
            self.pending_up
                .entry((a.clone(), ty))
                .or_default()
                .push_back(t);
        }
    }

    fn server_recv(&mut self, l: &Line, ev: &Ev, has_lane: bool) {
        let (sk, ty, kind) = match ev.mtype {
            Some("RESPONDING_TO") => (ServerKind::ClaimRecv, "RESPONDING_TO", ArrowKind::Claim),
            Some("MSG") if ev.is_reply => (ServerKind::MsgRecv, "MSG", ArrowKind::Msg),
            _ => return,
        };
        self.server.push((l.t, sk));
        if sk == ServerKind::MsgRecv {
            self.replies += 1;
            if self.first_reply.is_none() {
                self.first_reply = Some((l.t, ev.agent.clone().unwrap_or_default()));
            }
        }
        let Some(a) = ev.agent.as_ref().filter(|_| has_lane) else {
            return;
        };
        let sent = self
            .pending_up
            .get_mut(&(a.clone(), ty))
            .and_then(VecDeque::pop_front);
        if let Some(t_send) = sent {
            self.arrows.push(Arrow {
                agent: a.clone(),
                up: true,
                t_send,
                t_recv: l.t,
                kind,
            });
        }
    }

    fn received(&mut self, i: usize, t: u64, ev: &Ev) {
        match ev.mtype {
            Some("YIELD") => {
                self.mark(i, t, MarkKind::YieldRecv);
                let Some(a) = &ev.agent else { return };
                if let Some(t_send) = self.pending_down.get_mut(a).and_then(VecDeque::pop_front) {
                    self.arrows.push(Arrow {
                        agent: a.clone(),
                        up: false,
                        t_send,
                        t_recv: t,
                        kind: ArrowKind::Yield,
                    });
                }
            }
            Some("RESPONDING_TO") | Some("FLOOR_CLAIMED") => self.mark(i, t, MarkKind::ClaimSeen),
            Some("MSG") if ev.is_reply => self.mark(i, t, MarkKind::ReplySeen),
            _ => {}
        }
    }

    /// A lost message: marked, and its send forgotten so that later sends
    /// pair with their own arrivals.
    fn lost(&mut self, i: usize, l: &Line, ev: &Ev) {
        self.mark(i, l.t, MarkKind::Lost);
        let Some(a) = &ev.agent else { return };
        let q = if str_of(&l.v, "dir") == Some("down") {
            self.pending_down
                .get_mut(a)
                .filter(|_| ev.mtype == Some("YIELD"))
        } else {
            match ev.mtype {
                Some("RESPONDING_TO") => self.pending_up.get_mut(&(a.clone(), "RESPONDING_TO")),
                Some("MSG") => self.pending_up.get_mut(&(a.clone(), "MSG")),
                _ => None,
            }
        };
        if let Some(q) = q {
            q.pop_front();
        }
    }

    /// Close inferences the trace leaves open, mark the first reply, and
    /// order the lanes by when the agents decided; those that inferred are
    /// kept first when there are too many to draw.
    fn finish(mut self, id: String) -> Timeline {
        for lane in &mut self.lanes {
            for inf in &mut lane.infers {
                if inf.end.is_none() && inf.how == End::Open {
                    inf.end = inf.planned;
                }
            }
            let is_first = self
                .first_reply
                .as_ref()
                .is_some_and(|(_, a)| *a == lane.agent);
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
        let (lanes, hidden) = keep_lanes(self.lanes);
        let shown: Vec<&str> = lanes.iter().map(|l| l.agent.as_str()).collect();
        self.arrows.retain(|a| shown.contains(&a.agent.as_str()));
        Timeline {
            msg_id: id,
            t0: self.t0,
            post: self.post,
            lanes,
            hidden,
            server: self.server,
            arrows: self.arrows,
            first_reply: self.first_reply,
            replies: self.replies,
        }
    }
}

/// The lanes to draw, in decision order, at most [`MAX_AGENT_LANES`]
/// (those that inferred first), and how many were left out.
fn keep_lanes(mut lanes: Vec<Lane>) -> (Vec<Lane>, usize) {
    let by_order = |a: &Lane, b: &Lane| a.order.cmp(&b.order).then_with(|| a.agent.cmp(&b.agent));
    lanes.sort_by(by_order);
    if lanes.len() <= MAX_AGENT_LANES {
        return (lanes, 0);
    }
    let (mut keep, rest): (Vec<Lane>, Vec<Lane>) =
        lanes.into_iter().partition(|l| !l.infers.is_empty());
    keep.truncate(MAX_AGENT_LANES);
    let room = MAX_AGENT_LANES - keep.len();
    let hidden = rest.len().saturating_sub(room);
    keep.extend(rest.into_iter().take(room));
    keep.sort_by(by_order);
    (keep, hidden)
}

fn fmt_ms(v: f64) -> String {
    format!("{v:.0}")
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
