//! One connection: the WebSocket, the limits, the identity handshake and
//! PING, which this task answers itself (the session layer); every other
//! frame of an identified client goes to the hub, and so to the floor.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ed25519_dalek::VerifyingKey;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::Shared;
use super::hub::{ConnId, Event};
use super::identity;
use crate::floor::Role;

/// Time allowed for the TLS (with `--tls-cert`) and WebSocket handshakes.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a keyed client has to answer its CHALLENGE.
pub const CHALLENGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Time a write to a client may take (a client that does not read stalls
/// writes once the socket buffers are full); past it the connection is
/// dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed for a closing handshake (and for draining a client's
/// unread bytes after an error) before the socket is dropped.
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// The byte stream under the WebSocket: the TCP connection, or TLS on it.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type Ws = WebSocketStream<Box<dyn Io>>;

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
    rx: mpsc::Receiver<String>,
}

/// Token bucket of the rate limit.
struct Bucket {
    tokens: f64,
    last: Instant,
    rate: f64,
    burst: f64,
}

impl Bucket {
    fn new(rate: u32, burst: u32) -> Bucket {
        let burst = f64::from(burst.max(1));
        Bucket {
            tokens: burst,
            last: Instant::now(),
            rate: f64::from(rate),
            burst,
        }
    }

    /// Take one token; `false` when the limit is exceeded. A rate of 0
    /// means no limit.
    fn take(&mut self) -> bool {
        if self.rate <= 0.0 {
            return true;
        }
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// How the read loop ended.
enum End {
    /// The client went away (EOF, reset, close handshake): tell the hub.
    Gone,
    /// We close with this frame after draining; tell the hub.
    Close(CloseFrame),
    /// The hub dropped this connection (displaced, too slow): close, but
    /// the hub already knows.
    Dropped(CloseFrame),
}

fn close_frame(code: CloseCode, reason: &str) -> CloseFrame {
    CloseFrame {
        code,
        reason: reason.into(),
    }
}

fn error_text(code: &str, message: &str) -> String {
    json!({"type": "ERROR", "code": code, "message": message}).to_string()
}

pub(crate) async fn run(
    stream: TcpStream,
    conn: ConnId,
    shared: Arc<Shared>,
    hub: mpsc::Sender<Event>,
    mut stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let cfg = WebSocketConfig::default()
        .max_message_size(Some(shared.limits.max_frame_bytes))
        .max_frame_size(Some(shared.limits.max_frame_bytes));
    let handshake = handshake(stream, &shared, cfg);
    let mut ws = tokio::select! {
        r = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake) => match r {
            Ok(Ok(ws)) => ws,
            _ => return,
        },
        _ = stop.changed() => return,
    };
    let mut c = Conn {
        conn,
        shared,
        hub,
        challenge: None,
        session: None,
        bucket: Bucket::new(0, 1),
    };
    c.bucket = Bucket::new(c.shared.limits.rate_per_sec, c.shared.limits.burst);
    let end = c.read_loop(&mut ws, &mut stop).await;
    let (frame, tell_hub) = match end {
        End::Gone => (None, true),
        End::Close(f) => (Some(f), true),
        End::Dropped(f) => (Some(f), false),
    };
    if tell_hub && c.session.is_some() {
        let _ = c.hub.send(Event::Gone { conn }).await;
    }
    if let Some(frame) = frame {
        linger_close(ws, frame).await;
    }
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
    bucket: Bucket,
}

impl Conn {
    async fn read_loop(&mut self, ws: &mut Ws, stop: &mut watch::Receiver<bool>) -> End {
        loop {
            let deadline = self
                .challenge
                .as_ref()
                .map(|c| tokio::time::Instant::from_std(c.deadline));
            tokio::select! {
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        return End::Close(close_frame(CloseCode::Away, "server shutting down"));
                    }
                }
                out = recv(&mut self.session) => match out {
                    Some(text) => {
                        if !send(ws, text).await {
                            return End::Gone;
                        }
                    }
                    None => {
                        return End::Dropped(close_frame(CloseCode::Policy, "dropped by the server"));
                    }
                },
                () = sleep_until(deadline), if deadline.is_some() => {
                    self.challenge = None;
                    let _ = send(ws, error_text("VERIFICATION_EXPIRED", "Challenge expired")).await;
                    return End::Close(close_frame(CloseCode::Normal, "Challenge expired"));
                }
                frame = ws.next() => match frame {
                    None => return End::Gone,
                    Some(Ok(Message::Text(t))) => {
                        if let Some(end) = self.on_frame(ws, t.as_bytes()).await {
                            return end;
                        }
                    }
                    Some(Ok(Message::Binary(b))) => {
                        if let Some(end) = self.on_frame(ws, &b).await {
                            return end;
                        }
                    }
                    // Pings are answered by the WebSocket layer; a Close is
                    // answered there too and the stream then ends.
                    Some(Ok(_)) => {}
                    Some(Err(WsError::Capacity(e))) => {
                        let msg = format!(
                            "frame too large: {e} (limit {} bytes); closing",
                            self.shared.limits.max_frame_bytes
                        );
                        let _ = send(ws, error_text("FRAME_TOO_LARGE", &msg)).await;
                        return End::Close(close_frame(CloseCode::Size, "frame too large"));
                    }
                    Some(Err(WsError::Utf8(e))) => {
                        let msg = format!("text frame is not UTF-8: {e}; closing");
                        let _ = send(ws, error_text("INVALID_MSG", &msg)).await;
                        return End::Close(close_frame(CloseCode::Invalid, "invalid UTF-8"));
                    }
                    Some(Err(_)) => return End::Gone,
                },
            }
        }
    }

    /// One text or binary frame. `Some` ends the connection.
    async fn on_frame(&mut self, ws: &mut Ws, bytes: &[u8]) -> Option<End> {
        if !self.bucket.take() {
            let msg = format!(
                "Rate limit exceeded (max {} frames per second, bursts of {})",
                self.shared.limits.rate_per_sec, self.shared.limits.burst
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
            _ if self.session.is_none() => {
                self.reply(ws, error_text("AUTH_REQUIRED", "Must IDENTIFY first"))
                    .await
            }
            _ => {
                let ev = Event::Input {
                    conn: self.conn,
                    event: value,
                };
                if self.hub.send(ev).await.is_err() {
                    return Some(End::Close(close_frame(
                        CloseCode::Away,
                        "server shutting down",
                    )));
                }
                None
            }
        }
    }

    async fn reply(&mut self, ws: &mut Ws, text: String) -> Option<End> {
        if send(ws, text).await {
            None
        } else {
            Some(End::Gone)
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
            Some(Value::String(p)) => Some(p.clone()),
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
        let (reply_tx, reply_rx) = oneshot::channel();
        let ev = Event::Register {
            conn: self.conn,
            id: id.clone(),
            role,
            keyed,
            tx,
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
        self.session = Some(Session { rx });
        let welcome = json!({
            "type": "WELCOME",
            "agent_id": format!("@{id}"),
            "name": name,
            "server": self.shared.server_name,
            "verified": false,
            "role": match role { Role::Agent => "agent", Role::Operator => "operator" },
            "policy": self.shared.policy_name,
        });
        self.reply(ws, welcome.to_string()).await
    }
}

/// Send one text frame within [`WRITE_TIMEOUT`]; `false` if it failed.
async fn send(ws: &mut Ws, text: String) -> bool {
    matches!(
        tokio::time::timeout(WRITE_TIMEOUT, ws.send(Message::text(text))).await,
        Ok(Ok(()))
    )
}

/// The next queued message of an identified connection; pending forever
/// before identification. `None`: the hub dropped the connection.
async fn recv(session: &mut Option<Session>) -> Option<String> {
    match session {
        Some(s) => s.rx.recv().await,
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
        let mut b = Bucket::new(1, 3);
        let got: Vec<bool> = (0..5).map(|_| b.take()).collect();
        assert_eq!(got, [true, true, true, false, false]);
        let mut off = Bucket::new(0, 1);
        assert!((0..1000).all(|_| off.take()));
    }
}
