//! The operator for trying the floor by hand: it asks questions in a
//! channel and counts the answers each gets, on `herdsim serve` or on a
//! real agentchat server, with agents such as `examples/floor_agent.rs`.
//!
//! It identifies, joins the channel, posts `--questions` questions
//! `--gap-ms` apart (a real agentchat server accepts one MSG a second per
//! connection), waits `--tail-ms` for late answers, and prints one line per
//! question, then the totals:
//!
//! ```text
//! question=1795836503336-10psa1 answers=1 by=agent-1
//! ...
//! questions=4 answers=4 duplicates=0 unanswered=0
//! ```
//!
//! A question goes out with an id of ours (`q0`, `q1`, ...), which
//! `herdsim serve` keeps (unless another sender took it first: then it
//! relays the question under an id of its own, and echoes it); a real
//! agentchat server assigns its own (in `msg_id`) and echoes the question
//! back, and the echo tells us which.
//! An answer is a channel MSG in reply to a question. The
//! frames are read through the floor's agentchat dialect
//! (`herdsim_floor::dialect`), so replays of the channel's history and the
//! server's notices are not counted.
//!
//! ```text
//! cargo run --release --example floor_operator -- --url ws://127.0.0.1:6667
//! ```
//!
//! Flags (all optional but `--url`): `--name operator`, `--channel
//! '#general'`, `--questions 4`, `--gap-ms 6000`, `--tail-ms 8000`. Every
//! wait is bounded: the handshake by 10 s, the run by the flags.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herdsim_floor::ServerMsg;
use herdsim_floor::dialect::{self, Kind};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// The longest frame read (longer ones are ignored unparsed).
const MAX_FRAME_BYTES: usize = 1 << 20;

struct Args {
    url: String,
    name: String,
    channel: String,
    questions: u32,
    gap_ms: u64,
    tail_ms: u64,
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
    let num = |k: &str, d: u64, max: u64| -> Result<u64, String> {
        let n = kv
            .get(k)
            .map_or(Ok(d), |v| v.parse().map_err(|e| format!("--{k} {v}: {e}")))?;
        if n > max {
            return Err(format!("--{k} {n}: at most {max}"));
        }
        Ok(n)
    };
    Ok(Args {
        url: kv.get("url").cloned().ok_or("--url is required")?,
        name: text("name", "operator"),
        channel: text("channel", "#general"),
        questions: u32::try_from(num("questions", 4, 10_000)?).unwrap_or(4),
        gap_ms: num("gap-ms", 6_000, 3_600_000)?,
        tail_ms: num("tail-ms", 8_000, 3_600_000)?,
    })
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Send a frame, within a bounded time.
async fn send(ws: &mut Ws, v: Value) -> Result<(), String> {
    tokio::time::timeout(
        Duration::from_secs(10),
        ws.send(Message::text(v.to_string())),
    )
    .await
    .map_err(|_| "a send took over 10 s".to_string())?
    .map_err(|e| e.to_string())
}

/// The next frame's text, or `None` if nothing came by `until`.
async fn next_text(ws: &mut Ws, until: Instant) -> Result<Option<String>, String> {
    loop {
        match tokio::time::timeout_at(until, ws.next()).await {
            Err(_) => return Ok(None),
            Ok(None) => return Err("the server closed the connection".into()),
            Ok(Some(Err(e))) => return Err(e.to_string()),
            Ok(Some(Ok(Message::Text(t)))) => return Ok(Some(t.to_string())),
            Ok(Some(Ok(_))) => {}
        }
    }
}

/// Per question in the order asked: its id and who answered it.
type Tally = Vec<(String, Vec<String>)>;

async fn run(a: &Args) -> Result<Tally, String> {
    let (mut ws, _) = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_tungstenite::connect_async(a.url.as_str()),
    )
    .await
    .map_err(|_| format!("{}: no connection within 10 s", a.url))?
    .map_err(|e| format!("{}: {e}", a.url))?;
    send(&mut ws, json!({"type": "IDENTIFY", "name": a.name})).await?;
    let handshake = Instant::now() + Duration::from_secs(10);
    let mut me = None;
    while let Some(t) = next_text(&mut ws, handshake).await? {
        let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
        match v["type"].as_str() {
            Some("ERROR") => return Err(format!("the server refused: {t}")),
            Some("WELCOME") => {
                let id = v["agent_id"].as_str().unwrap_or(&a.name);
                me = Some(id.strip_prefix('@').unwrap_or(id).to_string());
                send(&mut ws, json!({"type": "JOIN", "channel": a.channel})).await?;
            }
            Some("JOINED") if me.is_some() => break,
            _ => {}
        }
    }
    let me = me.ok_or("no WELCOME within 10 s")?;
    // Who answered what, by question id; ids in the order asked.
    let mut tally: Tally = Vec::new();
    let mut by_id: BTreeMap<String, usize> = BTreeMap::new();
    let start = Instant::now();
    let gap = Duration::from_millis(a.gap_ms);
    let end = start + gap * a.questions.saturating_sub(1) + Duration::from_millis(a.tail_ms);
    let mut posted = 0;
    let mut echoed = 0;
    loop {
        let next_post = start + gap * posted;
        let until = if posted < a.questions {
            next_post.min(end)
        } else {
            end
        };
        if Instant::now() >= end {
            break;
        }
        if posted < a.questions && Instant::now() >= next_post {
            let id = format!("q{posted}");
            let content = format!("question {posted} for the floor");
            let q = json!({"type": "MSG", "to": a.channel, "id": id, "content": content});
            send(&mut ws, q).await?;
            by_id.insert(id.clone(), tally.len());
            tally.push((id, Vec::new()));
            posted += 1;
            continue;
        }
        let Some(text) = next_text(&mut ws, until).await? else {
            continue;
        };
        let (kind, v) = dialect::read(&text, MAX_FRAME_BYTES);
        if kind != Kind::Msg {
            continue;
        }
        let Ok(ServerMsg::Msg {
            id,
            from,
            to,
            content,
            in_reply_to,
        }) = ServerMsg::from_value(&v)
        else {
            continue;
        };
        if to != a.channel {
            continue;
        }
        match in_reply_to {
            // Our own question relayed back (agentchat echoes each, under
            // an id of its own; `herdsim serve` only one it relayed under
            // an id of its own because ours was another sender's): the
            // question its text names, else the oldest not yet echoed.
            None if from == me => {
                let named = content
                    .strip_prefix("question ")
                    .and_then(|r| r.strip_suffix(" for the floor"))
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&k| k < tally.len());
                let k = named.unwrap_or(echoed);
                if k < tally.len() && !by_id.contains_key(&id) {
                    by_id.insert(id.clone(), k);
                    tally[k].0 = id;
                }
                echoed += 1;
            }
            Some(q) => {
                if let Some(&k) = by_id.get(&q) {
                    let name = v["from_name"].as_str().map_or(from, str::to_string);
                    tally[k].1.push(name);
                }
            }
            None => {}
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    Ok(tally)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("floor_operator: {e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("floor_operator: no runtime: {e}");
            std::process::exit(1);
        }
    };
    match rt.block_on(run(&args)) {
        Ok(tally) => {
            let (mut answers, mut dup, mut none) = (0, 0, 0);
            for (id, by) in &tally {
                println!("question={id} answers={} by={}", by.len(), by.join(","));
                answers += by.len();
                dup += by.len().saturating_sub(1);
                none += usize::from(by.is_empty());
            }
            println!(
                "questions={} answers={answers} duplicates={dup} unanswered={none}",
                tally.len()
            );
        }
        Err(e) => {
            eprintln!("floor_operator: {e}");
            std::process::exit(1);
        }
    }
}
