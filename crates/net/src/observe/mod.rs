//! `herdsim observe`: a passive member of a channel. It connects,
//! identifies (with an Ed25519 key where the server needs one), joins the
//! channel and from then on only reads: it never posts, never claims. Every
//! frame the server sends it is written to a frame log in the recorded
//! format (tests/data/agentchat-wire), which `calibrate` reads
//! (docs/observe.md). [`job::run`] is the whole command: record into a
//! locked results folder, then calibrate what was recorded.
//!
//! What it sends: IDENTIFY, VERIFY_IDENTITY (keyed), JOIN, and a WebSocket
//! ping every [`PING_EVERY`] (a control frame, not a chat message) whose
//! round trip estimates the link's delay.
//!
//! Bounded against a hostile or very busy server: a frame is at most
//! [`MAX_FRAME_BYTES`](crate::live::conn::MAX_FRAME_BYTES) (a larger one
//! closes the connection); before the handshake ends, at most
//! [`MAX_EARLY_FRAMES`](crate::live::conn::MAX_EARLY_FRAMES) frames and
//! [`MAX_EARLY_BYTES`](crate::live::conn::MAX_EARLY_BYTES) are held (more
//! refuse the server), for at most
//! [`SETUP_TIMEOUT`](crate::live::conn::SETUP_TIMEOUT); then frames are
//! written as they come (nothing kept in memory but counters), and the log
//! stops at `max_log_bytes`, which ends the observation as its duration
//! would. Pings are sent by a task of their own, each within
//! [`SEND_TIMEOUT`](crate::live::conn::SEND_TIMEOUT) (else the connection
//! ends): a server that never reads cannot stop the duration, the pong
//! timeout or Ctrl-C from ending the observation. Live code: real time and a
//! socket, never on the simulator's path.

pub mod job;

use crate::live::conn::{self, Identity};
use crate::live::wire::{self, Kind};
use futures_util::StreamExt;
use futures_util::stream::SplitSink;
use serde_json::{Value, json};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// How often the observer pings the server.
pub const PING_EVERY: Duration = Duration::from_secs(2);

/// A server that answers no ping for this long is gone: the observation ends.
pub const PONG_TIMEOUT: Duration = Duration::from_secs(30);

/// Room kept in the log for its end line.
const END_ROOM: u64 = 4096;

/// The default cap on the log.
pub const DEFAULT_MAX_LOG_BYTES: u64 = 1 << 30;

/// What to watch and where to write.
#[derive(Debug, Clone)]
pub struct Options {
    pub url: String,
    pub channel: String,
    /// The IDENTIFY name and, keyed, its Ed25519 key.
    pub identity: Identity,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Stop after this long (None: at Ctrl-C).
    pub duration: Option<Duration>,
    /// The frame log.
    pub log: PathBuf,
    pub max_log_bytes: u64,
    /// How often to ping the server ([`PING_EVERY`]).
    pub ping_every: Duration,
    /// A ping unanswered this long ends the observation ([`PONG_TIMEOUT`]).
    pub pong_timeout: Duration,
}

/// What has been seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub frames: u64,
    pub questions: u64,
    pub claims: u64,
    pub answers: u64,
    /// Bytes written to the log.
    pub bytes: u64,
    pub pings_answered: u64,
}

/// Why the observation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The duration was reached.
    Duration,
    /// Ctrl-C (or SIGTERM).
    Interrupted,
    /// The log reached `max_log_bytes`.
    LogFull,
    /// The server closed the connection or stopped answering.
    Closed(String),
}

impl End {
    pub fn reason(&self) -> String {
        match self {
            End::Duration => "the duration was reached".into(),
            End::Interrupted => "interrupted".into(),
            End::LogFull => "the log reached its size cap (--max-log-bytes)".into(),
            End::Closed(why) => format!("the connection ended: {why}"),
        }
    }
}

/// A finished observation.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub counts: Counts,
    pub end: End,
    pub elapsed: Duration,
    /// The id the server gave the observer.
    pub id: String,
}

/// Why an observation could not start or went wrong: bad input (exit 2)
/// or a failure (exit 1), by variant ([`ObserveError::is_bad_input`]).
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The frame log cannot be created where asked (a folder, a link, a
    /// device, no permission): bad input (exit 2).
    #[error("{}: {source}", path.display())]
    Log {
        /// The log.
        path: PathBuf,
        /// What the system (or the files module's refusal) said.
        source: std::io::Error,
    },
    /// Writing the log (or creating its folder) failed (exit 1).
    #[error("{}: {source}", path.display())]
    Write {
        /// The log or its folder.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The async runtime did not start (exit 1).
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The connection did not open (exit 1).
    #[error(transparent)]
    Connection(#[from] conn::ConnError),
    /// The server (no WELCOME/JOINED in time, an interruption before it),
    /// in words (exit 1).
    #[error("{0}")]
    Failure(String),
}

impl ObserveError {
    /// Bad input (exit 2), from the variant.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ObserveError::Log { .. } => true,
            ObserveError::Write { .. }
            | ObserveError::Runtime(_)
            | ObserveError::Connection(_)
            | ObserveError::Failure(_) => false,
        }
    }
}

/// The one taxonomy's error, by kind: the same message and exit status.
impl From<ObserveError> for crate::error::Error {
    fn from(e: ObserveError) -> Self {
        if e.is_bad_input() {
            crate::error::Error::Input(e.to_string())
        } else {
            crate::error::Error::Other(Box::new(e))
        }
    }
}

/// The log, written line by line with its size counted; created at its
/// first line (after the handshake: a server that cannot be reached
/// leaves no log behind).
struct LogFile {
    out: Option<BufWriter<File>>,
    path: PathBuf,
    bytes: u64,
    cap: u64,
}

impl LogFile {
    /// Write one JSON line; false when the cap leaves no room for it.
    fn line(&mut self, v: &Value) -> Result<bool, ObserveError> {
        let mut text = v.to_string();
        text.push('\n');
        let n = text.len() as u64;
        if self.bytes + n + END_ROOM > self.cap {
            return Ok(false);
        }
        self.file()?
            .write_all(text.as_bytes())
            .map_err(|source| ObserveError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.bytes += n;
        Ok(true)
    }

    /// The end line, always written (room was kept for it).
    fn end(&mut self, ms: f64, end: &End, c: &Counts) -> Result<(), ObserveError> {
        let v = json!({"ms": ms, "end": {"reason": end.reason(), "frames": c.frames,
            "questions": c.questions, "claims": c.claims, "answers": c.answers}});
        let text = format!("{v}\n");
        let out = self.file()?;
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|source| ObserveError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.bytes += text.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ObserveError> {
        match &mut self.out {
            Some(out) => out.flush().map_err(|source| ObserveError::Write {
                path: self.path.clone(),
                source,
            }),
            None => Ok(()),
        }
    }

    /// The file, created at the first call.
    fn file(&mut self) -> Result<&mut BufWriter<File>, ObserveError> {
        if self.out.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir).map_err(|source| ObserveError::Write {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
            let file =
                crate::files::create_in_place(&self.path).map_err(|source| ObserveError::Log {
                    path: self.path.clone(),
                    source,
                })?;
            self.out = Some(BufWriter::new(file));
        }
        match &mut self.out {
            Some(out) => Ok(out),
            None => Err(ObserveError::Failure(format!(
                "{}: not open",
                self.path.display()
            ))),
        }
    }
}

/// Count a frame into the progress: a question, a claim or an answer on
/// the channel (replays and notices are not).
fn count(c: &mut Counts, text: &str, channel: &str) {
    let (kind, v) = wire::read(text, conn::MAX_FRAME_BYTES);
    match kind {
        Kind::Msg if v.get("to").and_then(Value::as_str) == Some(channel) => {
            if v.get("in_reply_to").is_some_and(|r| !r.is_null()) {
                c.answers += 1;
            } else {
                c.questions += 1;
            }
        }
        Kind::Floor
            if v.get("channel").and_then(Value::as_str) == Some(channel)
                && matches!(
                    v.get("type").and_then(Value::as_str),
                    Some("RESPONDING_TO" | "FLOOR_CLAIMED")
                ) =>
        {
            c.claims += 1;
        }
        _ => {}
    }
}

fn ms_since(start: Instant) -> f64 {
    (start.elapsed().as_nanos() as f64 / 1e3).round() / 1e3
}

/// Watch until the duration, `stop`, the log's cap or the server ends it.
/// `progress` is called about five times a second.
pub fn record(
    opts: &Options,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Counts, Duration),
) -> Result<Recorded, ObserveError> {
    let mut log = LogFile {
        out: None,
        path: opts.log.clone(),
        bytes: 0,
        cap: opts.max_log_bytes,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ObserveError::Runtime)?;
    rt.block_on(watch(opts, stop, progress, &mut log))
}

/// The observer's writer task: sends the pings (and the close) it is
/// given, each within [`conn::SEND_TIMEOUT`]; ends with why when one could
/// not be sent (a server that does not read never blocks the loop that
/// checks the duration, the pong timeout and Ctrl-C).
fn spawn_writer(
    mut sink: SplitSink<conn::Ws, Message>,
    mut rx: mpsc::Receiver<Message>,
) -> tokio::task::JoinHandle<String> {
    tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let what = if m.is_close() { "a close" } else { "a ping" };
            if let Err(why) = conn::send_within(&mut sink, m, what, conn::SEND_TIMEOUT).await {
                return why;
            }
        }
        String::new()
    })
}

/// Connect, identify and join within [`conn::SETUP_TIMEOUT`], or until
/// `stop`: the socket, the id the server gave and the frames read before
/// the handshake ended that were not its own.
async fn connect(
    opts: &Options,
    stop: &AtomicBool,
) -> Result<(conn::Ws, String, conn::Early), ObserveError> {
    let mut early = conn::Early::default();
    let channels = [opts.channel.clone()];
    let handshake = tokio::time::timeout(
        conn::SETUP_TIMEOUT,
        conn::handshake(
            &opts.url,
            opts.tls.as_ref(),
            &opts.identity,
            &channels,
            &mut early,
        ),
    );
    let stopped = async {
        while !stop.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (ws, id) = tokio::select! {
        r = handshake => r
            .map_err(|_| ObserveError::Failure(format!(
                "{}: no WELCOME/JOINED within {} s",
                opts.url,
                conn::SETUP_TIMEOUT.as_secs()
            )))?
            .map_err(ObserveError::Connection)?,
        () = stopped => {
            return Err(ObserveError::Failure(format!(
                "{}: interrupted before WELCOME/JOINED: nothing was recorded",
                opts.url
            )));
        }
    };
    Ok((ws, id, early))
}

async fn watch(
    opts: &Options,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Counts, Duration),
    log: &mut LogFile,
) -> Result<Recorded, ObserveError> {
    let start = Instant::now();
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let (ws, id, early) = connect(opts, stop).await?;
    let header = json!({
        "herdsim_observe": 1,
        "version": env!("CARGO_PKG_VERSION"),
        "url": opts.url,
        "channel": opts.channel,
        "name": opts.identity.name,
        "id": id,
        "keyed": opts.identity.key.is_some(),
        "started_unix_ms": unix_ms,
    });
    let mut c = Counts::default();
    let mut end = None;
    if !log.line(&header)? {
        end = Some(End::LogFull);
    }
    // Frames the handshake read that were not its own (the server's
    // order kept), at the time it ended.
    let t = ms_since(start);
    for text in early.frames {
        if end.is_some() {
            break;
        }
        if !log.line(&json!({"ms": t, "conn": 0, "dir": "down", "frame": text}))? {
            end = Some(End::LogFull);
        }
        c.frames += 1;
        count(&mut c, &text, &opts.channel);
    }
    let (sink, mut stream) = ws.split();
    let (tx, rx) = mpsc::channel::<Message>(4);
    let mut writer = spawn_writer(sink, rx);
    let mut writer_done = false;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut next_ping = Instant::now() + opts.ping_every;
    let mut seq: u64 = 0;
    let mut pending: Option<(u64, Instant)> = None;
    while end.is_none() {
        tokio::select! {
            m = stream.next() => {
                let text = match m {
                    Some(Ok(Message::Text(t))) => Some(t.to_string()),
                    Some(Ok(Message::Binary(b))) => Some(String::from_utf8_lossy(&b).into_owned()),
                    Some(Ok(Message::Pong(p))) => {
                        if let Some((s, at)) = pending
                            && p.as_ref() == s.to_be_bytes()
                        {
                            let rtt = at.elapsed().as_nanos() as f64 / 1e6;
                            pending = None;
                            c.pings_answered += 1;
                            if !log.line(&json!({"ms": ms_since(start), "conn": 0, "dir": "rtt", "rtt_ms": rtt}))? {
                                end = Some(End::LogFull);
                            }
                        }
                        None
                    }
                    Some(Ok(Message::Close(f))) => {
                        end = Some(End::Closed(match f {
                            Some(f) => format!("the server closed it ({} {})", u16::from(f.code), f.reason),
                            None => "the server closed it".into(),
                        }));
                        None
                    }
                    Some(Ok(_)) => None,
                    Some(Err(e)) => {
                        end = Some(End::Closed(conn::read_error(&opts.url, &e)));
                        None
                    }
                    None => {
                        end = Some(End::Closed("the server closed it".into()));
                        None
                    }
                };
                if let Some(text) = text {
                    c.frames += 1;
                    count(&mut c, &text, &opts.channel);
                    if !log.line(&json!({"ms": ms_since(start), "conn": 0, "dir": "down", "frame": text}))? {
                        end = Some(End::LogFull);
                    }
                }
            }
            why = &mut writer, if !writer_done => {
                writer_done = true;
                end = Some(End::Closed(why.unwrap_or_else(|e| format!("the writer failed: {e}"))));
            }
            _ = tick.tick() => {
                if stop.load(Ordering::SeqCst) {
                    end = Some(End::Interrupted);
                } else if opts.duration.is_some_and(|d| start.elapsed() >= d) {
                    end = Some(End::Duration);
                } else if pending.is_some_and(|(_, at)| at.elapsed() > opts.pong_timeout) {
                    end = Some(End::Closed(format!(
                        "no answer to a ping for {} s",
                        opts.pong_timeout.as_secs_f64()
                    )));
                } else if pending.is_none() && Instant::now() >= next_ping {
                    seq += 1;
                    pending = Some((seq, Instant::now()));
                    next_ping = Instant::now() + opts.ping_every;
                    // Never waits: the writer sends it (a full queue means
                    // the last ping is still being sent; its pong is due).
                    let _ = tx.try_send(Message::Ping(seq.to_be_bytes().to_vec().into()));
                }
                c.bytes = log.bytes;
                log.flush()?;
                progress(&c, start.elapsed());
            }
        }
    }
    let end = end.unwrap_or(End::Interrupted);
    // Leave politely, but never wait long for a server that is gone or
    // does not read.
    if !writer_done {
        let _ = tx.try_send(Message::Close(None));
        drop(tx);
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut writer).await;
        writer.abort();
    }
    log.end(ms_since(start), &end, &c)?;
    c.bytes = log.bytes;
    progress(&c, start.elapsed());
    Ok(Recorded {
        counts: c,
        end,
        elapsed: start.elapsed(),
        id,
    })
}

/// A duration flag: seconds, or a number with `s`, `m` or `h`.
pub fn parse_duration(raw: &str) -> Option<Duration> {
    let raw = raw.trim();
    let (num, unit) = match raw.char_indices().find(|(_, ch)| ch.is_ascii_alphabetic()) {
        Some((i, _)) => (&raw[..i], &raw[i..]),
        None => (raw, "s"),
    };
    let x: f64 = num.trim().parse().ok()?;
    let secs = match unit {
        "s" => x,
        "m" | "min" => x * 60.0,
        "h" => x * 3600.0,
        _ => return None,
    };
    (secs.is_finite() && secs > 0.0 && secs <= 1e7).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::SinkExt;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5m"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        for bad in ["", "0", "-1", "1d", "x", "nan", "1e9h"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    /// A server that answers WELCOME and JOINED, then neither reads nor
    /// answers a ping: the pong timeout ends the observation, naming it.
    #[test]
    fn a_ping_unanswered_ends_the_observation() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let url = format!("ws://{}", listener.local_addr().expect("addr"));
        let _server = rt.spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let mut ws = tokio_tungstenite::accept_async(tcp).await.expect("ws");
            for reply in [
                r#"{"type":"WELCOME"}"#,
                r##"{"type":"JOINED","channel":"#g"}"##,
            ] {
                let _ = ws.next().await;
                ws.send(Message::text(reply)).await.expect("sent");
            }
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        let tmp = tempfile::tempdir().expect("tmp");
        let opts = Options {
            url,
            channel: "#g".into(),
            identity: Identity {
                name: "observer".into(),
                key: None,
            },
            tls: None,
            duration: Some(Duration::from_secs(20)),
            log: tmp.path().join("frames.jsonl"),
            max_log_bytes: DEFAULT_MAX_LOG_BYTES,
            ping_every: Duration::from_millis(100),
            pong_timeout: Duration::from_millis(500),
        };
        let mut log = LogFile {
            out: None,
            path: opts.log.clone(),
            bytes: 0,
            cap: opts.max_log_bytes,
        };
        let stop = AtomicBool::new(false);
        let rec = rt
            .block_on(watch(&opts, &stop, &mut |_, _| {}, &mut log))
            .expect("recorded");
        assert_eq!(rec.end, End::Closed("no answer to a ping for 0.5 s".into()));
        assert!(rec.elapsed < Duration::from_secs(10), "{:?}", rec.elapsed);
    }

    #[test]
    fn counts_what_a_member_sees() {
        let mut c = Counts::default();
        let q =
            r##"{"type":"MSG","ts":1,"from":"@a","to":"#general","content":"q","msg_id":"1-x"}"##;
        let a = r##"{"type":"MSG","ts":2,"from":"@b","to":"#general","content":"a","msg_id":"2-y","in_reply_to":"1-x"}"##;
        let g = r##"{"type":"FLOOR_CLAIMED","ts":2,"msg_id":"1-x","channel":"#general","holder":"@b","started_at":5}"##;
        let other =
            r##"{"type":"MSG","ts":1,"from":"@a","to":"#help","content":"q","msg_id":"3-z"}"##;
        let replay = r##"{"type":"MSG","ts":1,"from":"@a","to":"#general","content":"q","msg_id":"1-x","replay":true}"##;
        for f in [q, a, g, other, replay, "junk"] {
            count(&mut c, f, "#general");
        }
        assert_eq!((c.questions, c.claims, c.answers), (1, 1, 1));
    }

    #[test]
    fn the_exit_status_comes_from_the_kind_and_the_text_stays() {
        use crate::error::Error;
        let io = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let shown = format!("out/frames.jsonl: {}", io());
        let log = ObserveError::Log {
            path: "out/frames.jsonl".into(),
            source: io(),
        };
        assert!(log.is_bad_input());
        let e = Error::from(log);
        assert_eq!((e.exit_code(), e.to_string()), (2, shown.clone()));
        let write = ObserveError::Write {
            path: "out/frames.jsonl".into(),
            source: io(),
        };
        assert!(
            std::error::Error::source(&write).is_some(),
            "the io error is kept"
        );
        let e = Error::from(write);
        assert_eq!((e.exit_code(), e.to_string()), (1, shown));
        let refused = ObserveError::from(conn::ConnError::Handshake(
            "ws://127.0.0.1:1: the connection closed before WELCOME/JOINED".into(),
        ));
        let e = Error::from(refused);
        assert_eq!(e.exit_code(), 1);
        assert_eq!(
            e.to_string(),
            "ws://127.0.0.1:1: the connection closed before WELCOME/JOINED"
        );
    }
}
