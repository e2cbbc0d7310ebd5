//! What a hostile client costs the others on `herdsim serve`: an unrelated
//! client's round trip through the hub (JOIN -> JOINED, LEAVE -> LEFT,
//! every 20 ms) while one attack runs, and the server's peak resident
//! memory. The figures of docs/serve.md ("Limits and what a hostile client
//! can do") come from here:
//!
//!   cargo bench --bench serve_flood
//!
//! Each row spawns the release binary with its default limits on an
//! ephemeral loopback port, measures 4 s without an attack (after a
//! second of warm-up), then 4 s with it. Not a criterion benchmark: it prints one
//! table. Linux only (peak RSS is `VmHWM` of /proc/PID/status).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

const PHASE: Duration = Duration::from_secs(4);

/// A spawned `herdsim serve`, killed when dropped.
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str]) -> (Spawned, SocketAddr) {
    let child = Command::new(env!("CARGO_BIN_EXE_herdsim"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herdsim serve starts");
    let mut child = Spawned(child);
    let stderr = child.0.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let addr = first
        .split("ws://")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    // Keep reading stderr so that the server never blocks on it.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    (child, addr)
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

async fn connect(addr: SocketAddr) -> Ws {
    tokio_tungstenite::connect_async(format!("ws://{addr}"))
        .await
        .expect("connects")
        .0
}

async fn send(ws: &mut Ws, v: &Value) {
    let _ = ws.send(Message::text(v.to_string())).await;
}

async fn until(ws: &mut Ws, ty: &str) {
    while let Some(Ok(m)) = ws.next().await {
        if let Message::Text(t) = m
            && serde_json::from_str::<Value>(&t).is_ok_and(|v| v["type"] == ty)
        {
            return;
        }
    }
}

async fn named(addr: SocketAddr, name: &str) -> Ws {
    let mut ws = connect(addr).await;
    send(&mut ws, &json!({"type": "IDENTIFY", "name": name})).await;
    until(&mut ws, "WELCOME").await;
    ws
}

async fn join(ws: &mut Ws, channel: &str) {
    send(ws, &json!({"type": "JOIN", "channel": channel})).await;
    until(ws, "JOINED").await;
}

/// Round trips through the hub for `phase`, one every 20 ms, in µs.
async fn round_trips(ws: &mut Ws, phase: Duration) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram");
    let end = Instant::now() + phase;
    let mut join_next = true;
    while Instant::now() < end {
        let t = Instant::now();
        let (msg, reply) = if join_next {
            (json!({"type": "JOIN", "channel": "#probe"}), "JOINED")
        } else {
            (json!({"type": "LEAVE", "channel": "#probe"}), "LEFT")
        };
        join_next = !join_next;
        send(ws, &msg).await;
        if tokio::time::timeout(Duration::from_secs(10), until(ws, reply))
            .await
            .is_err()
        {
            let _ = h.record(10_000_000);
            continue;
        }
        let _ = h.record(t.elapsed().as_micros().max(1) as u64);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h
}

fn attack_thread<F>(f: F) -> std::thread::JoinHandle<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f);
    })
}

fn masked_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8, 0, 0, 0, 0];
    f.extend_from_slice(payload);
    f
}

/// One attack, for `PHASE`.
async fn run_attack(kind: &'static str, addr: SocketAddr) {
    let end = Instant::now() + PHASE;
    match kind {
        "ping flood, 8 connections that never read" => {
            let pings: Vec<u8> = (0..1000)
                .flat_map(|_| masked_frame(0x9, &[b'p'; 125]))
                .collect();
            let mut tasks = Vec::new();
            for _ in 0..8 {
                let pings = pings.clone();
                tasks.push(tokio::spawn(async move {
                    let mut ws = connect(addr).await;
                    if let MaybeTlsStream::Plain(tcp) = ws.get_mut() {
                        while Instant::now() < end {
                            let left = end.saturating_duration_since(Instant::now());
                            if tokio::time::timeout(left, tcp.write_all(&pings))
                                .await
                                .is_err()
                            {
                                break;
                            }
                        }
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        }
        "1 MiB MSGs fanned out to 8 members that never read" => {
            let mut sinks = Vec::new();
            for i in 0..8 {
                let mut ws = named(addr, &format!("sink-{i}")).await;
                join(&mut ws, "#general").await;
                sinks.push(ws);
            }
            let mut ws = named(addr, "sender").await;
            join(&mut ws, "#general").await;
            let content = "y".repeat((1 << 20) - 200);
            let msg = Message::text(
                json!({"type": "MSG", "to": "#general", "content": content}).to_string(),
            );
            while Instant::now() < end {
                let left = end.saturating_duration_since(Instant::now());
                if tokio::time::timeout(left, ws.send(msg.clone()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            drop(sinks);
        }
        "JOINs of 1 MiB channel names" => {
            let mut ws = named(addr, "joiner").await;
            let msg = Message::text(
                json!({"type": "JOIN", "channel": format!("#{}", "c".repeat((1 << 20) - 100))})
                    .to_string(),
            );
            while Instant::now() < end {
                let left = end.saturating_duration_since(Instant::now());
                if tokio::time::timeout(left, ws.send(msg.clone()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
        "MSG flood at the frame limit, 1 KiB each, 8 readers" => {
            let mut readers = Vec::new();
            for i in 0..8 {
                let mut ws = named(addr, &format!("reader-{i}")).await;
                join(&mut ws, "#general").await;
                readers.push(tokio::spawn(async move {
                    let stop = end + Duration::from_millis(500);
                    while Instant::now() < stop {
                        let left = stop.saturating_duration_since(Instant::now());
                        if tokio::time::timeout(left, ws.next()).await.is_err() {
                            break;
                        }
                    }
                }));
            }
            let mut ws = named(addr, "flooder").await;
            join(&mut ws, "#general").await;
            let content = "f".repeat(1024);
            let msg = Message::text(
                json!({"type": "MSG", "to": "#general", "content": content}).to_string(),
            );
            while Instant::now() < end {
                let left = end.saturating_duration_since(Instant::now());
                if tokio::time::timeout(left, ws.send(msg.clone()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            for r in readers {
                let _ = r.await;
            }
        }
        "1000 sockets that never identify" => {
            let mut held = Vec::new();
            for _ in 0..1000 {
                if Instant::now() > end {
                    break;
                }
                if let Ok(Ok((ws, _))) = tokio::time::timeout(
                    Duration::from_secs(1),
                    tokio_tungstenite::connect_async(format!("ws://{addr}")),
                )
                .await
                {
                    held.push(ws);
                }
            }
            tokio::time::sleep(end.saturating_duration_since(Instant::now())).await;
        }
        _ => {}
    }
}

fn ms(h: &Histogram<u64>, q: f64) -> String {
    format!("{:.2}", h.value_at_quantile(q) as f64 / 1000.0)
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters rows.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let attacks: &[(&'static str, &[&str])] = &[
        ("ping flood, 8 connections that never read", &[]),
        ("1 MiB MSGs fanned out to 8 members that never read", &[]),
        ("JOINs of 1 MiB channel names", &[]),
        ("MSG flood at the frame limit, 1 KiB each, 8 readers", &[]),
        ("1000 sockets that never identify", &[]),
    ];
    println!(
        "| attack (4 s) | unrelated client's hub round trip without the attack: p50 / p99 ms | during it: p50 / p99 / max ms | server peak RSS MiB |"
    );
    println!("|---|---|---|---|");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for (kind, args) in attacks {
        if filter.as_deref().is_some_and(|f| !kind.contains(f)) {
            continue;
        }
        let (child, addr) = spawn(args);
        let (before, during) = rt.block_on(async {
            let mut probe = named(addr, "probe").await;
            let _warm_up = round_trips(&mut probe, Duration::from_secs(1)).await;
            let before = round_trips(&mut probe, PHASE).await;
            let attack = attack_thread(run_attack(kind, addr));
            let during = round_trips(&mut probe, PHASE).await;
            let _ = tokio::task::spawn_blocking(move || attack.join()).await;
            (before, during)
        });
        let rss = peak_rss_kib(child.0.id()) as f64 / 1024.0;
        drop(child);
        println!(
            "| {kind} | {} / {} | {} / {} / {} | {rss:.0} |",
            ms(&before, 0.5),
            ms(&before, 0.99),
            ms(&during, 0.5),
            ms(&during, 0.99),
            ms(&during, 1.0),
        );
    }
}
