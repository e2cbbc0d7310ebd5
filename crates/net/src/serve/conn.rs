//! One connection: the WebSocket, the limits, the identity handshake and
//! PING, which this task answers itself (the session layer); every other
//! frame of an identified client goes to the hub, and so to the floor.
//!
//! Every resource the connection holds is bounded (docs/serve.md, "Limits
//! and what a hostile client can do"): the frame size, the WebSocket's
//! read and write buffers, frames and bytes per second (over the byte
//! rate, or a ping over the frame rate, the socket is simply not read for
//! a while), the time to identify, the time it may stay silent, the time
//! one write may take, the lengths of ids, and the bytes of its frames on
//! their way to the hub. What the hub queues for it is bounded by the hub.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ed25519_dalek::VerifyingKey;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::budget::{Inbound, Queued, Usage, value_bytes};
use super::hub::{ConnId, Event, error_text};
use super::identity;
use super::{ENVELOPE_BYTES, Limits, Shared};
use crate::floor::Role;
use crate::floor::sim::{AGENTCHAT_FRAMES_IDENTIFIED, AGENTCHAT_FRAMES_UNIDENTIFIED, FrameWindow};

/// Time allowed for the TLS (with `--tls-cert`) and WebSocket handshakes.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a keyed client has to answer its CHALLENGE (agentchat's).
pub const CHALLENGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Time allowed for a closing handshake (and for draining a client's
/// unread bytes after an error) before the socket is dropped.
const CLOSE_LINGER: Duration = Duration::from_secs(1);
/// Longest `pubkey` in IDENTIFY (an Ed25519 SPKI PEM is 113 bytes).
pub const MAX_PUBKEY_BYTES: usize = 1024;
/// The WebSocket read buffer of a connection (the default 128 KiB times
/// a thousand idle connections would be 128 MiB).
const READ_BUFFER: usize = 8 * 1024;

/// The byte stream under the WebSocket: the TCP connection, or TLS on it.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type Ws = WebSocketStream<Box<dyn Io>>;

/// The WebSocket configuration of `limits`: frames up to the frame limit,
/// a small read buffer, writes made at once, and a write buffer that holds
/// one largest outgoing message (and the pongs of a client that does not
/// read, which then stop being queued) at most.
pub(crate) fn ws_config(limits: &Limits) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(limits.max_frame_bytes))
        .max_frame_size(Some(limits.max_frame_bytes))
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_write_buffer_size(
            limits
                .max_queued_bytes
                .max(limits.max_frame_bytes + ENVELOPE_BYTES),
        )
}

/// The TLS handshake when the server has TLS, then the WebSocket one.
async fn handshake(stream: TcpStream, shared: &Shared, cfg: WebSocketConfig) -> Result<Ws, String> {
    let io: Box<dyn Io> = match &shared.tls {
        None => Box::new(stream),
        Some(tls) => Box::new(
            tokio_rustls::TlsAcceptor::from(tls.clone())
                .accept(stream)
                .await
                .map_err(|e| e.to_string())?,
        ),
    };
    tokio_tungstenite::accept_async_with_config(io, Some(cfg))
        .await
        .map_err(|e| e.to_string())
}

/// A connection's place among the open ones: its permit, and how the
/// accept loop closes it to admit a newer one while it has not identified.
#[derive(Debug)]
pub(crate) struct Admission {
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    evict: Notify,
}

impl Admission {
    pub fn new(permit: OwnedSemaphorePermit) -> Arc<Admission> {
        Arc::new(Admission {
            permit: Mutex::new(Some(permit)),
            evict: Notify::new(),
        })
    }

    /// Whether a newer connection took this one's place.
    fn evicted(&self) -> bool {
        self.permit.lock().map_or(true, |p| p.is_none())
    }

    /// Give up the permit now (a newer connection takes it) and tell the
    /// task to close.
    pub fn evict(&self) {
        if let Ok(mut p) = self.permit.lock() {
            p.take();
        }
        self.evict.notify_one();
    }
}

/// A CHALLENGE waiting for its VERIFY_IDENTITY.
struct Challenge {
    id: String,
    nonce: String,
    name: String,
    key: VerifyingKey,
    pem: String,
    deadline: Instant,
}

/// The session of an identified connection.
struct Session {
    rx: mpsc::Receiver<Queued>,
    usage: Arc<Usage>,
}

/// Token bucket of the rate limits (frames, or bytes). The tokens may go
/// below zero (a frame larger than what is left): the deficit is waited
/// out before the next read.
struct Bucket {
    tokens: f64,
    last: Instant,
    rate: f64,
    burst: f64,
}

impl Bucket {
    fn new(rate: f64, burst: f64) -> Bucket {
        let burst = burst.max(1.0);
        Bucket {
            tokens: burst,
            last: Instant::now(),
            rate,
            burst,
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
    }

    /// Take one token; `false` when the limit is exceeded (nothing taken).
    /// A rate of 0 means no limit.
    fn take(&mut self) -> bool {
        if self.rate <= 0.0 {
            return true;
        }
        self.refill(Instant::now());
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Take `n` tokens, into debt if need be; how long until the bucket is
    /// back to zero (`None`: not in debt, or no limit).
    fn spend(&mut self, n: f64) -> Option<Duration> {
        if self.rate <= 0.0 {
            return None;
        }
        self.refill(Instant::now());
        self.tokens -= n;
        self.debt()
    }

    /// How long until one token is back (`None`: one is there).
    fn until_one(&mut self) -> Option<Duration> {
        if self.rate <= 0.0 {
            return None;
        }
        self.refill(Instant::now());
        (self.tokens < 1.0).then(|| Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
    }

    fn debt(&self) -> Option<Duration> {
        (self.tokens < 0.0).then(|| Duration::from_secs_f64(-self.tokens / self.rate))
    }
}

/// How the read loop ended.
enum End {
    /// The client went away (EOF, reset, close handshake): tell the hub.
    Gone,
    /// We close with this frame after draining; tell the hub.
    Close(CloseFrame),
    /// The hub dropped this connection (displaced, too slow, memory): close,
    /// but the hub already knows.
    Dropped(CloseFrame),
    /// Closed before identifying to admit a newer connection: dropped
    /// without a closing handshake.
    Evicted,
}

fn close_frame(code: CloseCode, reason: &str) -> CloseFrame {
    CloseFrame {
        code,
        reason: reason.into(),
    }
}

pub(crate) async fn run(
    stream: TcpStream,
    conn: ConnId,
    shared: Arc<Shared>,
    hub: mpsc::Sender<Event>,
    mut stop: watch::Receiver<bool>,
    admission: Arc<Admission>,
) {
    let accepted = Instant::now();
    let handshake = handshake(stream, &shared, ws_config(&shared.limits));
    let mut ws = tokio::select! {
        r = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake) => match r {
            Ok(Ok(ws)) => ws,
            _ => return shared.unregister(conn),
        },
        _ = stop.changed() => return shared.unregister(conn),
        () = admission.evict.notified() => return shared.unregister(conn),
    };
    let limits = &shared.limits;
    let mut c = Conn {
        conn,
        hub,
        challenge: None,
        session: None,
        frames: Bucket::new(f64::from(limits.rate_per_sec), f64::from(limits.burst)),
        bytes: Bucket::new(
            limits.byte_rate as f64,
            limits.byte_burst.max(limits.max_frame_bytes as u64) as f64,
        ),
        paused_until: None,
        identify_by: accepted + limits.identify_timeout,
        last_rx: Instant::now(),
        pinged: false,
        inflight: Arc::new(Semaphore::new(inflight_budget(limits))),
        admission,
        started: false,
        frame_window: FrameWindow::default(),
        shared: Arc::clone(&shared),
    };
    let end = c.read_loop(&mut ws, &mut stop).await;
    shared.unregister(conn);
    let (frame, tell_hub) = match end {
        End::Gone => (None, true),
        End::Close(f) => (Some(f), true),
        End::Dropped(f) => (Some(f), false),
        End::Evicted => (None, false),
    };
    // What is still queued is discarded with the session.
    c.session = None;
    if tell_hub && c.started {
        let _ = c.hub.send(Event::Gone { conn }).await;
    }
    if let Some(frame) = frame {
        linger_close(ws, frame).await;
    }
}

/// The bytes of parsed frames one connection may have on their way to the
/// hub: one largest frame's worth (a frame larger than this still goes,
/// alone).
fn inflight_budget(limits: &Limits) -> usize {
    limits
        .max_frame_bytes
        .saturating_add(ENVELOPE_BYTES)
        .min(Semaphore::MAX_PERMITS)
        .min(u32::MAX as usize)
}

/// Send a close frame and finish the closing handshake: read (and
/// discard) what the client still sends until it answers the close or
/// [`CLOSE_LINGER`] passes, so that the client gets our last frames rather
/// than a reset. After an oversized frame the stream is out of step (the
/// rest of that frame was never read), so the bytes are drained raw.
async fn linger_close(mut ws: Ws, frame: CloseFrame) {
    let raw = frame.code == CloseCode::Size;
    let _ = tokio::time::timeout(CLOSE_LINGER, async {
        let _ = ws.close(Some(frame)).await;
        if !raw {
            while let Some(Ok(_)) = ws.next().await {}
            return;
        }
        let io = ws.get_mut();
        let mut buf = [0u8; 4096];
        while let Ok(n) = io.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

struct Conn {
    conn: ConnId,
    shared: Arc<Shared>,
    hub: mpsc::Sender<Event>,
    challenge: Option<Challenge>,
    session: Option<Session>,
    /// Frames per second.
    frames: Bucket,
    /// Bytes per second.
    bytes: Bucket,
    /// The socket is not read until then (a rate limit's debt).
    paused_until: Option<Instant>,
    /// The WELCOME must come by then.
    identify_by: Instant,
    /// The last frame of any kind from the client.
    last_rx: Instant,
    /// A ping was sent since `last_rx`.
    pinged: bool,
    /// Bytes of this connection's frames on their way to the hub.
    inflight: Arc<Semaphore>,
    admission: Arc<Admission>,
    /// The hub registered this connection (it must hear of its end).
    started: bool,
    /// `agentchat-0.36`: the frames of the flood limit's window.
    frame_window: FrameWindow,
}

/// What wakes the read loop besides a frame.
enum Timer {
    Challenge,
    Identify,
    Ping,
    Idle,
}

impl Conn {
    /// The next deadline of the connection and what it is.
    fn next_timer(&self) -> (Instant, Timer) {
        let limits = &self.shared.limits;
        if self.session.is_none() {
            return match &self.challenge {
                Some(c) if c.deadline < self.identify_by => (c.deadline, Timer::Challenge),
                _ => (self.identify_by, Timer::Identify),
            };
        }
        // While the server does not read (a rate limit's debt) the client
        // is not idle.
        let since = self
            .paused_until
            .map_or(self.last_rx, |p| p.max(self.last_rx));
        if self.pinged {
            (since + limits.idle_timeout, Timer::Idle)
        } else {
            (since + limits.idle_timeout / 2, Timer::Ping)
        }
    }

    async fn read_loop(&mut self, ws: &mut Ws, stop: &mut watch::Receiver<bool>) -> End {
        loop {
            let (at, timer) = self.next_timer();
            let paused = self.paused_until.map(tokio::time::Instant::from_std);
            let identified = self.session.is_some();
            let usage = self.session.as_ref().map(|s| Arc::clone(&s.usage));
            tokio::select! {
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        return End::Close(close_frame(CloseCode::Away, "server shutting down"));
                    }
                }
                // Evicted to admit a newer connection: its place is
                // already given away, so the socket is dropped at once.
                () = self.admission.evict.notified(), if !identified => return End::Evicted,
                () = killed_usage(usage.as_deref()) => {
                    return End::Dropped(close_frame(CloseCode::Policy, "dropped by the server"));
                }
                out = recv(&mut self.session) => match out {
                    Some(q) => {
                        if let Some(end) = self.write(ws, Message::Text(q.payload.text.clone())).await {
                            return end;
                        }
                    }
                    None => {
                        return End::Dropped(close_frame(CloseCode::Policy, "dropped by the server"));
                    }
                },
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {
                    if let Some(end) = self.on_timer(ws, timer).await {
                        return end;
                    }
                }
                () = sleep_until(paused), if paused.is_some() => {
                    self.paused_until = None;
                }
                frame = ws.next(), if paused.is_none() => match frame {
                    None => return End::Gone,
                    Some(Ok(m)) => {
                        if let Some(end) = self.on_message(ws, m).await {
                            return end;
                        }
                    }
                    Some(Err(WsError::Capacity(e))) => {
                        let msg = format!(
                            "frame too large: {e} (limit {} bytes); closing",
                            self.shared.limits.max_frame_bytes
                        );
                        let _ = self.send_now(ws, error_text("FRAME_TOO_LARGE", &msg)).await;
                        return End::Close(close_frame(CloseCode::Size, "frame too large"));
                    }
                    Some(Err(WsError::Utf8(e))) => {
                        let msg = format!("text frame is not UTF-8: {e}; closing");
                        let _ = self.send_now(ws, error_text("INVALID_MSG", &msg)).await;
                        return End::Close(close_frame(CloseCode::Invalid, "invalid UTF-8"));
                    }
                    Some(Err(_)) => return End::Gone,
                },
            }
        }
    }

    async fn on_timer(&mut self, ws: &mut Ws, timer: Timer) -> Option<End> {
        match timer {
            Timer::Challenge => {
                self.challenge = None;
                let _ = self
                    .send_now(ws, error_text("VERIFICATION_EXPIRED", "Challenge expired"))
                    .await;
                Some(End::Close(close_frame(
                    CloseCode::Normal,
                    "Challenge expired",
                )))
            }
            Timer::Identify => {
                let msg = format!(
                    "no WELCOME within {} ms of connecting (--identify-timeout-ms); closing",
                    self.shared.limits.identify_timeout.as_millis()
                );
                let _ = self.send_now(ws, error_text("AUTH_TIMEOUT", &msg)).await;
                Some(End::Close(close_frame(
                    CloseCode::Policy,
                    "identify timeout",
                )))
            }
            Timer::Ping => {
                self.pinged = true;
                self.write(ws, Message::Ping(Default::default())).await
            }
            Timer::Idle => Some(End::Close(close_frame(CloseCode::Policy, "idle timeout"))),
        }
    }

    /// Any frame from the client: count it against the rates, then handle
    /// a data frame.
    async fn on_message(&mut self, ws: &mut Ws, m: Message) -> Option<End> {
        self.last_rx = Instant::now();
        self.pinged = false;
        let len = m.len();
        let mut wait = self.bytes.spend(len as f64);
        let data = match m {
            Message::Text(t) => Some(t.into()),
            Message::Binary(b) => Some(b),
            // A ping (answered by the WebSocket layer) or pong over the
            // frame rate: the socket is not read until a token is back.
            Message::Ping(_) | Message::Pong(_) => {
                if !self.frames.take() {
                    wait = wait.max(self.frames.until_one());
                }
                None
            }
            // A Close is answered by the WebSocket layer and the stream
            // then ends.
            Message::Close(_) | Message::Frame(_) => None,
        };
        if let Some(wait) = wait {
            let until = Instant::now() + wait;
            self.paused_until = Some(self.paused_until.map_or(until, |p| p.max(until)));
        }
        match data {
            Some(bytes) => self.on_frame(ws, &bytes).await,
            None => None,
        }
    }

    /// One text or binary frame. `Some` ends the connection.
    async fn on_frame(&mut self, ws: &mut Ws, bytes: &[u8]) -> Option<End> {
        if self.shared.flood_close {
            // agentchat 0.36.19 counts every frame before anything else and
            // closes, unhandled, at the one over its limit; the close is a
            // disconnect (the floor releases the connection's claims).
            let limit = if self.session.is_some() {
                AGENTCHAT_FRAMES_IDENTIFIED
            } else {
                AGENTCHAT_FRAMES_UNIDENTIFIED
            };
            let now = u64::try_from(self.shared.start.elapsed().as_millis()).unwrap_or(u64::MAX);
            if self.frame_window.over(now, limit) {
                return Some(End::Close(close_frame(
                    CloseCode::Policy,
                    "Rate limit exceeded",
                )));
            }
        }
        if !self.frames.take() {
            let limits = &self.shared.limits;
            let msg = format!(
                "Rate limit exceeded (max {} frames per second, bursts of {})",
                limits.rate_per_sec, limits.burst
            );
            return self.reply(ws, error_text("RATE_LIMITED", &msg)).await;
        }
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => {
                return self
                    .reply(ws, error_text("INVALID_MSG", &format!("Invalid JSON: {e}")))
                    .await;
            }
        };
        let ty = value.get("type").and_then(Value::as_str);
        if let Some(msg) = too_long(&value, ty, &self.shared.limits) {
            return self.reply(ws, error_text("INVALID_MSG", &msg)).await;
        }
        match ty {
            Some("PING") => self.reply(ws, json!({"type": "PONG"}).to_string()).await,
            Some("IDENTIFY") => self.identify(ws, &value).await,
            Some("VERIFY_IDENTITY") => self.verify(ws, &value).await,
            // The replay format's own events: a client cannot send them.
            Some("DISCONNECT") => {
                let msg = "Unknown message type: DISCONNECT (close the connection instead)";
                self.reply(ws, error_text("INVALID_MSG", msg)).await
            }
            Some("CONNECT") => {
                let msg = "Unknown message type: CONNECT";
                self.reply(ws, error_text("INVALID_MSG", msg)).await
            }
            _ => match &self.session {
                None => {
                    self.reply(ws, error_text("AUTH_REQUIRED", "Must IDENTIFY first"))
                        .await
                }
                Some(s) => {
                    let usage = Arc::clone(&s.usage);
                    self.forward(value, &usage).await
                }
            },
        }
    }

    /// Hand a frame to the hub, counted until it is handled: wait (not
    /// reading meanwhile) while this connection's earlier frames still
    /// hold its in-flight budget.
    async fn forward(&mut self, event: Value, usage: &Arc<Usage>) -> Option<End> {
        let cost = value_bytes(&event);
        let budget = inflight_budget(&self.shared.limits);
        let n = u32::try_from(cost.min(budget)).unwrap_or(u32::MAX);
        let permit = tokio::select! {
            p = Arc::clone(&self.inflight).acquire_many_owned(n) => p.ok()?,
            () = usage.killed() => {
                return Some(End::Dropped(close_frame(CloseCode::Policy, "dropped by the server")));
            }
        };
        let ev = Event::Input {
            conn: self.conn,
            event,
            _inbound: Inbound::new(cost, &self.shared.meter, usage, permit),
        };
        if self.hub.send(ev).await.is_err() {
            return Some(End::Close(close_frame(
                CloseCode::Away,
                "server shutting down",
            )));
        }
        None
    }

    /// Send a session-layer reply (written at once, within the write
    /// timeout).
    async fn reply(&mut self, ws: &mut Ws, text: String) -> Option<End> {
        self.send_now(ws, text).await
    }

    /// Write a text frame now.
    async fn send_now(&mut self, ws: &mut Ws, text: String) -> Option<End> {
        self.write(ws, Message::text(text)).await
    }

    /// Write one frame within the write timeout; a client that does not
    /// read for that long, or a write that fails, ends the connection, and
    /// so does the hub dropping it meanwhile.
    async fn write(&mut self, ws: &mut Ws, m: Message) -> Option<End> {
        let timeout = self.shared.limits.write_timeout;
        let kill = self.session.as_ref().map(|s| Arc::clone(&s.usage));
        tokio::select! {
            r = tokio::time::timeout(timeout, ws.send(m)) => match r {
                Ok(Ok(())) => None,
                _ => Some(End::Gone),
            },
            () = killed_usage(kill.as_deref()) => {
                Some(End::Dropped(close_frame(CloseCode::Policy, "dropped by the server")))
            }
        }
    }

    async fn identify(&mut self, ws: &mut Ws, v: &Value) -> Option<End> {
        if self.session.is_some() {
            return self
                .reply(ws, error_text("INVALID_MSG", "Already identified"))
                .await;
        }
        if self.challenge.is_some() {
            return self
                .reply(ws, error_text("INVALID_MSG", "Challenge already pending"))
                .await;
        }
        let name = match v.get("name").and_then(Value::as_str) {
            Some(n) if identity::is_valid_name(n) => n.to_string(),
            _ => {
                let msg = "Invalid agent name (1 to 32 of A-Z a-z 0-9 _ -)";
                return self.reply(ws, error_text("INVALID_MSG", msg)).await;
            }
        };
        let pem = match v.get("pubkey") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) if p.len() <= MAX_PUBKEY_BYTES => Some(p.clone()),
            Some(_) => Some(String::new()),
        };
        let Some(pem) = pem else {
            if identity::looks_like_key_id(&name) {
                let msg = "a name of 16 hex digits is reserved for keyed identities";
                return self.reply(ws, error_text("INVALID_NAME", msg)).await;
            }
            return self.register(ws, name.clone(), name, false).await;
        };
        let Some(key) = identity::parse_pubkey(&pem) else {
            let msg = "Invalid public key format (must be Ed25519 PEM)";
            return self.reply(ws, error_text("INVALID_MSG", msg)).await;
        };
        let nonce = identity::new_nonce();
        let id = format!("chal_{}_{}", self.conn, &identity::new_nonce()[..8]);
        let expires_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d + CHALLENGE_TIMEOUT)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let text = json!({
            "type": "CHALLENGE",
            "challenge_id": id,
            "nonce": nonce,
            "expires_at": expires_at,
        })
        .to_string();
        self.challenge = Some(Challenge {
            id,
            nonce,
            name,
            key,
            pem,
            deadline: Instant::now() + CHALLENGE_TIMEOUT,
        });
        self.reply(ws, text).await
    }

    async fn verify(&mut self, ws: &mut Ws, v: &Value) -> Option<End> {
        if self.session.is_some() {
            return self
                .reply(ws, error_text("INVALID_MSG", "Already identified"))
                .await;
        }
        let challenge_id = v.get("challenge_id").and_then(Value::as_str);
        let signature = v.get("signature").and_then(Value::as_str);
        let timestamp = v.get("timestamp").filter(|t| t.is_number());
        let (Some(challenge_id), Some(signature), Some(timestamp)) =
            (challenge_id, signature, timestamp)
        else {
            let msg = "VERIFY_IDENTITY needs `challenge_id` and `signature` (strings) and `timestamp` (a number)";
            return self.reply(ws, error_text("INVALID_MSG", msg)).await;
        };
        let matches = self
            .challenge
            .as_ref()
            .is_some_and(|c| c.id == challenge_id);
        let Some(ch) = (if matches { self.challenge.take() } else { None }) else {
            let msg = "Challenge not found or expired";
            return self
                .reply(ws, error_text("VERIFICATION_EXPIRED", msg))
                .await;
        };
        let content = identity::signing_content(&ch.nonce, &ch.id, &timestamp.to_string());
        if !identity::verify(&ch.key, &content, signature) {
            return self
                .reply(ws, error_text("VERIFICATION_FAILED", "Invalid signature"))
                .await;
        }
        let id = identity::agent_id_of_pubkey(&ch.pem);
        self.register(ws, id, ch.name, true).await
    }

    /// Ask the hub for `id`; on success send WELCOME and start the session.
    async fn register(
        &mut self,
        ws: &mut Ws,
        id: String,
        name: String,
        keyed: bool,
    ) -> Option<End> {
        let role = if name == self.shared.operator_name {
            Role::Operator
        } else {
            Role::Agent
        };
        let (tx, rx) = mpsc::channel(self.shared.limits.send_queue.max(1));
        let usage = Arc::new(Usage::default());
        let (reply_tx, reply_rx) = oneshot::channel();
        let ev = Event::Register {
            conn: self.conn,
            id: id.clone(),
            role,
            keyed,
            tx,
            usage: Arc::clone(&usage),
            reply: reply_tx,
        };
        if self.hub.send(ev).await.is_err() {
            return Some(End::Close(close_frame(
                CloseCode::Away,
                "server shutting down",
            )));
        }
        match reply_rx.await {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => return self.reply(ws, error_text("INVALID_NAME", &reason)).await,
            Err(_) => {
                return Some(End::Close(close_frame(
                    CloseCode::Away,
                    "server shutting down",
                )));
            }
        }
        // Identified: no longer a candidate for eviction.
        self.shared.unregister(self.conn);
        self.started = true;
        if self.admission.evicted() {
            // Evicted while the hub registered it: its place is gone.
            return Some(End::Close(close_frame(CloseCode::Again, "server full")));
        }
        self.session = Some(Session { rx, usage });
        self.last_rx = Instant::now();
        let welcome = json!({
            "type": "WELCOME",
            "agent_id": format!("@{id}"),
            "name": name,
            "server": self.shared.server_name,
            "verified": false,
            "role": role.as_str(),
            "policy": self.shared.policy_name,
        });
        self.reply(ws, welcome.to_string()).await
    }
}

/// Why a frame's ids are too long, if one is: `channel` and a `#` target
/// against the channel bound, message ids and a `@` target against the id
/// bound (docs/serve.md). Only string fields are checked; the floor
/// answers fields of the wrong type.
fn too_long(v: &Value, ty: Option<&str>, limits: &Limits) -> Option<String> {
    if !matches!(ty, Some("MSG" | "RESPONDING_TO" | "JOIN" | "LEAVE")) {
        return None;
    }
    for field in ["channel", "to", "msg_id", "id", "in_reply_to"] {
        let Some(s) = v.get(field).and_then(Value::as_str) else {
            continue;
        };
        let channel = field == "channel" || (field == "to" && s.starts_with('#'));
        let (max, flag) = if channel {
            (limits.max_channel_bytes, "--max-channel-bytes")
        } else {
            (limits.max_id_bytes, "--max-id-bytes")
        };
        if s.len() > max {
            return Some(format!(
                "field `{field}` is {} bytes long; at most {max} ({flag})",
                s.len()
            ));
        }
    }
    None
}

/// The next queued message of an identified connection; pending forever
/// before identification. `None`: the hub dropped the connection.
async fn recv(session: &mut Option<Session>) -> Option<Queued> {
    match session {
        Some(s) => s.rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the hub dropped this connection (never before
/// identification: `None`).
async fn killed_usage(usage: Option<&Usage>) {
    match usage {
        Some(u) => u.killed().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_a_burst_then_limits() {
        let mut b = Bucket::new(1.0, 3.0);
        let got: Vec<bool> = (0..5).map(|_| b.take()).collect();
        assert_eq!(got, [true, true, true, false, false]);
        assert!(b.until_one().is_some());
        let mut off = Bucket::new(0.0, 1.0);
        assert!((0..1000).all(|_| off.take()));
        assert_eq!(off.spend(1e12), None);
    }

    #[test]
    fn byte_bucket_goes_into_debt_and_says_for_how_long() {
        let mut b = Bucket::new(1000.0, 2000.0);
        assert_eq!(b.spend(1500.0), None);
        let wait = b.spend(1500.0);
        // 1000 bytes of debt at 1000 bytes/s: about a second.
        assert!(
            wait.is_some_and(|w| w > Duration::from_millis(900) && w <= Duration::from_secs(1)),
            "{wait:?}"
        );
    }

    #[test]
    fn long_ids_are_named_with_their_flag() {
        let l = Limits::default();
        let ok = json!({"type": "MSG", "to": "#general", "content": "x".repeat(5000), "id": "m1"});
        assert_eq!(too_long(&ok, Some("MSG"), &l), None);
        let long_id = json!({"type": "RESPONDING_TO", "msg_id": "m".repeat(129), "channel": "#g"});
        let msg = too_long(&long_id, Some("RESPONDING_TO"), &l).unwrap_or_default();
        assert!(
            msg.contains("`msg_id`") && msg.contains("--max-id-bytes"),
            "{msg}"
        );
        let long_ch = json!({"type": "JOIN", "channel": format!("#{}", "c".repeat(32))});
        let msg = too_long(&long_ch, Some("JOIN"), &l).unwrap_or_default();
        assert!(msg.contains("--max-channel-bytes"), "{msg}");
        let long_dm = json!({"type": "MSG", "to": format!("@{}", "a".repeat(200)), "content": ""});
        assert!(too_long(&long_dm, Some("MSG"), &l).is_some());
        // Other frames are not checked here.
        assert_eq!(too_long(&long_id, Some("PING"), &l), None);
    }
}
