//! A real agent process that embeds the agent half of the floor
//! (`herdsim-floor`'s [`Agent`]) around a fake model.
//!
//! It connects to an agentchat-style WebSocket server (`herdsim serve`, or
//! any server speaking the chat subset), identifies, joins one channel and
//! answers the questions posted there by the operator. The floor client
//! decides; this file only carries out its actions with real timers and a
//! real socket:
//!
//! - every frame the floor knows (relayed messages and claims, YIELD,
//!   releases): [`AgentInput::Frame`]; a question it would answer:
//!   [`AgentInput::Answer`] (the floor decides whether and when: its CSMA
//!   wait in `--csma-min-ms`..`--csma-max-ms`, drawn from this process's
//!   random numbers, its exemptions);
//! - at [`Agent::poll_timeout`]: [`AgentInput::Timeout`] (the floor's
//!   timers are inside it);
//! - [`AgentOutput::Transmit`] (a claim, an answer): the frame goes to the
//!   server as JSON;
//! - [`AgentOutput::StartInference`]: the fake model "thinks" for a time
//!   drawn uniformly from `infer-min-ms..infer-max-ms`, then
//!   [`AgentInput::InferenceDone`]; [`AgentOutput::AbortInference`]: that
//!   inference is dropped (its bill counted as wasted).
//!
//! Its clock is the wall clock in ms since the Unix epoch, as a real agent's
//! `started_at` is: claims from agents on one machine (or on synchronised
//! clocks) compare fairly.
//!
//! ```text
//! cargo run --release --example floor_agent -- --url ws://127.0.0.1:6667 --name agent-1
//! ```
//!
//! Flags (all optional but `--url` and `--name`): `--channel '#general'`,
//! `--policy spec` (`none` claims nothing: the herd), `--ttl-ms 45000`,
//! `--csma-min-ms 2000`, `--csma-max-ms 8000` (the protocol's defaults,
//! the library's `ClientConfig::default()`; `herdsim tune` prints the
//! three it recommends in these flags), `--infer-min-ms 800`, `--infer-max-ms 1200`,
//! `--seed 1`, `--run-ms 60000` (then it leaves). It prints `ready` on
//! stdout once it has joined, and at the end one line of counts:
//! `questions=Q started=S aborted=A answered=N skipped=K`.
//! Every wait is bounded: the handshake by 10 s, each send by 10 s, the
//! run by `--run-ms`. What a server can make it hold is bounded too: frames
//! of at most 1 MiB, and a WebSocket write buffer of one largest frame, so
//! a server that pings and never reads ends the connection (exit 1) rather
//! than filling memory with pongs.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use herdsim_floor::dialect;
use herdsim_floor::{
    Agent, AgentInput, AgentOutput, ClientConfig, CsmaWindow, Millis, PolicyKind, ServerMsg, Text,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// The longest frame read (a longer one ends the connection).
const MAX_FRAME_BYTES: usize = 1 << 20;

/// The WebSocket bounds: frames up to [`MAX_FRAME_BYTES`], writes made at
/// once, and a write buffer of one largest frame (the pongs to a server
/// that does not read stop there: a write past it is an error).
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .read_buffer_size(8 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(2 * MAX_FRAME_BYTES)
}

/// The flags, each `--name value`.
struct Args {
    url: String,
    name: String,
    channel: String,
    policy: PolicyKind,
    ttl_ms: u64,
    csma: CsmaWindow,
    infer_ms: (u64, u64),
    seed: u64,
    run_ms: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut kv = BTreeMap::new();
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let key = k
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {k}"))?;
        let v = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
        kv.insert(key.to_string(), v);
    }
    let text = |k: &str, d: &str| kv.get(k).cloned().unwrap_or_else(|| d.to_string());
    let num = |k: &str, d: u64| -> Result<u64, String> {
        kv.get(k)
            .map_or(Ok(d), |v| v.parse().map_err(|e| format!("--{k} {v}: {e}")))
    };
    let policy = text("policy", "spec");
    let args = Args {
        url: kv.get("url").cloned().ok_or("--url is required")?,
        name: kv.get("name").cloned().ok_or("--name is required")?,
        channel: text("channel", "#general"),
        policy: policy
            .parse()
            .map_err(|_| format!("--policy {policy}: not a policy"))?,
        // The protocol's defaults, the library's.
        ttl_ms: num("ttl-ms", ClientConfig::<Text>::default().ttl_ms)?,
        csma: CsmaWindow {
            min_ms: num("csma-min-ms", CsmaWindow::default().min_ms)?,
            max_ms: num("csma-max-ms", CsmaWindow::default().max_ms)?,
        },
        infer_ms: (num("infer-min-ms", 800)?, num("infer-max-ms", 1_200)?),
        seed: num("seed", 1)?,
        run_ms: num("run-ms", 60_000)?,
    };
    if args.csma.min_ms > args.csma.max_ms {
        return Err("--csma-min-ms is above --csma-max-ms".into());
    }
    if args.infer_ms.0 > args.infer_ms.1 {
        return Err("--infer-min-ms is above --infer-max-ms".into());
    }
    Ok(args)
}

/// The local clock: ms since the Unix epoch (the floor's time, converted
/// here at the edge).
fn now_ms() -> Millis {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[derive(Default)]
struct Counts {
    questions: u64,
    started: u64,
    aborted: u64,
    answered: u64,
    skipped: u64,
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next text frame as JSON, within `limit`; an ERROR from the server
/// (during the handshake: a name it refuses, a rate limit) is the error.
async fn next_json(ws: &mut Ws, limit: Duration) -> Result<Value, String> {
    let v = next_frame(ws, limit).await?;
    if v["type"] == "ERROR" {
        return Err(format!(
            "the server refused: {} {}",
            v["code"].as_str().unwrap_or("ERROR"),
            v["message"].as_str().unwrap_or("")
        ));
    }
    Ok(v)
}

/// The next text frame as JSON, within `limit`.
async fn next_frame(ws: &mut Ws, limit: Duration) -> Result<Value, String> {
    loop {
        let frame = tokio::time::timeout(limit, ws.next())
            .await
            .map_err(|_| "the server said nothing in time".to_string())?
            .ok_or("the server closed the connection")?
            .map_err(|e| e.to_string())?;
        if let Message::Text(t) = frame {
            return serde_json::from_str(&t).map_err(|e| format!("not JSON: {e}"));
        }
    }
}

/// Send a frame, within a bounded time.
async fn send(ws: &mut Ws, text: String) -> Result<(), String> {
    tokio::time::timeout(Duration::from_secs(10), ws.send(Message::text(text)))
        .await
        .map_err(|_| "a send took over 10 s".to_string())?
        .map_err(|e| e.to_string())
}

/// IDENTIFY, then JOIN the channel, all within 10 s (however many other
/// frames, pings included, the server sends meanwhile). Returns the id the
/// server names this agent by (WELCOME's `agent_id` without its `@`):
/// `from`, `holder` and `winner` carry it.
async fn handshake(ws: &mut Ws, a: &Args) -> Result<String, String> {
    let limit = Duration::from_secs(10);
    tokio::time::timeout(limit, identify_and_join(ws, a, limit))
        .await
        .map_err(|_| "no WELCOME and JOINED within 10 s".to_string())?
}

/// [`handshake`]'s steps, each answer awaited for at most `limit`.
async fn identify_and_join(ws: &mut Ws, a: &Args, limit: Duration) -> Result<String, String> {
    send(ws, json!({"type": "IDENTIFY", "name": a.name}).to_string()).await?;
    let me = loop {
        let v = next_json(ws, limit).await?;
        if v["type"] == "WELCOME" {
            let id = v["agent_id"].as_str().unwrap_or(&a.name);
            break id.strip_prefix('@').unwrap_or(id).to_string();
        }
    };
    send(
        ws,
        json!({"type": "JOIN", "channel": a.channel}).to_string(),
    )
    .await?;
    while next_json(ws, limit).await?["type"] != "JOINED" {}
    Ok(me)
}

async fn run(a: Args) -> Result<Counts, String> {
    let (mut ws, _) = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_tungstenite::connect_async_with_config(a.url.as_str(), Some(ws_config()), false),
    )
    .await
    .map_err(|_| format!("{}: no connection within 10 s", a.url))?
    .map_err(|e| format!("{}: {e}", a.url))?;
    let me = handshake(&mut ws, &a).await?;
    println!("ready");
    let _ = std::io::stdout().flush();

    // The agent's randomness: the CSMA draws the agent half asks for (once
    // per wait, as a uniform number in [0, 1)) on one stream, the fake
    // model's latency on another.
    let mut csma_rng = ChaCha8Rng::seed_from_u64(a.seed);
    let mut rng = ChaCha8Rng::seed_from_u64(a.seed);
    rng.set_stream(1);
    let mut cfg = ClientConfig::new(me.clone());
    cfg.policy = a.policy;
    cfg.ttl_ms = a.ttl_ms;
    cfg.csma = a.csma;
    let mut floor = Agent::new(cfg, move || csma_rng.random::<f64>());
    // Inferences under way: (local time due, message id). The floor's own
    // timers are inside it: one wake, at `poll_timeout`.
    let mut thinking: Vec<(Millis, String)> = Vec::new();
    let mut n = Counts::default();
    let end = now_ms().saturating_add(a.run_ms);
    loop {
        let next_due = thinking
            .iter()
            .map(|(t, _)| *t)
            .chain(floor.poll_timeout())
            .min()
            .unwrap_or(end)
            .min(end);
        let wait = Duration::from_millis(next_due.saturating_since(now_ms()));
        tokio::select! {
            frame = ws.next() => {
                let text = match frame {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(e.to_string()),
                    None => return Err("the server closed the connection".into()),
                };
                // A real agentchat server's dialect read into the wire
                // (herdsim serve's frames pass unchanged); replays of the
                // channel's history, notices and presence are not the floor's.
                let Some(msg) = dialect::server_msg(&text, MAX_FRAME_BYTES) else {
                    continue;
                };
                let now = now_ms();
                floor.handle_input(now, AgentInput::Frame(&msg));
                // A question: a channel MSG that answers nothing, not ours.
                // This agent would answer any; the floor decides whether and when.
                if let ServerMsg::Msg { from, to, in_reply_to: None, .. } = &msg
                    && *from != me
                    && *to == a.channel
                {
                    n.questions += 1;
                    floor.handle_input(now, AgentInput::Answer(&msg));
                }
            }
            () = tokio::time::sleep(wait) => {
                let now = now_ms();
                if now >= end {
                    break;
                }
                floor.handle_input(now, AgentInput::Timeout);
                for (_, id) in take_due(&mut thinking, now) {
                    let answer = format!("{}'s answer to {id}", a.name);
                    let reply = format!("{id}-{}", a.name);
                    let done = AgentInput::InferenceDone {
                        msg_id: &id,
                        reply_id: Some(&reply),
                        content: &answer,
                    };
                    floor.handle_input(now, done);
                    n.answered += 1;
                }
            }
        }
        while let Some(out) = floor.poll_output() {
            match out {
                AgentOutput::Transmit(m) => send(&mut ws, m.to_json_string()).await?,
                AgentOutput::StartInference { msg_id, .. } => {
                    n.started += 1;
                    let took = rng.random_range(a.infer_ms.0..=a.infer_ms.1);
                    thinking.push((now_ms().saturating_add(took), msg_id));
                }
                AgentOutput::AbortInference { msg_id, .. } => {
                    n.aborted += 1;
                    thinking.retain(|(_, id)| *id != msg_id);
                }
                AgentOutput::Skipped { .. } => n.skipped += 1,
                _ => {}
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    Ok(n)
}

/// The entries due by `now`, taken out in time order.
fn take_due(list: &mut Vec<(Millis, String)>, now: Millis) -> Vec<(Millis, String)> {
    let (mut due, keep): (Vec<_>, Vec<_>) = list.drain(..).partition(|(t, _)| *t <= now);
    *list = keep;
    due.sort();
    due
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("floor_agent: {e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("floor_agent: no runtime: {e}");
            std::process::exit(1);
        }
    };
    match rt.block_on(run(args)) {
        Ok(n) => println!(
            "questions={} started={} aborted={} answered={} skipped={}",
            n.questions, n.started, n.aborted, n.answered, n.skipped
        ),
        Err(e) => {
            eprintln!("floor_agent: {e}");
            std::process::exit(1);
        }
    }
}
