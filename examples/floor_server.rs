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
//! Bounds: frames of at most 64 KiB; at most 256 connections; a connection
//! has 10 s to finish the WebSocket handshake and to identify, each write
//! 10 s, and at most 256 frames queued to it (one that does not read is
//! dropped, and leaves the floor). The name `operator` is the operator.
//!
//! ```text
//! cargo run --release --example floor_server -- --listen 127.0.0.1:6667 --policy spec
//! ```
//!
//! It prints `listening on ws://ADDR` on stderr, and stops after `--run-ms`
//! (default: never).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use herdsim_floor::{Config, Input, PolicyKind, Role, Sends, Server, edge};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

const MAX_FRAME: usize = 64 * 1024;
const MAX_CONNS: usize = 256;
const QUEUE: usize = 256;
const LIMIT: Duration = Duration::from_secs(10);

/// What a connection tells the floor. `conn` tells a connection from a
/// later one under the same name.
enum Event {
    /// `name` identified; `ok` answers whether the name was free.
    Hello {
        conn: u64,
        name: String,
        tx: mpsc::Sender<Arc<str>>,
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
    let mut conns: BTreeMap<String, (u64, mpsc::Sender<Arc<str>>)> = BTreeMap::new();
    let mut sends = Sends::new();
    loop {
        // A deadline past what `Instant` holds is never.
        let wake = server
            .poll_timeout()
            .and_then(|t| start.checked_add(Duration::from_millis(t)));
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
        server.handle(now(), input, &mut sends);
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
                && tx.try_send(text).is_err()
            {
                conns.remove(to);
            }
        }
        sends.clear();
    }
}

/// One connection: the handshake, then frames to the floor and the
/// floor's sends to the socket.
async fn connection(
    stream: TcpStream,
    conn: u64,
    floor: mpsc::Sender<Event>,
) -> Result<(), String> {
    let cfg = WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME));
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
    let (ok, free) = oneshot::channel();
    let hello = Event::Hello {
        conn,
        name: name.clone(),
        tx,
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
    loop {
        tokio::select! {
            frame = read.next() => match frame {
                Some(Ok(Message::Text(t))) => {
                    let bytes = t.as_str().as_bytes().to_vec();
                    if floor.send(Event::Frame { name: name.clone(), bytes }).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                Some(Ok(_)) => {} // pings are answered by tungstenite; binary is ignored
            },
            text = rx.recv() => match text {
                Some(text) => {
                    let sent = tokio::time::timeout(LIMIT, write.send(Message::text(text.to_string()))).await;
                    if !matches!(sent, Ok(Ok(()))) {
                        break;
                    }
                }
                None => break, // dropped by the floor
            },
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
    tokio::spawn(floor(
        Server::new(Config {
            policy,
            ..Config::default()
        }),
        rx,
    ));
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
