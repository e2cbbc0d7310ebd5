//! Reading a frame log into what a member of one channel saw: the
//! questions, the claims announced, the answers, and who came and went.
//!
//! Three formats, told apart by their first line (docs/observe.md, "What
//! calibrate reads"):
//! - **observe's log**: a header line (`{"herdsim_observe": 1, "url", "channel",
//!   "name", "id", ...}`), then one line per frame received
//!   (`{"ms", "conn": 0, "dir": "down", "frame"}`, `ms` since the start),
//!   round-trip samples (`{"ms", "dir": "rtt", "rtt_ms"}`) and an end line;
//! - **a recording** (tests/data/agentchat-wire): the same frame lines
//!   without a header, several connections and both directions. Only the
//!   server's frames (`down`) are read, on every connection, a frame sent
//!   to several members counted once: what any member of the channel saw.
//!   What the clients sent (`up`: denied claims, YIELDs' causes) is a
//!   member's blind spot and is not read;
//! - **a `live` trace** (`results/<name>-live/trace.jsonl`): posts, the
//!   claims the agents received and the replies the operator received, at
//!   scenario time. Its `started_at` is the wall clock while its times are
//!   scenario time, so calibrate does not use it there. A post line with
//!   `"relayed": "line"` is a question only once a `relayed` line says
//!   the operator saw it relayed: a post the server refused (its rate
//!   limit) reached nobody and is not a question. Older traces (no such
//!   field) count every channel post.
//!
//! Either plain or gzipped (by content, whatever the name). Every frame is
//! read as `live` reads a real server's (`crate::agentchat`): `msg_id` for
//! `id`, the `@` of ids dropped, replays and `@server` notices skipped.
//!
//! Times: a server that stamps its frames (agentchat's `ts`, ms) gives the
//! clock of every event; without stamps (herdsim serve) the time a frame
//! was received is used. Either way only differences are used.

use crate::floor::dialect::{self as wire, Kind as WireKind};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The longest line read (a 1 MiB frame, JSON-escaped inside a line).
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// The most (decompressed) bytes read from one log.
pub const MAX_LOG_BYTES: u64 = 16 << 30;

/// The most events (questions, claims, answers, presence) kept from one
/// log, with the round-trip samples, connections and posts awaiting their
/// relay counted among them.
pub const MAX_EVENTS: usize = 10_000_000;

/// The most bytes of text (ids, names, channels) the kept events hold.
pub const MAX_TEXT_BYTES: usize = 256 << 20;

/// The largest frame read (as `live` reads a server).
const MAX_FRAME: usize = 1 << 20;

/// Which format a log is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Observe,
    Recording,
    LiveTrace,
    /// A chat platform's export (super::export).
    Export,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Observe => "an observe log",
            Format::Recording => "a recorded session",
            Format::LiveTrace => "a live trace",
            Format::Export => "a chat export",
        }
    }
}

/// What the times of the events are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The server's `ts` (ms).
    Server,
    /// When the frame was received (ms since the log began).
    Receive,
    /// A trace's scenario time (ms).
    Scenario,
}

impl Clock {
    pub fn describe(self) -> &'static str {
        match self {
            Clock::Server => "the server's time stamps (ts)",
            Clock::Receive => "the times the frames were received",
            Clock::Scenario => "the trace's scenario time",
        }
    }
}

/// What one event is.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// A channel MSG: a question (no `in_reply_to`) or a reply.
    Msg {
        id: String,
        from: String,
        reply_to: Option<String>,
        /// It @mentions someone (an exempt message: answered without a claim).
        mention: bool,
    },
    /// A claim as members see it: relayed (`RESPONDING_TO`, every claim
    /// under the spec's policies) or granted (`FLOOR_CLAIMED`, agentchat).
    Claim {
        msg: String,
        agent: String,
        started_at: Option<f64>,
        granted: bool,
    },
    /// Someone joined the channel.
    Joined { agent: String },
    /// Someone left it.
    Left { agent: String },
    /// Who was in the channel when the observer joined it.
    Members { agents: Vec<String> },
}

/// One event, at its time in the log's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub t: f64,
    pub what: What,
}

/// What was skipped, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    pub replays: u64,
    pub notices: u64,
    pub yields: u64,
    pub errors: u64,
    pub other_channels: u64,
    pub dms: u64,
    pub malformed: u64,
    pub other: u64,
    /// Copies of a frame already read on another connection (a recording).
    pub copies: u64,
    /// A live trace's posts never seen relayed (refused by the server).
    pub unrelayed: u64,
}

/// A log read.
#[derive(Debug, Clone)]
pub struct Log {
    pub path: PathBuf,
    pub format: Format,
    pub clock: Clock,
    pub channel: String,
    /// The events of the channel, in time order.
    pub events: Vec<Event>,
    /// Display names of ids (agentchat sends `from_name`, `holder_name`).
    pub names: BTreeMap<String, String>,
    /// The observer's own id and name (never an agent).
    pub observer: BTreeSet<String>,
    /// The server's URL (observe's header).
    pub url: Option<String>,
    /// Round trips of the observer's link, ms (observe's pings).
    pub rtt_ms: Vec<f64>,
    /// The first and the last instant the log covers, in its clock.
    pub start_t: f64,
    pub end_t: f64,
    /// How the recording ended (observe's end line).
    pub end_reason: Option<String>,
    pub skipped: Skipped,
    /// Frames read (down, on every connection); a chat export's messages
    /// read (in the window the fit is over).
    pub frames: u64,
    /// Connections in a recording.
    pub connections: usize,
    /// The last line was cut short (a recording that was killed): skipped.
    pub cut_last_line: bool,
    /// A chat export's time field, in the report's words (None: a frame
    /// log, whose `clock` says).
    pub time_field: Option<&'static str>,
}

impl Log {
    /// What was read, in the report's words: a chat export's messages, a
    /// trace's events, a log's frames.
    pub fn what_was_read(&self) -> String {
        if self.format == Format::Export {
            format!("{} messages", self.frames)
        } else if self.format == Format::LiveTrace {
            format!("{} events of the channel", self.events.len())
        } else if self.connections > 1 {
            format!(
                "{} frames on {} connections (each broadcast once)",
                self.frames, self.connections
            )
        } else {
            format!("{} frames", self.frames)
        }
    }

    /// Where the times come from, in the report's words.
    pub fn times(&self) -> &'static str {
        self.time_field.unwrap_or(self.clock.describe())
    }
}

/// A bad log: the message names the file and the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LogError(pub String);

fn bad(path: &Path, line: u64, what: impl std::fmt::Display) -> LogError {
    LogError(format!("{}:{line}: {what}", path.display()))
}

/// A raw event before the clock is chosen: its server stamp, if any, and
/// when it was received.
struct Raw {
    ts: Option<f64>,
    recv: f64,
    channel: String,
    what: What,
}

/// What `buf` holds: decompressed when it is gzipped (told by its first
/// bytes, whatever the file is called), and whether it was. Every input of
/// calibrate's (a frame log, an export's file) is read through it.
pub(crate) fn ungzipped<R: BufRead + 'static>(
    mut buf: R,
) -> std::io::Result<(Box<dyn Read>, bool)> {
    if buf.fill_buf()?.starts_with(&[0x1f, 0x8b]) {
        Ok((Box::new(flate2::read::MultiGzDecoder::new(buf)), true))
    } else {
        Ok((Box::new(buf), false))
    }
}

/// Read `path` (plain or gzipped). `channel`: the channel to read (default:
/// observe's, else the one with the most messages).
pub fn read(path: &Path, channel: Option<&str>) -> Result<Log, LogError> {
    let file =
        crate::files::open_input(path).map_err(|e| LogError(format!("{}: {e}", path.display())))?;
    let (inner, _) = ungzipped(BufReader::new(file))
        .map_err(|e| LogError(format!("{}: {e}", path.display())))?;
    let mut reader = BufReader::new(inner.take(MAX_LOG_BYTES + 1));
    let mut st = State::new(path);
    let mut line = Vec::new();
    let mut no = 0u64;
    let mut total = 0u64;
    loop {
        line.clear();
        let (n, complete) = read_line(&mut reader, &mut line)
            .map_err(|e| bad(path, no + 1, format!("cannot read: {e}")))?;
        if n == 0 {
            break;
        }
        no += 1;
        total += n as u64;
        if total > MAX_LOG_BYTES {
            return Err(LogError(format!(
                "{}: longer than {} GiB: cut it (observe --max-log-bytes) and calibrate the part",
                path.display(),
                MAX_LOG_BYTES >> 30
            )));
        }
        if line.len() > MAX_LINE_BYTES {
            return Err(bad(
                path,
                no,
                format!("a line longer than {} MiB", MAX_LINE_BYTES >> 20),
            ));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            // A recording killed mid-line: the cut line is the last one.
            Err(_) if !complete => {
                st.cut_last_line = true;
                break;
            }
            Err(e) => return Err(bad(path, no, format!("not JSON: {e}"))),
        };
        st.line(no, &v)?;
        if st.held() > MAX_EVENTS {
            return Err(bad(
                path,
                no,
                format!("more than {MAX_EVENTS} events: calibrate a shorter log"),
            ));
        }
        if st.text_bytes > MAX_TEXT_BYTES {
            return Err(bad(
                path,
                no,
                format!(
                    "the ids and names kept pass {} MiB: calibrate a shorter log",
                    MAX_TEXT_BYTES >> 20
                ),
            ));
        }
    }
    st.finish(channel)
}

/// Read one line into `out` (without the newline), at most
/// MAX_LINE_BYTES + 1 of it kept; returns the bytes consumed and whether
/// the line ended with a newline.
fn read_line(r: &mut impl BufRead, out: &mut Vec<u8>) -> std::io::Result<(usize, bool)> {
    let mut consumed = 0usize;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok((consumed, false));
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let keep = take - usize::from(done);
        let room = (MAX_LINE_BYTES + 1).saturating_sub(out.len());
        out.extend_from_slice(&buf[..keep.min(room)]);
        r.consume(take);
        consumed += take;
        if done {
            return Ok((consumed, true));
        }
    }
}

struct State<'p> {
    path: &'p Path,
    format: Option<Format>,
    raw: Vec<Raw>,
    names: BTreeMap<String, String>,
    observer: BTreeSet<String>,
    header_channel: Option<String>,
    url: Option<String>,
    rtt_ms: Vec<f64>,
    first_recv: Option<f64>,
    last_recv: f64,
    end_reason: Option<String>,
    skipped: Skipped,
    frames: u64,
    /// A recording's frames kept so far, by a 128-bit prefix of their
    /// SHA-256 (never their text): a later copy of one is skipped.
    seen: BTreeSet<[u8; 16]>,
    conns: BTreeSet<i64>,
    cut_last_line: bool,
    /// Live trace: claims already seen (kind, msg, agent, started_at).
    trace_claims: BTreeSet<(String, String, String, String)>,
    /// Live trace: posts waiting for their `relayed` line.
    pending: BTreeMap<String, Raw>,
    /// Bytes of text kept (ids, names, channels), against MAX_TEXT_BYTES.
    text_bytes: usize,
}

/// The text a raw event holds, in bytes.
fn text_of(r: &Raw) -> usize {
    r.channel.len()
        + match &r.what {
            What::Msg {
                id, from, reply_to, ..
            } => id.len() + from.len() + reply_to.as_ref().map_or(0, String::len),
            What::Claim { msg, agent, .. } => msg.len() + agent.len(),
            What::Joined { agent } | What::Left { agent } => agent.len(),
            What::Members { agents } => agents.iter().map(|a| a.len() + 24).sum(),
        }
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn text(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

/// A message that @mentions someone: one of its words starts with `@`.
fn mentions(content: &str) -> bool {
    content
        .split_whitespace()
        .any(|w| w.len() > 1 && w.starts_with('@'))
}

impl<'p> State<'p> {
    fn new(path: &'p Path) -> State<'p> {
        State {
            path,
            format: None,
            raw: Vec::new(),
            names: BTreeMap::new(),
            observer: BTreeSet::new(),
            header_channel: None,
            url: None,
            rtt_ms: Vec::new(),
            first_recv: None,
            last_recv: 0.0,
            end_reason: None,
            skipped: Skipped::default(),
            frames: 0,
            seen: BTreeSet::new(),
            conns: BTreeSet::new(),
            cut_last_line: false,
            trace_claims: BTreeSet::new(),
            pending: BTreeMap::new(),
            text_bytes: 0,
        }
    }

    /// What is held, in events: kept events, round trips, connections,
    /// posts awaiting their relay.
    fn held(&self) -> usize {
        self.raw.len() + self.rtt_ms.len() + self.conns.len() + self.pending.len()
    }

    /// Keep a raw event, its text counted.
    fn keep(&mut self, raw: Raw) {
        self.text_bytes += text_of(&raw);
        self.raw.push(raw);
    }

    fn line(&mut self, no: u64, v: &Value) -> Result<(), LogError> {
        let format = match self.format {
            Some(f) => f,
            None => {
                let f = if v.get("herdsim_observe").is_some() {
                    Format::Observe
                } else if v.get("frame").is_some() && v.get("dir").is_some() {
                    Format::Recording
                } else if v.get("ev").is_some() && v.get("t_us").is_some() {
                    Format::LiveTrace
                } else {
                    return Err(bad(
                        self.path,
                        no,
                        "not a frame log: expected observe's header, a recorded frame \
                         ({\"ms\", \"conn\", \"dir\", \"frame\"}) or a live trace line \
                         ({\"t_us\", \"ev\"})",
                    ));
                };
                self.format = Some(f);
                if f == Format::Observe {
                    return self.header(no, v);
                }
                f
            }
        };
        match format {
            Format::LiveTrace => self.trace_line(no, v),
            // Never told from a line (exports are read by super::export).
            Format::Observe | Format::Recording | Format::Export => self.frame_line(no, v, format),
        }
    }

    fn header(&mut self, no: u64, v: &Value) -> Result<(), LogError> {
        let Some(ch) = text(v, "channel") else {
            return Err(bad(self.path, no, "observe's header has no `channel`"));
        };
        self.header_channel = Some(ch);
        self.url = text(v, "url");
        for k in ["id", "name"] {
            if let Some(s) = text(v, k) {
                self.observer.insert(s.trim_start_matches('@').to_string());
            }
        }
        Ok(())
    }

    fn frame_line(&mut self, no: u64, v: &Value, format: Format) -> Result<(), LogError> {
        let Some(ms) = num(v, "ms") else {
            return Err(bad(self.path, no, "no number `ms`"));
        };
        self.first_recv.get_or_insert(ms);
        self.last_recv = self.last_recv.max(ms);
        if let Some(end) = v.get("end") {
            self.end_reason = end
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_string);
            return Ok(());
        }
        let dir = v.get("dir").and_then(Value::as_str);
        match dir {
            Some("down") => {}
            Some("rtt") => {
                if let Some(r) = num(v, "rtt_ms") {
                    self.rtt_ms.push(r);
                }
                return Ok(());
            }
            Some("up") => return Ok(()),
            _ => {
                return Err(bad(
                    self.path,
                    no,
                    "`dir` must be \"down\", \"up\" or \"rtt\"",
                ));
            }
        }
        let Some(frame) = v.get("frame").and_then(Value::as_str) else {
            return Err(bad(self.path, no, "no string `frame`"));
        };
        if let Some(c) = v.get("conn").and_then(Value::as_i64) {
            self.conns.insert(c);
        }
        self.frames += 1;
        let (kind, f) = wire::read(frame, MAX_FRAME);
        let ty = f.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            WireKind::Replay => self.skipped.replays += 1,
            WireKind::Notice => self.skipped.notices += 1,
            WireKind::Error => self.skipped.errors += 1,
            WireKind::Malformed => self.skipped.malformed += 1,
            WireKind::Other => self.skipped.other += 1,
            WireKind::Floor if ty == "YIELD" => self.skipped.yields += 1,
            WireKind::Msg | WireKind::Floor | WireKind::Presence => {
                // A recording holds the same broadcast once per member:
                // a frame kept before is a copy.
                let key = (format == Format::Recording).then(|| {
                    let d = Sha256::digest(frame.as_bytes());
                    let mut k = [0u8; 16];
                    k.copy_from_slice(&d[..16]);
                    k
                });
                if key.is_some_and(|k| self.seen.contains(&k)) {
                    self.skipped.copies += 1;
                    return Ok(());
                }
                if let Some(raw) = self.event(kind, &f, ms) {
                    if let Some(k) = key {
                        self.seen.insert(k);
                    }
                    self.remember_names(&f);
                    self.keep(raw);
                }
            }
            // A kind of frame this reader does not know yet.
            _ => self.skipped.other += 1,
        }
        Ok(())
    }

    fn remember_names(&mut self, f: &Value) {
        for (id_k, name_k) in [
            ("from", "from_name"),
            ("holder", "holder_name"),
            ("agent", "name"),
        ] {
            if let (Some(id), Some(name)) = (text(f, id_k), text(f, name_k)) {
                let id = id.trim_start_matches('@').to_string();
                if !self.names.contains_key(&id) {
                    self.text_bytes += id.len() + name.len();
                    self.names.insert(id, name);
                }
            }
        }
    }

    /// The event a (normalised) frame is, if it is one calibrate uses.
    fn event(&mut self, kind: WireKind, f: &Value, recv: f64) -> Option<Raw> {
        let ts = num(f, "ts");
        let ty = f.get("type").and_then(Value::as_str)?;
        let (channel, what) = match (kind, ty) {
            (WireKind::Msg, _) => {
                let to = text(f, "to")?;
                if !to.starts_with('#') {
                    self.skipped.dms += 1;
                    return None;
                }
                let (Some(id), Some(from)) = (text(f, "id"), text(f, "from")) else {
                    self.skipped.malformed += 1;
                    return None;
                };
                let content = f.get("content").and_then(Value::as_str).unwrap_or("");
                let reply_to =
                    text(f, "in_reply_to").map(|s| s.trim_start_matches('@').to_string());
                (
                    to,
                    What::Msg {
                        id,
                        from,
                        reply_to,
                        mention: mentions(content),
                    },
                )
            }
            (WireKind::Floor, "RESPONDING_TO" | "FLOOR_CLAIMED") => {
                let granted = ty == "FLOOR_CLAIMED";
                let agent = text(f, if granted { "holder" } else { "from" });
                let (Some(channel), Some(msg), Some(agent)) =
                    (text(f, "channel"), text(f, "msg_id"), agent)
                else {
                    self.skipped.malformed += 1;
                    return None;
                };
                (
                    channel,
                    What::Claim {
                        msg,
                        agent,
                        started_at: num(f, "started_at"),
                        granted,
                    },
                )
            }
            (WireKind::Presence, "AGENT_JOINED" | "AGENT_LEFT") => {
                let channel = text(f, "channel")?;
                let agent = text(f, "agent")?.trim_start_matches('@').to_string();
                let what = if ty == "AGENT_JOINED" {
                    What::Joined { agent }
                } else {
                    What::Left { agent }
                };
                (channel, what)
            }
            (WireKind::Presence, "JOINED") => {
                let channel = text(f, "channel")?;
                let agents = f
                    .get("agents")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| {
                                x.as_str()
                                    .map(str::to_string)
                                    .or_else(|| text(x, "id"))
                                    .map(|s| s.trim_start_matches('@').to_string())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                (channel, What::Members { agents })
            }
            _ => {
                self.skipped.other += 1;
                return None;
            }
        };
        Some(Raw {
            ts,
            recv,
            channel,
            what,
        })
    }

    fn trace_line(&mut self, no: u64, v: &Value) -> Result<(), LogError> {
        let Some(t_us) = num(v, "t_us") else {
            return Err(bad(self.path, no, "a trace line without a number `t_us`"));
        };
        let t = t_us / 1000.0;
        self.first_recv.get_or_insert(t);
        self.last_recv = self.last_recv.max(t);
        let ev = v.get("ev").and_then(Value::as_str).unwrap_or("");
        let msg = v.get("msg");
        let raw = match ev {
            "post" => {
                let kind = v.get("kind").and_then(Value::as_str).unwrap_or("channel");
                let (Some(id), Some(to)) = (text(v, "msg_id"), text(v, "to")) else {
                    return Err(bad(self.path, no, "a post without `msg_id` and `to`"));
                };
                if kind == "dm" || !to.starts_with('#') {
                    self.skipped.dms += 1;
                    return Ok(());
                }
                let raw = Raw {
                    ts: None,
                    recv: t,
                    channel: to,
                    what: What::Msg {
                        id: id.clone(),
                        from: text(v, "from").unwrap_or_else(|| "operator".into()),
                        reply_to: None,
                        mention: kind == "mention",
                    },
                };
                // A trace that says when a post was relayed: a question
                // only once it was (a refused post reached nobody).
                if v.get("relayed").is_some() {
                    self.text_bytes += text_of(&raw) + id.len();
                    self.pending.insert(id, raw);
                    return Ok(());
                }
                raw
            }
            "relayed" => {
                let Some(id) = text(v, "msg_id") else {
                    return Err(bad(self.path, no, "a `relayed` line without `msg_id`"));
                };
                match self.pending.remove(&id) {
                    Some(raw) => {
                        self.text_bytes -= id.len() + text_of(&raw);
                        raw
                    }
                    None => return Ok(()),
                }
            }
            "recv" => {
                let Some(m) = msg else { return Ok(()) };
                let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
                if ty != "RESPONDING_TO" && ty != "FLOOR_CLAIMED" {
                    return Ok(());
                }
                let granted = ty == "FLOOR_CLAIMED";
                let agent = text(m, if granted { "holder" } else { "from" });
                let (Some(channel), Some(id), Some(agent)) =
                    (text(m, "channel"), text(m, "msg_id"), agent)
                else {
                    return Ok(());
                };
                let stamp = m
                    .get("started_at")
                    .map(Value::to_string)
                    .unwrap_or_default();
                let held = ty.len() + id.len() + agent.len() + stamp.len();
                if !self
                    .trace_claims
                    .insert((ty.to_string(), id.clone(), agent.clone(), stamp))
                {
                    return Ok(());
                }
                self.text_bytes += held;
                Raw {
                    ts: None,
                    recv: t,
                    channel,
                    what: What::Claim {
                        msg: id,
                        agent,
                        started_at: None,
                        granted,
                    },
                }
            }
            "server_recv" => {
                let Some(m) = msg else { return Ok(()) };
                let (Some(id), Some(to), Some(agent)) =
                    (text(m, "id"), text(m, "to"), text(v, "agent"))
                else {
                    return Ok(());
                };
                if !to.starts_with('#') {
                    return Ok(());
                }
                Raw {
                    ts: None,
                    recv: t,
                    channel: to,
                    what: What::Msg {
                        id,
                        from: agent,
                        reply_to: text(m, "in_reply_to"),
                        mention: false,
                    },
                }
            }
            _ => return Ok(()),
        };
        self.keep(raw);
        Ok(())
    }

    fn finish(self, channel: Option<&str>) -> Result<Log, LogError> {
        let path = self.path;
        let Some(format) = self.format else {
            return Err(LogError(format!("{}: empty: no frames", path.display())));
        };
        let channel = match (channel, &self.header_channel) {
            (Some(c), _) => c.to_string(),
            (None, Some(c)) => c.clone(),
            (None, None) => {
                let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
                for r in &self.raw {
                    if matches!(r.what, What::Msg { .. }) {
                        *counts.entry(r.channel.as_str()).or_insert(0) += 1;
                    }
                }
                // The busiest; on a tie the first in name order.
                counts
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(c, _)| c.to_string())
                    .ok_or_else(|| {
                        LogError(format!("{}: no channel message in the log", path.display()))
                    })?
            }
        };
        let mut skipped = self.skipped;
        skipped.unrelayed = self.pending.len() as u64;
        let (mine, others): (Vec<Raw>, Vec<Raw>) =
            self.raw.into_iter().partition(|r| r.channel == channel);
        skipped.other_channels += others.len() as u64;
        let clock = if format == Format::LiveTrace {
            Clock::Scenario
        } else if !mine.is_empty()
            && mine
                .iter()
                .filter(|r| matches!(r.what, What::Msg { .. } | What::Claim { .. }))
                .all(|r| r.ts.is_some())
        {
            Clock::Server
        } else {
            Clock::Receive
        };
        let time = |r: &Raw| match clock {
            Clock::Server => r.ts.unwrap_or(r.recv),
            Clock::Receive | Clock::Scenario => r.recv,
        };
        let first_recv = self.first_recv.unwrap_or(0.0);
        // The log's span in its own clock: a server-stamped log is mapped
        // through its last stamped event.
        let (start_t, end_t) = match clock {
            Clock::Server => {
                let last = mine
                    .iter()
                    .filter(|r| r.ts.is_some())
                    .max_by(|a, b| a.recv.total_cmp(&b.recv));
                let first = mine
                    .iter()
                    .filter(|r| r.ts.is_some())
                    .min_by(|a, b| a.recv.total_cmp(&b.recv));
                match (first, last) {
                    (Some(f), Some(l)) => (
                        f.ts.unwrap_or(0.0) - (f.recv - first_recv),
                        l.ts.unwrap_or(0.0) + (self.last_recv - l.recv),
                    ),
                    _ => (0.0, 0.0),
                }
            }
            Clock::Receive | Clock::Scenario => (first_recv, self.last_recv),
        };
        // Time order; the order read among equal times (FIFO on one link):
        // a stable sort, the events moved, not copied.
        let mut events: Vec<Event> = mine
            .into_iter()
            .map(|r| Event {
                t: time(&r),
                what: r.what,
            })
            .collect();
        events.sort_by(|a, b| a.t.total_cmp(&b.t));
        Ok(Log {
            path: path.to_path_buf(),
            format,
            clock,
            channel,
            events,
            names: self.names,
            observer: self.observer,
            url: self.url,
            rtt_ms: self.rtt_ms,
            start_t,
            end_t,
            end_reason: self.end_reason,
            skipped,
            frames: self.frames,
            connections: self.conns.len(),
            cut_last_line: self.cut_last_line,
            time_field: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/agentchat-wire")
            .join(name)
    }

    fn count(log: &Log, f: impl Fn(&What) -> bool) -> usize {
        log.events.iter().filter(|e| f(&e.what)).count()
    }

    #[test]
    fn the_recorded_session_as_a_member_saw_it() {
        let log = read(&data("expiry-ttl1s.jsonl.gz"), None).expect("reads");
        assert_eq!(log.format, Format::Recording);
        assert_eq!(log.clock, Clock::Server);
        assert_eq!(log.channel, "#general");
        assert_eq!(log.connections, 12);
        // Every distinct broadcast once: 40 questions (20 per replication)
        // and their grants and answers, as connection 0 and 6 saw them.
        let questions = count(
            &log,
            |w| matches!(w, What::Msg { reply_to: None, from, .. } if from != "server"),
        );
        let grants = count(&log, |w| matches!(w, What::Claim { granted: true, .. }));
        let answers = count(&log, |w| {
            matches!(
                w,
                What::Msg {
                    reply_to: Some(_),
                    ..
                }
            )
        });
        assert_eq!(questions, 40);
        assert_eq!(grants, 46);
        assert!(answers >= 40, "{answers}");
        assert!(log.skipped.copies > 0 && log.skipped.replays > 0 && log.skipped.notices > 0);
        assert!(log.skipped.yields > 0, "YIELDs to the agents are skipped");
        assert_eq!(
            log.names.get("9b6406d881124042").map(String::as_str),
            Some("agent-002")
        );
        assert!(log.end_t > log.start_t);
    }

    #[test]
    fn plain_and_gzipped_read_alike_and_bad_lines_are_named() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = tmp.path().join("x.jsonl");
        std::fs::write(
            &p,
            "{\"ms\": 0, \"conn\": 0, \"dir\": \"down\", \"frame\": \"{}\"}\nnot json\n",
        )
        .expect("write");
        let e = read(&p, Some("#general")).expect_err("line 2");
        assert!(
            e.0.ends_with("x.jsonl:2: not JSON: expected ident at line 1 column 2"),
            "{e}"
        );
        std::fs::write(&p, "{\"a\": 1}\n").expect("write");
        assert!(
            read(&p, None)
                .expect_err("no format")
                .0
                .contains(":1: not a frame log")
        );
        std::fs::write(&p, "").expect("write");
        assert!(read(&p, None).expect_err("empty").0.contains("empty"));
        // A cut last line (a killed recording) is skipped and said.
        std::fs::write(
            &p,
            "{\"ms\": 0, \"conn\": 0, \"dir\": \"down\", \"frame\": \"{\\\"type\\\":\\\"MSG\\\",\\\"id\\\":\\\"q\\\",\\\"from\\\":\\\"op\\\",\\\"to\\\":\\\"#c\\\",\\\"content\\\":\\\"hi\\\"}\"}\n{\"ms\": 1, \"co",
        )
        .expect("write");
        let log = read(&p, None).expect("reads");
        assert!(log.cut_last_line);
        assert_eq!(log.channel, "#c");
        assert_eq!(log.clock, Clock::Receive);
        assert_eq!(log.events.len(), 1);
    }

    /// A trace that marks relays: a post never relayed (the server
    /// refused it) is no question; a trace without the mark (older) counts
    /// every post.
    #[test]
    fn a_refused_post_in_a_trace_is_not_a_question() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = tmp.path().join("trace.jsonl");
        let post = |t: u64, id: &str, mark: bool| {
            let mut v = serde_json::json!({"t_us": t, "ev": "post", "msg_id": id,
                "from": "operator", "to": "#general", "kind": "channel"});
            if mark {
                v["relayed"] = "line".into();
            }
            v.to_string() + "\n"
        };
        let relayed = |t: u64, id: &str| {
            serde_json::json!({"t_us": t, "ev": "relayed", "msg_id": id}).to_string() + "\n"
        };
        let questions = |log: &Log| count(log, |w| matches!(w, What::Msg { reply_to: None, .. }));
        let text = post(1000, "m1", true)
            + &relayed(1500, "m1")
            + &post(2000, "m2", true)
            + &post(9000, "m3", true)
            + &relayed(9100, "m3");
        std::fs::write(&p, text).expect("write");
        let log = read(&p, None).expect("reads");
        assert_eq!(questions(&log), 2);
        assert_eq!(log.skipped.unrelayed, 1);
        // At the time of the post, not of its relay.
        assert_eq!(log.events[0].t, 1.0);
        let text = post(1000, "m1", false) + &post(2000, "m2", false);
        std::fs::write(&p, text).expect("write");
        let log = read(&p, None).expect("reads");
        assert_eq!(questions(&log), 2);
    }

    /// A recording's copies are told by a hash of the frame: the frames
    /// dropped (DMs here) are not remembered at all, and the kept ones'
    /// copies are still skipped.
    #[test]
    fn only_kept_frames_are_remembered_to_skip_their_copies() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = tmp.path().join("rec.jsonl");
        let line = |ms: u64, conn: u64, frame: serde_json::Value| {
            serde_json::json!({"ms": ms, "conn": conn, "dir": "down", "frame": frame.to_string()})
                .to_string()
                + "\n"
        };
        let q = serde_json::json!({"type": "MSG", "id": "q1", "from": "@op", "to": "#c",
            "content": "hi"});
        let mut text = line(0, 0, q.clone()) + &line(1, 1, q);
        for i in 0..50 {
            let dm = serde_json::json!({"type": "MSG", "id": format!("d{i}"), "from": "@op",
                "to": "@bob", "content": "x".repeat(1000)});
            text += &line(2 + i, 0, dm);
        }
        std::fs::write(&p, text).expect("write");
        let st = {
            let log = read(&p, None).expect("reads");
            assert_eq!(log.skipped.copies, 1);
            assert_eq!(log.skipped.dms, 50);
            log
        };
        assert_eq!(st.events.len(), 1);
    }
}
