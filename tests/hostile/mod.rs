//! Hostile clients and a spawned `herdsim serve`, shared by
//! tests/serve_hostile.rs and benches/serve_flood.rs: the server's address
//! and peak memory, WebSocket clients that identify and join, attacks on
//! threads of their own, raw frames and floods bounded by a deadline.

#![allow(dead_code)] // each user takes its own subset

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The longest any single wait may take before the caller fails.
pub const WAIT: Duration = Duration::from_secs(15);

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A spawned `herdsim serve`, killed if the test fails first.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub stderr: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn spawn(args: &[&str]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_herdsim"));
        cmd.args(["serve", "--listen", "127.0.0.1:0"]).args(args);
        Server::spawn_command(cmd)
    }

    /// Any server that prints `... ws://ADDR` as its first line on stderr
    /// (`herdsim serve`, `examples/floor_server.rs`).
    pub fn spawn_command(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("herdsim serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let addr: SocketAddr = first
            .split("ws://")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no address in {first:?}"));
        assert!(addr.ip().is_loopback());
        let collected = Arc::new(Mutex::new(vec![first]));
        let sink = Arc::clone(&collected);
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(mut v) = sink.lock() {
                    v.push(line);
                }
            }
        });
        Server {
            child: Some(child),
            addr,
            stderr: collected,
            reader: Some(reader),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The server's peak resident memory so far (`VmHWM`), KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("/proc/PID/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmHWM")
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.lock().map(|v| v.join("\n")).unwrap_or_default()
    }

    /// SIGTERM, and wait for the exit (bounded); the exit code and stderr.
    pub fn terminate(mut self) -> (Option<i32>, String) {
        let mut child = self.child.take().expect("running");
        let ok = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(ok.success());
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("herdsim serve did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        (status.code(), self.stderr_text())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub async fn connect(addr: SocketAddr) -> Ws {
    let (ws, _) = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::connect_async(format!("ws://{addr}")),
    )
    .await
    .expect("connects in time")
    .expect("connects");
    ws
}

pub async fn send(ws: &mut Ws, v: &Value) {
    ws.send(Message::text(v.to_string())).await.expect("sends");
}

/// The next data frame as JSON.
pub async fn next(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame in time")
            .expect("open")
            .expect("no error");
        if let Message::Text(t) = m {
            return serde_json::from_str(&t).expect("JSON");
        }
    }
}

/// Read until a frame of type `ty` (returned).
pub async fn until(ws: &mut Ws, ty: &str) -> Value {
    loop {
        let v = next(ws).await;
        if v["type"] == ty {
            return v;
        }
    }
}

pub async fn named(addr: SocketAddr, name: &str) -> Ws {
    let mut ws = connect(addr).await;
    send(&mut ws, &json!({"type": "IDENTIFY", "name": name})).await;
    let w = until(&mut ws, "WELCOME").await;
    assert_eq!(w["name"], name);
    ws
}

pub async fn join(ws: &mut Ws, channel: &str) {
    send(ws, &json!({"type": "JOIN", "channel": channel})).await;
    loop {
        let v = next(ws).await;
        if v["type"] == "JOINED" && v["channel"] == channel {
            return;
        }
        assert_ne!(v["type"], "ERROR", "{v}");
    }
}

/// Run an attack on a thread of its own (with its own runtime), so that
/// the fresh clients of the test are never queued behind it.
pub fn attack<F>(f: F) -> std::thread::JoinHandle<()>
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

/// A masked client frame (mask key 0: the payload is sent as is).
pub fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
    let n = payload.len();
    if n < 126 {
        f.push(0x80 | n as u8);
    } else if n < 65536 {
        f.push(0x80 | 126);
        f.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        f.push(0x80 | 127);
        f.extend_from_slice(&(n as u64).to_be_bytes());
    }
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

/// Send `msg` again and again until `end` (or until a send cannot finish
/// by then, or `stop` says so).
pub async fn send_until(ws: &mut Ws, msg: &Message, end: Instant, stop: impl Fn() -> bool) {
    while Instant::now() < end && !stop() {
        let left = end.saturating_duration_since(Instant::now());
        if !matches!(
            tokio::time::timeout(left, ws.send(msg.clone())).await,
            Ok(Ok(()))
        ) {
            return;
        }
    }
}

/// `conns` connections that complete the handshake, never identify, never
/// read, and write 125-byte pings as fast as TCP takes them until `end`.
pub async fn ping_flood(addr: SocketAddr, conns: usize, end: Instant) {
    let pings: Vec<u8> = (0..1000).flat_map(|_| frame(0x9, &[b'p'; 125])).collect();
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let pings = pings.clone();
        tasks.push(tokio::spawn(async move {
            let mut ws = connect(addr).await;
            let MaybeTlsStream::Plain(tcp) = ws.get_mut() else {
                return;
            };
            while Instant::now() < end {
                let left = end.saturating_duration_since(Instant::now());
                if !matches!(
                    tokio::time::timeout(left, tcp.write_all(&pings)).await,
                    Ok(Ok(()))
                ) {
                    break;
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// A 1-MiB-ish MSG to `#general` of `content_bytes` bytes.
pub fn big_msg(content_bytes: usize, fill: char) -> Message {
    let content: String = std::iter::repeat_n(fill, content_bytes).collect();
    Message::text(json!({"type": "MSG", "to": "#general", "content": content}).to_string())
}
