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

#[path = "../tests/hostile/mod.rs"]
mod hostile;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hdrhistogram::Histogram;
use hostile::{Server, Ws, attack, big_msg, join, named, ping_flood, send, send_until};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const PHASE: Duration = Duration::from_secs(4);

/// Read until a frame of type `ty`; `false` if the connection ended.
async fn reply(ws: &mut Ws, ty: &str) -> bool {
    while let Some(Ok(m)) = ws.next().await {
        if let Message::Text(t) = m
            && serde_json::from_str::<Value>(&t).is_ok_and(|v| v["type"] == ty)
        {
            return true;
        }
    }
    false
}

/// Round trips through the hub for `phase`, one every 20 ms, in µs.
async fn round_trips(ws: &mut Ws, phase: Duration) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram");
    let end = Instant::now() + phase;
    let mut join_next = true;
    while Instant::now() < end {
        let t = Instant::now();
        let (msg, want) = if join_next {
            (json!({"type": "JOIN", "channel": "#probe"}), "JOINED")
        } else {
            (json!({"type": "LEAVE", "channel": "#probe"}), "LEFT")
        };
        join_next = !join_next;
        send(ws, &msg).await;
        if !matches!(
            tokio::time::timeout(Duration::from_secs(10), reply(ws, want)).await,
            Ok(true)
        ) {
            let _ = h.record(10_000_000);
            continue;
        }
        let _ = h.record(t.elapsed().as_micros().max(1) as u64);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h
}

/// One attack, for `PHASE`.
async fn run_attack(kind: &'static str, addr: std::net::SocketAddr) {
    let end = Instant::now() + PHASE;
    match kind {
        "ping flood, 8 connections that never read" => ping_flood(addr, 8, end).await,
        "1 MiB MSGs fanned out to 8 members that never read" => {
            let mut sinks = Vec::new();
            for i in 0..8 {
                let mut ws = named(addr, &format!("sink-{i}")).await;
                join(&mut ws, "#general").await;
                sinks.push(ws);
            }
            let mut ws = named(addr, "sender").await;
            join(&mut ws, "#general").await;
            send_until(&mut ws, &big_msg((1 << 20) - 200, 'y'), end, || false).await;
            drop(sinks);
        }
        "JOINs of 1 MiB channel names" => {
            let mut ws = named(addr, "joiner").await;
            let channel = format!("#{}", "c".repeat((1 << 20) - 100));
            let msg = Message::text(json!({"type": "JOIN", "channel": channel}).to_string());
            send_until(&mut ws, &msg, end, || false).await;
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
            send_until(&mut ws, &big_msg(1024, 'f'), end, || false).await;
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
        let srv = Server::spawn(args);
        let addr = srv.addr;
        let (before, during) = rt.block_on(async {
            let mut probe = named(addr, "probe").await;
            let _warm_up = round_trips(&mut probe, Duration::from_secs(1)).await;
            let before = round_trips(&mut probe, PHASE).await;
            let attack = attack(run_attack(kind, addr));
            let during = round_trips(&mut probe, PHASE).await;
            let _ = tokio::task::spawn_blocking(move || attack.join()).await;
            (before, during)
        });
        let rss = srv.peak_rss_kib() as f64 / 1024.0;
        drop(srv);
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
