//! The example server and agent against a peer that pings and never reads
//! (issue 47, item 3): before, each buffered a pong per ping without bound
//! (450 MB/s; the server aborted within seconds and every connection was
//! lost). Now each bounds what one connection may hold (the WebSocket
//! write buffer, the frames and bytes queued to it, its silence) and drops
//! only that connection.
//!
//! Bounded in time like tests/serve_hostile.rs: a 3 s flood, each wait at
//! most [`WAIT`]; the bounds are on memory and liveness, not on speed.

#![cfg(target_os = "linux")]

mod common;
mod hostile;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::example_bin;
use futures_util::{SinkExt, StreamExt};
use hostile::{Server, WAIT, attack, connect, ping_flood};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

/// Peak resident memory allowed to the example server, KiB (idle it holds
/// a few MiB; unbounded, the flood below takes it past a gigabyte).
const RSS_BOUND_KIB: u64 = 160 * 1024;

/// A client of the example server is served: IDENTIFY -> WELCOME, JOIN ->
/// JOINED, within 2 s.
async fn served(addr: SocketAddr, name: &str) {
    let got = tokio::time::timeout(Duration::from_secs(2), async {
        let mut ws = connect(addr).await;
        let hello = json!({"type": "IDENTIFY", "name": name}).to_string();
        ws.send(Message::text(hello)).await.expect("sends");
        let join = json!({"type": "JOIN", "channel": "#fresh"}).to_string();
        let mut joined = false;
        while let Some(Ok(m)) = ws.next().await {
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(&t).expect("JSON");
            if v["type"] == "WELCOME" {
                ws.send(Message::text(join.clone())).await.expect("sends");
            } else if v["type"] == "JOINED" {
                joined = true;
                break;
            }
        }
        let _ = ws.close(None).await;
        joined
    })
    .await;
    assert_eq!(got.ok(), Some(true), "`{name}` not served during the flood");
}

/// Eight connections flood the example server with pings and never read,
/// for 3 s; fresh clients are served throughout, and the server's peak
/// memory stays bounded.
#[tokio::test]
async fn the_example_server_survives_a_ping_flood_that_never_reads() {
    let mut cmd = Command::new(example_bin("floor_server"));
    cmd.args(["--listen", "127.0.0.1:0", "--run-ms", "60000"]);
    let srv = Server::spawn_command(cmd);
    let addr = srv.addr;
    let flood = attack(async move {
        ping_flood(addr, 8, Instant::now() + Duration::from_secs(3)).await;
    });
    let mut n = 0;
    while !flood.is_finished() || n < 3 {
        n += 1;
        served(addr, &format!("fresh-{n}")).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    flood.join().expect("the flood does not panic");
    served(addr, "after").await;
    let rss = srv.peak_rss_kib();
    assert!(
        rss < RSS_BOUND_KIB,
        "peak RSS {rss} KiB over {RSS_BOUND_KIB} KiB\n{}",
        srv.stderr_text()
    );
}

/// A server frame (unmasked).
fn server_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mut f = vec![0x80 | opcode, payload.len() as u8];
    f.extend_from_slice(payload);
    f
}

/// Peak resident memory (`VmHWM`) of process `pid`, KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A hostile server: it accepts the example agent's WebSocket handshake,
/// then writes pings as fast as TCP takes them and never reads (nor sends
/// WELCOME). The agent's memory stays bounded while it is flooded (its
/// pongs stop at its write buffer), and it gives up on its own (its
/// handshake has 10 s in all): exit 1, naming the error.
#[tokio::test]
async fn the_example_agent_stays_bounded_against_a_server_that_pings_and_never_reads() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("address");
    // It leaves by itself after --run-ms, should the test fail first.
    let agent = Command::new(example_bin("floor_agent"))
        .args(["--url", &format!("ws://{addr}"), "--name", "a1"])
        .args(["--run-ms", "30000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the example agent starts");
    let pid = agent.id();
    let (mut tcp, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .expect("the agent connects in time")
        .expect("accepts");
    // The HTTP upgrade, by hand: read the request, answer 101.
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(WAIT, tcp.read(&mut buf))
            .await
            .expect("the request in time")
            .expect("reads");
        assert!(n > 0, "the agent hung up");
        req.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&req);
    let key = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("sec-websocket-key")
                .then(|| v.trim())
        })
        .expect("a Sec-WebSocket-Key");
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    tcp.write_all(response.as_bytes()).await.expect("writes");
    // Pings, never reading, until the agent hangs up; its memory checked
    // as it goes (unbounded, it grows by what it is sent).
    let pings: Vec<u8> = (0..1000)
        .flat_map(|_| server_frame(0x9, &[b'p'; 125]))
        .collect();
    let mut rounds = 0u64;
    loop {
        match tokio::time::timeout(WAIT, tcp.write_all(&pings)).await {
            Ok(Ok(())) => rounds += 1,
            Ok(Err(_)) => break, // the agent hung up
            Err(_) => panic!("the agent neither reads nor hangs up"),
        }
        if rounds.is_multiple_of(64) {
            let rss = peak_rss_kib(pid);
            assert!(rss < RSS_BOUND_KIB, "the agent's peak RSS {rss} KiB");
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(agent.wait_with_output());
    });
    let out = rx
        .recv_timeout(WAIT)
        .expect("the agent exits in time")
        .expect("the agent's output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("floor_agent: "), "{stderr}");
}
