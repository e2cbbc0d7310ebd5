//! A minimal server that puts the server half of `herdsim-floor`
//! ([`Server`]) behind a transport: WebSocket, with agentchat's handshake
//! (IDENTIFY `{name}` -> WELCOME, JOIN -> JOINED), enough for
//! `examples/floor_agent.rs` and agentchat-style clients.
//!
//! One task owns the floor; its loop is the whole embedding:
//! - a frame from a connection: decoded at the floor's edge
//!   ([`edge::decode_bytes`]) into an [`Input`], then [`Server::handle`];
//! - a connection gone: [`Input::Disconnect`];
//! - nothing before [`Server::poll_timeout`]: [`Input::Tick`] (claims expire);
//! - after each: every send written to its recipient, each payload encoded
//!   once however many recipients share it ([`Sends`]).
//!
//! Bounds, each per connection, and each broken by dropping that
//! connection only (it leaves the floor; the others are untouched):
//! - frames of at most 64 KiB, read through an 8 KiB buffer;
//! - at most 256 frames and 1 MiB queued to it by the floor;
//! - a WebSocket write buffer of one largest frame: the pongs to a peer
//!   that pings and never reads stop there (tungstenite's write buffer is
//!   unbounded by default: 450 MB/s of pongs before this bound);
//! - 10 s to finish the WebSocket handshake and to identify, 10 s for each
//!   write, and 60 s of silence (a ping is sent after 30 s: a live peer's
//!   WebSocket answers it).
//!
//! At most 256 connections. The name `operator` is the operator.
//!
//! ```text
//! cargo run --release --example floor_server -- --listen 127.0.0.1:6667 --policy spec
//! ```
//!
//! It prints `listening on ws://ADDR` on stderr, and stops after `--run-ms`
//! (default: never).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use herdsim_floor::{Config, Input, Millis, PolicyKind, Role, Sends, Server, edge};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

const MAX_FRAME: usize = 64 * 1024;
const MAX_CONNS: usize = 256;
const QUEUE: usize = 256;
/// Bytes the floor may queue to one connection (frames not yet written).
const QUEUE_BYTES: usize = 1 << 20;
/// The WebSocket read buffer of a connection.
const READ_BUFFER: usize = 8 * 1024;
const LIMIT: Duration = Duration::from_secs(10);
/// Silence after which a connection is pinged, and dropped at twice it.
const QUIET: Duration = Duration::from_secs(30);

/// The floor's side of one connection's outbound queue: frames (at most
/// [`QUEUE`]) and their bytes (at most [`QUEUE_BYTES`]), the bytes
/// counted back by the connection as it writes them.
#[derive(Clone)]
struct Outbox {
    tx: mpsc::Sender<Arc<str>>,
    bytes: Arc<AtomicUsize>,
}

impl Outbox {
    /// Queue `text`; `false` when the queue is full in frames or bytes
    /// (the connection does not keep up, and is dropped).
    fn offer(&self, text: Arc<str>) -> bool {
        let len = text.len();
        let queued = self.bytes.fetch_add(len, Ordering::Relaxed);
        if queued + len > QUEUE_BYTES || self.tx.try_send(text).is_err() {
            self.bytes.fetch_sub(len, Ordering::Relaxed);
            return false;
        }
        true
    }
}

/// What a connection tells the floor. `conn` tells a connection from a
/// later one under the same name.
enum Event {
    /// `name` identified; `ok` answers whether the name was free.
    Hello {
        conn: u64,
        name: String,
        tx: Outbox,
        ok: oneshot::Sender<bool>,
    },
    Frame {
        name: String,
        bytes: Vec<u8>,
    },
    Gone {
        conn: u64,
        name: String,
    },
}

/// The floor's loop.
async fn floor(mut server: Server, mut events: mpsc::Receiver<Event>) {
    let start = Instant::now();
    let now = || u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut conns: BTreeMap<String, (u64, Outbox)> = BTreeMap::new();
    let mut sends = Sends::new();
    loop {
        // A deadline past what `Instant` holds is never.
        let wake = server
            .poll_timeout()
            .and_then(|t| start.checked_add(Duration::from_millis(t.as_ms())));
        let sleep = tokio::time::sleep_until(wake.unwrap_or(start).into());
        let input = tokio::select! {
            () = sleep, if wake.is_some() => Input::Tick,
            ev = events.recv() => match ev {
                None => return,
                Some(Event::Hello { conn, name, tx, ok }) => {
                    let free = !conns.contains_key(&name);
                    if free {
                        conns.insert(name, (conn, tx));
                    }
                    let _ = ok.send(free);
                    continue;
                }
                Some(Event::Gone { conn, name }) => {
                    if conns.get(&name).is_some_and(|(c, _)| *c != conn) {
                        continue; // a newer connection holds the name
                    }
                    conns.remove(&name);
                    Input::Disconnect { agent: name }
                }
                Some(Event::Frame { name, bytes }) => {
                    let role = if name == "operator" { Role::Operator } else { Role::Agent };
                    edge::decode_bytes(&name, role, &bytes)
                }
            },
        };
        let join = match &input {
            Input::Join { agent, channel } => Some((agent.clone(), channel.clone())),
            _ => None,
        };
        server.handle(Millis(now()), input, &mut sends);
        let texts: Vec<Arc<str>> = sends
            .payloads()
            .iter()
            .map(|m| m.to_json_string().into())
            .collect();
        let mut writes: Vec<(&String, Arc<str>)> = sends
            .sends()
            .iter()
            .filter_map(|(to, i)| Some((to, Arc::clone(texts.get(*i as usize)?))))
            .collect();
        if let Some((agent, channel)) = &join
            && server.is_member(agent, channel)
        {
            let joined = json!({"type": "JOINED", "channel": channel}).to_string();
            writes.push((agent, joined.into()));
        }
        for (to, text) in writes {
            // A connection that does not read is dropped: its writer ends,
            // and its Gone event takes it off the floor.
            if let Some((_, tx)) = conns.get(to)
                && !tx.offer(text)
            {
                conns.remove(to);
            }
        }
        sends.clear();
    }
}

/// The WebSocket bounds of a connection: frames up to [`MAX_FRAME`], a
/// small read buffer, writes made at once and a write buffer of one
/// largest frame (a frame that would grow it past that is an error, which
/// ends the connection).
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME))
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_write_buffer_size(2 * MAX_FRAME)
}

/// One connection: the handshake, then frames to the floor and the
/// floor's sends to the socket.
async fn connection(
    stream: TcpStream,
    conn: u64,
    floor: mpsc::Sender<Event>,
) -> Result<(), String> {
    let cfg = ws_config();
    let ws = tokio_tungstenite::accept_async_with_config(stream, Some(cfg));
    let mut ws = tokio::time::timeout(LIMIT, ws)
        .await
        .map_err(|_| "handshake timeout")?
        .map_err(|e| e.to_string())?;
    let name = tokio::time::timeout(LIMIT, async {
        while let Some(Ok(m)) = ws.next().await {
            let v: Value = serde_json::from_str(m.to_text().unwrap_or("")).unwrap_or_default();
            if v["type"] == "IDENTIFY"
                && let Some(name) = v["name"]
                    .as_str()
                    .filter(|n| !n.is_empty() && n.len() <= 64)
            {
                return Some(name.to_string());
            }
        }
        None
    });
    let name = name.await.ok().flatten().ok_or("no IDENTIFY in time")?;
    let (tx, mut rx) = mpsc::channel(QUEUE);
    let bytes = Arc::new(AtomicUsize::new(0));
    let (ok, free) = oneshot::channel();
    let hello = Event::Hello {
        conn,
        name: name.clone(),
        tx: Outbox {
            tx,
            bytes: Arc::clone(&bytes),
        },
        ok,
    };
    floor.send(hello).await.map_err(|_| "the floor is gone")?;
    let reply = match free.await {
        Ok(true) => json!({"type": "WELCOME", "agent_id": name}),
        _ => json!({"type": "ERROR", "code": "NAME_TAKEN", "message": "name in use"}),
    };
    let welcomed = reply["type"] == "WELCOME";
    tokio::time::timeout(LIMIT, ws.send(Message::text(reply.to_string())))
        .await
        .map_err(|_| "write timeout")?
        .map_err(|e| e.to_string())?;
    if !welcomed {
        return Err(format!("{name}: name in use"));
    }
    let (mut write, mut read) = ws.split();
    let (mut heard, mut pinged) = (Instant::now(), false);
    loop {
        let quiet = heard + if pinged { 2 * QUIET } else { QUIET };
        tokio::select! {
            frame = read.next() => {
                (heard, pinged) = (Instant::now(), false);
                match frame {
                    Some(Ok(Message::Text(t))) => {
                        let bytes = t.as_str().as_bytes().to_vec();
                        if floor.send(Event::Frame { name: name.clone(), bytes }).await.is_err() {
                            break;
                        }
                    }
                    // A read error includes a full write buffer (the
                    // pongs to a peer that does not read).
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                    Some(Ok(_)) => {} // pings are answered by tungstenite; binary is ignored
                }
            }
            text = rx.recv() => match text {
                Some(text) => {
                    let len = text.len();
                    let sent = tokio::time::timeout(LIMIT, write.send(Message::text(text.to_string()))).await;
                    bytes.fetch_sub(len, Ordering::Relaxed);
                    if !matches!(sent, Ok(Ok(()))) {
                        break;
                    }
                }
                None => break, // dropped by the floor
            },
            () = tokio::time::sleep_until(quiet.into()) => {
                if pinged {
                    break; // silent, and no answer to the ping
                }
                pinged = true;
                let ping = tokio::time::timeout(LIMIT, write.send(Message::Ping(Default::default())));
                if !matches!(ping.await, Ok(Ok(()))) {
                    break;
                }
            }
        }
    }
    let _ = floor.send(Event::Gone { conn, name }).await;
    Ok(())
}

async fn serve(listen: &str, policy: PolicyKind) -> Result<(), String> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("{listen}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("listening on ws://{addr}");
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(floor(Server::new(Config::for_policy(policy)), rx));
    let permits = Arc::new(Semaphore::new(MAX_CONNS));
    for conn in 0.. {
        let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            continue; // full: the stream is dropped, closing it
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            let _ = connection(stream, conn, tx).await;
            drop(permit);
        });
    }
    Ok(())
}

fn main() {
    let (mut listen, mut policy, mut run_ms) = ("127.0.0.1:6667".to_string(), None, None);
    let mut args = std::env::args().skip(1);
    while let Some(k) = args.next() {
        let v = args.next().unwrap_or_default();
        match k.as_str() {
            "--listen" if !v.is_empty() => listen = v,
            "--policy" => policy = Some(v.parse::<PolicyKind>().map_err(|_| v)),
            "--run-ms" => run_ms = Some(v.parse::<u64>().map_err(|_| v)),
            _ => policy = Some(Err(format!("{k} {v}"))),
        }
    }
    let (policy, run_ms) = match (policy.unwrap_or(Ok(PolicyKind::Spec)), run_ms.transpose()) {
        (Ok(p), Ok(r)) => (p, r),
        (Err(bad), _) | (_, Err(bad)) => {
            eprintln!(
                "floor_server: bad argument `{bad}` (flags: --listen ADDR, --policy NAME, --run-ms N)"
            );
            std::process::exit(2);
        }
    };
    let run = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| {
            rt.block_on(async {
                match run_ms {
                    Some(ms) => {
                        tokio::time::timeout(Duration::from_millis(ms), serve(&listen, policy))
                            .await
                            .unwrap_or(Ok(()))
                    }
                    None => serve(&listen, policy).await,
                }
            })
        });
    if let Err(e) = run {
        eprintln!("floor_server: {e}");
        std::process::exit(1);
    }
}
