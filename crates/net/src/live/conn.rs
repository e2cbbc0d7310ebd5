//! The client side of the agentchat protocol for the live driver: connect,
//! IDENTIFY (with or without an Ed25519 key: CHALLENGE / VERIFY_IDENTITY),
//! JOIN, then one reader and one writer task per connection.

use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_tungstenite::Connector;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

pub use super::ConnError;

/// How long connecting, identifying and joining may take.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest message (and frame) live reads from a server; a larger one
/// closes the connection (agentchat's own limit is 256 KiB).
pub const MAX_FRAME_BYTES: usize = 1 << 20;

/// Bytes of frames read but not yet handled by the driver, over all
/// connections; a frame beyond it is dropped unread and counted (a server
/// that sends faster than live can read costs bounded memory).
pub const MAX_QUEUED_BYTES: usize = 64 << 20;

/// Frames read but not yet handled, over all connections (as above).
pub const MAX_QUEUED_FRAMES: usize = 1 << 16;

/// Bytes live may have waiting to be written to one connection (its
/// answers to the server's pings included); beyond it the connection fails.
const MAX_WRITE_BUFFER: usize = 4 << 20;

/// How long one frame may take to be written: a server that has not taken
/// it by then is not reading, and the connection is dropped (a send never
/// blocks anything that checks a deadline, a duration or Ctrl-C).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Frames waiting to be written to one connection, at most; one more and
/// the connection is dropped (the server is not reading).
const MAX_PENDING_SENDS: usize = 4096;

/// What a connection holds of the frames the server sends before its
/// handshake ends (WELCOME, and JOINED for every channel) that are not the
/// handshake's own: at most this many frames ...
pub const MAX_EARLY_FRAMES: usize = 4096;

/// ... and at most this many bytes; a server that sends more is refused.
/// (agentchat sends a notice after WELCOME, and a joiner of several
/// channels the replayed history of each but the last: a few kB.)
pub const MAX_EARLY_BYTES: usize = 8 << 20;

/// The WebSocket settings of live's connections: bounded reads and writes.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .max_write_buffer_size(MAX_WRITE_BUFFER)
}

/// The queue from the connections' tasks to the driver: its frames are
/// bounded in count and in bytes (what does not fit is dropped and
/// counted); the other events (a connection up, closed or failed: a few per
/// connection the driver opens) are never dropped.
#[derive(Debug, Clone)]
pub struct Events {
    tx: std_mpsc::Sender<Event>,
    queued: Arc<Queued>,
    dropped: Arc<AtomicU64>,
}

/// The frames queued and their bytes.
#[derive(Debug, Default)]
struct Queued {
    frames: AtomicUsize,
    bytes: AtomicUsize,
}

/// The driver's end of [`Events`].
#[derive(Debug)]
pub struct EventsRx {
    rx: std_mpsc::Receiver<Event>,
    queued: Arc<Queued>,
    dropped: Arc<AtomicU64>,
}

/// A bounded queue of connection events.
pub fn events() -> (Events, EventsRx) {
    let (tx, rx) = std_mpsc::channel();
    let queued = Arc::new(Queued::default());
    let dropped = Arc::new(AtomicU64::new(0));
    (
        Events {
            tx,
            queued: queued.clone(),
            dropped: dropped.clone(),
        },
        EventsRx {
            rx,
            queued,
            dropped,
        },
    )
}

impl Events {
    /// Queue `ev` (a frame only if it fits); false when the driver is gone.
    pub fn send(&self, ev: Event) -> bool {
        if let Event::Frame { text, .. } = &ev {
            let len = text.len();
            let q = &self.queued;
            let frames = q.frames.fetch_add(1, Ordering::SeqCst) + 1;
            let bytes = q.bytes.fetch_add(len, Ordering::SeqCst) + len;
            if frames > MAX_QUEUED_FRAMES || bytes > MAX_QUEUED_BYTES {
                q.frames.fetch_sub(1, Ordering::SeqCst);
                q.bytes.fetch_sub(len, Ordering::SeqCst);
                self.dropped.fetch_add(1, Ordering::SeqCst);
                return true;
            }
        }
        self.tx.send(ev).is_ok()
    }
}

impl EventsRx {
    fn took(&self, ev: Event) -> Event {
        if let Event::Frame { text, .. } = &ev {
            self.queued.frames.fetch_sub(1, Ordering::SeqCst);
            self.queued.bytes.fetch_sub(text.len(), Ordering::SeqCst);
        }
        ev
    }

    /// The next event, waiting at most `wait`.
    pub fn recv_timeout(&self, wait: Duration) -> Result<Event, std_mpsc::RecvTimeoutError> {
        let ev = self.rx.recv_timeout(wait)?;
        Ok(self.took(ev))
    }

    /// The next event if one is queued.
    pub fn try_recv(&self) -> Option<Event> {
        let ev = self.rx.try_recv().ok()?;
        Some(self.took(ev))
    }

    /// Frames dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// What a connection's tasks tell the driver.
#[derive(Debug)]
pub enum Event {
    /// A data frame arrived on connection `conn` (generation `generation`).
    Frame {
        conn: usize,
        generation: u32,
        text: String,
    },
    /// The connection ended (the server or the network closed it, or a
    /// send could not complete): `why`.
    Closed {
        conn: usize,
        generation: u32,
        why: String,
    },
    /// A (re)connection finished its handshake and joined its channels.
    Up {
        conn: usize,
        generation: u32,
        link: Link,
    },
    /// A (re)connection failed.
    Failed { conn: usize, error: String },
}

/// The driver's handle on an open connection: frames to send, and the
/// reader to stop (dropping the handle closes the socket).
#[derive(Debug)]
pub struct Link {
    tx: mpsc::Sender<String>,
    reader: tokio::task::AbortHandle,
    writer: tokio::task::AbortHandle,
    events: Events,
    conn: usize,
    generation: u32,
    failed: AtomicBool,
}

impl Link {
    /// Send one text frame: queued for the writer, never waiting (a closed
    /// connection drops it). More than [`MAX_PENDING_SENDS`] frames waiting
    /// drop the connection, reported as closed.
    pub fn send(&self, text: String) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(text)
            && !self.failed.swap(true, Ordering::SeqCst)
        {
            self.reader.abort();
            self.writer.abort();
            self.events.send(Event::Closed {
                conn: self.conn,
                generation: self.generation,
                why: format!(
                    "more than {MAX_PENDING_SENDS} frames waited to be sent (the server is \
                     not reading); the connection was dropped"
                ),
            });
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // The reader owns the read half: abort it; the writer ends when
        // `tx` is dropped (at most [`SEND_TIMEOUT`] later), and with both
        // halves gone the TCP connection closes without a WebSocket close
        // (an abrupt disconnect).
        self.reader.abort();
    }
}

/// An identity to present.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    /// Ed25519 key: IDENTIFY carries its public key (SPKI PEM) and the
    /// server's CHALLENGE is signed.
    pub key: Option<[u8; 32]>,
}

/// SPKI PEM of an Ed25519 public key (what agentchat's client sends).
pub fn public_pem(key: &SigningKey) -> String {
    // DER: SEQUENCE { SEQUENCE { OID 1.3.101.112 }, BIT STRING key }.
    let mut der = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    der.extend_from_slice(key.verifying_key().as_bytes());
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    format!("-----BEGIN PUBLIC KEY-----\n{b64}\n-----END PUBLIC KEY-----\n")
}

fn text_of(m: Message) -> Option<String> {
    match m {
        Message::Text(t) => Some(t.to_string()),
        Message::Binary(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    }
}

/// A client WebSocket, plain or TLS.
pub(crate) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Send one JSON frame during the handshake; an error names the frame's
/// `what`.
async fn send_json(ws: &mut Ws, url: &str, what: &str, v: &Value) -> Result<(), ConnError> {
    ws.send(Message::text(v.to_string()))
        .await
        .map_err(|e| ConnError::Ws {
            message: format!("{url}: {what}: {e}"),
            source: e,
        })
}

/// The IDENTIFY frame: with the public key when keyed.
fn hello(ident: &Identity, key: Option<&SigningKey>) -> Value {
    match key {
        Some(k) => json!({"type": "IDENTIFY", "name": ident.name, "pubkey": public_pem(k)}),
        None => json!({"type": "IDENTIFY", "name": ident.name}),
    }
}

/// The VERIFY_IDENTITY answer to a CHALLENGE: the nonce, challenge id and
/// a timestamp, signed with `key`.
fn verify_identity(challenge: &Value, key: &SigningKey) -> Value {
    let nonce = challenge["nonce"].as_str().unwrap_or("");
    let cid = challenge["challenge_id"].as_str().unwrap_or("");
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let content = format!("AGENTCHAT_AUTH|{nonce}|{cid}|{ts}");
    let sig =
        base64::engine::general_purpose::STANDARD.encode(key.sign(content.as_bytes()).to_bytes());
    json!({"type": "VERIFY_IDENTITY", "challenge_id": cid,
        "signature": sig, "timestamp": ts})
}

/// The agent id a WELCOME gives (`agent_id`, without `@`; our name if none).
fn welcome_id(welcome: &Value, ident: &Identity) -> String {
    welcome["agent_id"]
        .as_str()
        .unwrap_or(&ident.name)
        .trim_start_matches('@')
        .to_string()
}

/// The message of a server's ERROR to the handshake.
fn refusal(url: &str, ident: &Identity, error: &Value) -> String {
    format!(
        "{url}: the server refused {} ({}): {}",
        ident.name,
        error["code"].as_str().unwrap_or("?"),
        error["message"].as_str().unwrap_or("")
    )
}

/// The TLS client configuration of a `wss://` URL: `tls`, else Mozilla's
/// roots alone (a `ws://` URL needs none). Always given to the WebSocket
/// layer, so that it never picks a TLS configuration (or crypto provider)
/// of its own.
fn connector(url: &str, tls: Option<&Arc<rustls::ClientConfig>>) -> Result<Connector, String> {
    if !url.starts_with("wss://") {
        return Ok(Connector::Plain);
    }
    match tls {
        Some(c) => Ok(Connector::Rustls(c.clone())),
        None => crate::tls::client_config(None)
            .map(Connector::Rustls)
            .map_err(|e| format!("{url}: {e}")),
    }
}

/// The one-line message of a failed connection; a certificate the TLS
/// layer refused says how to trust a private CA.
fn connect_error(url: &str, e: &WsError) -> String {
    let cert = match e {
        WsError::Io(io) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .and_then(|r| match r {
                rustls::Error::InvalidCertificate(c) => Some(c.clone()),
                _ => None,
            }),
        _ => None,
    };
    match cert {
        Some(rustls::CertificateError::UnknownIssuer) => format!(
            "cannot connect to {url}: TLS: the server's certificate is not signed by a \
             trusted CA (unknown issuer); for a private or self-signed server, give its CA \
             certificate with --ca-cert FILE"
        ),
        // A self-signed certificate made as a CA (CA:TRUE, what `openssl
        // req -x509` gives by default) is refused as a server certificate.
        Some(c) if format!("{c:?}").contains("CaUsedAsEndEntity") => format!(
            "cannot connect to {url}: TLS: the server's certificate is a CA certificate \
             (CA:TRUE), which is refused as a server certificate; give the server a \
             certificate signed by that CA, or a self-signed one with CA:FALSE"
        ),
        Some(c) => {
            format!("cannot connect to {url}: TLS: the server's certificate was refused: {c}")
        }
        None if url.starts_with("ws://")
            && matches!(e, WsError::Protocol(ProtocolError::HttparseError(_))) =>
        {
            format!(
                "cannot connect to {url}: {e} (the server's answer is not HTTP: if it is a \
                 TLS server, use wss://)"
            )
        }
        None => format!("cannot connect to {url}: {e}"),
    }
}

/// The frames a connection read during its handshake that were not the
/// handshake's own, in the server's order: at most [`MAX_EARLY_FRAMES`]
/// and [`MAX_EARLY_BYTES`]; a server that sends more is refused.
#[derive(Debug, Default)]
pub(crate) struct Early {
    pub(crate) frames: Vec<String>,
    bytes: usize,
}

impl Early {
    /// Hold `text`, or refuse the server at `url` past the bounds.
    pub(crate) fn push(&mut self, url: &str, text: String) -> Result<(), String> {
        if self.frames.len() >= MAX_EARLY_FRAMES || self.bytes + text.len() > MAX_EARLY_BYTES {
            return Err(format!(
                "{url}: refused: the server sent more than {MAX_EARLY_FRAMES} frames or {} MiB \
                 before its handshake ended (WELCOME/JOINED), the most herdsim holds before it",
                MAX_EARLY_BYTES >> 20
            ));
        }
        self.bytes += text.len();
        self.frames.push(text);
        Ok(())
    }
}

/// The one-line message of a failed read from the server at `url`: a
/// frame over [`MAX_FRAME_BYTES`] names the limit.
pub(crate) fn read_error(url: &str, e: &WsError) -> String {
    match e {
        WsError::Capacity(c) => format!(
            "{url}: refused: the server sent a frame larger than {} MiB, the largest herdsim \
             reads ({c})",
            MAX_FRAME_BYTES >> 20
        ),
        e => format!("{url}: {e}"),
    }
}

/// Connect to `url`, identify (answering a CHALLENGE when keyed) and join
/// `channels`. Returns the socket and the agent id the server gave.
/// (`observe` uses it as it stands: a passive member's connection.)
pub(crate) async fn handshake(
    url: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
    ident: &Identity,
    channels: &[String],
    early: &mut Early,
) -> Result<(Ws, String), ConnError> {
    let connector = connector(url, tls)?;
    let (mut ws, _) = tokio_tungstenite::connect_async_tls_with_config(
        url,
        Some(ws_config()),
        true,
        Some(connector),
    )
    .await
    .map_err(|e| ConnError::Ws {
        message: connect_error(url, &e),
        source: e,
    })?;
    let key = ident.key.map(|k| SigningKey::from_bytes(&k));
    send_json(&mut ws, url, "IDENTIFY", &hello(ident, key.as_ref())).await?;
    let mut id = None;
    let mut joined = 0usize;
    while let Some(m) = ws.next().await {
        let m = m.map_err(|e| ConnError::Ws {
            message: read_error(url, &e),
            source: e,
        })?;
        let Some(text) = text_of(m) else { continue };
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let own = matches!(
            v["type"].as_str(),
            Some("CHALLENGE" | "WELCOME" | "JOINED" | "ERROR")
        ) && v["replay"] != Value::Bool(true);
        if !own {
            // Not the handshake's: the driver sees it after the handshake.
            early.push(url, text)?;
            continue;
        }
        match v["type"].as_str() {
            Some("CHALLENGE") => {
                let Some(k) = &key else {
                    return Err(format!("{url}: a CHALLENGE to a key-less IDENTIFY").into());
                };
                send_json(&mut ws, url, "VERIFY_IDENTITY", &verify_identity(&v, k)).await?;
            }
            Some("WELCOME") => {
                id = Some(welcome_id(&v, ident));
                if channels.is_empty() {
                    break;
                }
                for c in channels {
                    let j = json!({"type": "JOIN", "channel": c});
                    send_json(&mut ws, url, "JOIN", &j).await?;
                }
            }
            Some("JOINED") => {
                joined += 1;
                if joined >= channels.len() {
                    break;
                }
            }
            Some("ERROR") => return Err(refusal(url, ident, &v).into()),
            _ => {}
        }
    }
    match id {
        Some(id) if joined >= channels.len() => Ok((ws, id)),
        _ => Err(format!("{url}: the connection closed before WELCOME/JOINED").into()),
    }
}

/// Send `m` within `within` ([`SEND_TIMEOUT`]), or say why not (`what`
/// names it). A server that does not read blocks a send in two ways: its
/// socket is full, or so is the WebSocket's write buffer (our answers to
/// its pings fill it up to [`MAX_WRITE_BUFFER`]): both are waited out to
/// the same deadline.
pub(crate) async fn send_within(
    sink: &mut SplitSink<Ws, Message>,
    m: Message,
    what: &str,
    within: Duration,
) -> Result<(), String> {
    // A frame's header is at most 14 bytes.
    if m.len() + 14 > MAX_WRITE_BUFFER {
        return Err(format!(
            "{what} of {} bytes is over the {} MiB herdsim writes at once",
            m.len(),
            MAX_WRITE_BUFFER >> 20
        ));
    }
    let deadline = tokio::time::Instant::now() + within;
    let late = || {
        format!(
            "{what} could not be sent within {} s (the server is not reading)",
            within.as_secs_f64()
        )
    };
    loop {
        match tokio::time::timeout_at(deadline, sink.send(m.clone())).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(WsError::WriteBufferFull(_))) => {
                // Not taken: flush what waits, then try again.
                if tokio::time::timeout_at(deadline, sink.flush())
                    .await
                    .is_err()
                {
                    return Err(late());
                }
                let soon = tokio::time::Instant::now() + Duration::from_millis(20);
                tokio::time::sleep_until(deadline.min(soon)).await;
            }
            Ok(Err(e)) => return Err(format!("a send failed: {e}")),
            Err(_) => return Err(late()),
        }
    }
}

/// The writer task: sends what the driver gives it until the sender is
/// dropped or the socket fails. A frame not sent within [`SEND_TIMEOUT`]
/// (the server is not reading), or a failed send, drops the connection:
/// the reader is stopped and the close reported with why.
fn spawn_writer(
    mut sink: SplitSink<Ws, Message>,
    mut rx: mpsc::Receiver<String>,
    reader: tokio::task::AbortHandle,
    conn: usize,
    generation: u32,
    events: Events,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(text) = rx.recv().await {
            let Err(why) =
                send_within(&mut sink, Message::text(text), "a frame", SEND_TIMEOUT).await
            else {
                continue;
            };
            let why = format!("{why}; the connection was dropped");
            if !reader.is_finished() {
                reader.abort();
                events.send(Event::Closed {
                    conn,
                    generation,
                    why,
                });
            }
            return;
        }
    })
}

/// The reader task: forwards every data frame to `events`, then reports
/// the close (unless the driver is gone).
fn spawn_reader(
    mut stream: SplitStream<Ws>,
    conn: usize,
    generation: u32,
    events: Events,
    url: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let why = loop {
            match stream.next().await {
                Some(Ok(m)) => {
                    if let Some(text) = text_of(m)
                        && !events.send(Event::Frame {
                            conn,
                            generation,
                            text,
                        })
                    {
                        return;
                    }
                }
                Some(Err(e)) => break read_error(&url, &e),
                None => break "the server closed it".to_string(),
            }
        };
        events.send(Event::Closed {
            conn,
            generation,
            why,
        });
    })
}

/// Connect to `url` (over TLS with `tls` for `wss://`), identify, join
/// `channels`, then hand the connection to a reader and a writer task; the
/// reader reports to `events`, first the frames the handshake read that
/// were not its own (a notice, a replay: the server's order is kept).
/// Returns the agent id the server gave (WELCOME's `agent_id`, without `@`).
pub async fn open(
    url: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
    ident: &Identity,
    channels: &[String],
    conn: usize,
    generation: u32,
    events: Events,
) -> Result<(Link, String), ConnError> {
    let mut early = Early::default();
    let (ws, id) = tokio::time::timeout(
        SETUP_TIMEOUT,
        handshake(url, tls, ident, channels, &mut early),
    )
    .await
    .map_err(|_| {
        ConnError::Handshake(format!(
            "{url}: no WELCOME/JOINED within {} s",
            SETUP_TIMEOUT.as_secs()
        ))
    })??;
    for text in early.frames {
        events.send(Event::Frame {
            conn,
            generation,
            text,
        });
    }
    let (sink, stream) = ws.split();
    let reader = spawn_reader(stream, conn, generation, events.clone(), url.to_string());
    let (tx, rx) = mpsc::channel(MAX_PENDING_SENDS);
    let writer = spawn_writer(
        sink,
        rx,
        reader.abort_handle(),
        conn,
        generation,
        events.clone(),
    );
    Ok((
        Link {
            tx,
            reader: reader.abort_handle(),
            writer: writer.abort_handle(),
            events,
            conn,
            generation,
            failed: AtomicBool::new(false),
        },
        id,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_frames_are_bounded_in_count_and_bytes() {
        let mut e = Early::default();
        for _ in 0..MAX_EARLY_FRAMES {
            e.push("ws://x", "{}".into()).expect("within the count");
        }
        let err = e
            .push("ws://x", "{}".into())
            .expect_err("one frame too many");
        assert!(err.starts_with("ws://x: refused: "), "{err}");
        let mut e = Early::default();
        let mb = "x".repeat(1 << 20);
        for _ in 0..MAX_EARLY_BYTES >> 20 {
            e.push("ws://x", mb.clone()).expect("within the bytes");
        }
        assert!(e.push("ws://x", "x".into()).is_err());
        assert_eq!(e.frames.len(), MAX_EARLY_BYTES >> 20);
    }

    #[test]
    fn reads_are_bounded() {
        let c = ws_config();
        assert_eq!(c.max_message_size, Some(MAX_FRAME_BYTES));
        assert_eq!(c.max_frame_size, Some(MAX_FRAME_BYTES));
        assert!(c.max_write_buffer_size <= MAX_WRITE_BUFFER);
    }

    #[test]
    fn frames_over_the_queue_bounds_are_dropped_and_the_rest_never() {
        let (tx, rx) = events();
        let frame = |text: String| Event::Frame {
            conn: 0,
            generation: 0,
            text,
        };
        // Bytes: 64 frames of 1 MiB fill it.
        let mb = "x".repeat(1 << 20);
        for _ in 0..MAX_QUEUED_BYTES >> 20 {
            assert!(tx.send(frame(mb.clone())));
        }
        assert!(tx.send(frame("y".into())));
        assert_eq!(rx.dropped(), 1);
        // A close always gets through.
        assert!(tx.send(Event::Closed {
            conn: 0,
            generation: 0,
            why: "gone".into()
        }));
        let mut n = 0;
        while let Some(ev) = rx.try_recv() {
            n += 1;
            if n > MAX_QUEUED_BYTES >> 20 {
                assert!(matches!(ev, Event::Closed { .. }), "{ev:?}");
            }
        }
        assert_eq!(n, (MAX_QUEUED_BYTES >> 20) + 1);
        // Taken, the room is back.
        assert!(tx.send(frame(mb)));
        assert_eq!(rx.dropped(), 1);
    }

    /// A server that never reads: sends go through until its socket is
    /// full, then one ends at its deadline, saying why; a frame over the
    /// write buffer is refused at once.
    #[test]
    fn a_send_the_server_never_takes_ends_at_its_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let url = format!("ws://{}", listener.local_addr().expect("addr"));
            let server = tokio::spawn(async move {
                let (tcp, _) = listener.accept().await.expect("accept");
                let ws = tokio_tungstenite::accept_async(tcp).await.expect("ws");
                tokio::time::sleep(Duration::from_secs(30)).await;
                drop(ws);
            });
            let (ws, _) = tokio_tungstenite::connect_async_with_config(
                url.as_str(),
                Some(ws_config()),
                false,
            )
            .await
            .expect("connects");
            let (mut sink, _stream) = ws.split();
            let big = Message::text("x".repeat(MAX_WRITE_BUFFER));
            let within = Duration::from_millis(300);
            let err = send_within(&mut sink, big, "a frame", within).await;
            assert!(err.is_err_and(|e| e.contains("over the 4 MiB")));
            let frame = Message::text("x".repeat(256 << 10));
            let mut sent = 0;
            let why = loop {
                match send_within(&mut sink, frame.clone(), "a frame", within).await {
                    Ok(()) => sent += 1,
                    Err(why) => break why,
                }
                // 256 MB: more than any socket holds.
                assert!(
                    sent < 1000,
                    "{sent} frames sent to a server that never reads"
                );
            };
            assert_eq!(
                why,
                "a frame could not be sent within 0.3 s (the server is not reading)"
            );
            server.abort();
        });
    }

    /// More frames waiting to be written than [`MAX_PENDING_SENDS`] (here:
    /// the writer never runs while they are queued) drop the connection,
    /// reported as closed with why.
    #[test]
    fn more_frames_waiting_than_the_queue_holds_drop_the_connection() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let url = format!("ws://{}", listener.local_addr().expect("addr"));
            let server = tokio::spawn(async move {
                let (tcp, _) = listener.accept().await.expect("accept");
                let mut ws = tokio_tungstenite::accept_async(tcp).await.expect("ws");
                let _ = ws.next().await;
                let welcome = Message::text(r#"{"type":"WELCOME"}"#);
                ws.send(welcome).await.expect("sent");
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
            let (tx, rx) = events();
            let ident = Identity {
                name: "a".into(),
                key: None,
            };
            let (link, id) = open(&url, None, &ident, &[], 1, 0, tx)
                .await
                .expect("opens");
            assert_eq!(id, "a");
            for i in 0..=MAX_PENDING_SENDS {
                link.send(format!("{i}"));
            }
            match rx.try_recv() {
                Some(Event::Closed { conn: 1, why, .. }) => {
                    assert!(why.starts_with("more than 4096 frames waited"), "{why}");
                }
                other => panic!("{other:?}"),
            }
            server.abort();
        });
    }

    #[test]
    fn pem_is_what_serve_reads() {
        let k = SigningKey::from_bytes(&[7u8; 32]);
        let pem = public_pem(&k);
        let back = crate::serve::identity::parse_pubkey(&pem).expect("parses");
        assert_eq!(back.as_bytes(), k.verifying_key().as_bytes());
        assert_eq!(crate::serve::identity::agent_id_of_pubkey(&pem).len(), 16);
    }
}
