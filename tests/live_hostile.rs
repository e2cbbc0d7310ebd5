//! `herdsim live` against servers and channels it does not control: other
//! users talking all the time, and a server that injects frames live did
//! not cause (YIELDs and claims for ids it never saw, a forged operator
//! question, history replays, malformed frames, a flood of 100 kB ids).
//! live must end when its own workload is done, keep all of that out of
//! its metrics (counted in live.csv instead), and stay small.
//!
//! Every peer here is on loopback, bounded in count and in time.

mod hostile;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

/// Six questions, everyone answers at once, nobody claims (`none`): the
/// outcome depends on no timing (every agent answers every question).
const SIX: &str = r#"
name = "six"
seed = 3
reps = 1
policies = ["none"]
[[agents]]
count = 5
respond_p = 1.0
csma = { kind = "fixed", ms = 0 }
inference = { kind = "fixed", ms = 300 }
[workload]
arrivals = "fixed"
mean_gap_ms = 1000
count = 6
"#;

/// `herdsim serve --policy spec` (no frame-rate limit) on an ephemeral
/// loopback port, and its URL.
fn spawn_serve() -> (hostile::Server, String) {
    let server = hostile::Server::spawn(&["--rate-limit", "0"]);
    let url = format!("ws://{}", server.addr);
    (server, url)
}

/// A thread with a runtime of its own running `f` until the returned
/// sender is dropped or sent to.
fn background<F, Fut>(
    f: F,
) -> (
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let h = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            tokio::select! {
                () = f() => {}
                _ = rx => {}
            }
        });
    });
    (tx, h)
}

/// `herdsim live` of `scenario` against `url`, its peak RSS (`VmHWM`) read
/// from /proc while it runs (every 20 ms): (exit ok, stdout+stderr, peak
/// RSS in KiB, the results folder).
fn live(
    url: &str,
    speed: &str,
    scenario: &str,
    tmp: &Path,
) -> (bool, String, u64, std::path::PathBuf) {
    let sc = tmp.join("s.toml");
    std::fs::write(&sc, scenario).expect("scenario");
    let out = tmp.join("out");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("herdsim"))
        .args(["live", "--speed", speed, "--url", url, "--out"])
        .arg(&out)
        .arg(&sc)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("live starts");
    let status = format!("/proc/{}/status", child.id());
    let t0 = Instant::now();
    let mut peak = 0u64;
    let status_ok = loop {
        if let Ok(text) = std::fs::read_to_string(&status)
            && let Some(kb) = text
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        {
            peak = peak.max(kb);
        }
        if let Ok(Some(st)) = child.try_wait() {
            break st.success();
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            let mut text = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut text);
            }
            panic!("live did not end within 120 s: {text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // (Its output is a few lines: the pipes never fill.)
    let mut text = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut text);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut text);
    }
    (status_ok, text, peak, out.join("six-live"))
}

/// Column `name` of the first data row of a CSV.
fn col(csv: &str, name: &str) -> String {
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    let i = r
        .headers()
        .expect("header")
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    let row = r.records().next().expect("a row").expect("row");
    row[i].to_string()
}

/// Column `name` of the first data row of a CSV, as a number.
fn num(csv: &str, name: &str) -> f64 {
    let v = col(csv, name);
    v.parse().unwrap_or_else(|_| panic!("{name}: {v}"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Someone else posts in #general every 100 ms for as long as the test
/// lasts (a busy public channel): live still ends once its own workload is
/// done, and their messages are counted, never measured.
#[test]
fn live_ends_while_others_talk() {
    let (_server, url) = spawn_serve();
    let chat_url = url.clone();
    let (stop, chatter) = background(move || async move {
        let Ok((mut ws, _)) = tokio_tungstenite::connect_async(chat_url.as_str()).await else {
            return;
        };
        let hello = json!({"type": "IDENTIFY", "name": "someone-else"}).to_string();
        let join = json!({"type": "JOIN", "channel": "#general"}).to_string();
        let _ = ws.send(Message::text(hello)).await;
        let _ = ws.send(Message::text(join)).await;
        let (mut sink, mut stream) = ws.split();
        tokio::spawn(async move { while stream.next().await.is_some() {} });
        for i in 0.. {
            let m = json!({"type": "MSG", "id": format!("chat-{i}"), "to": "#general",
                "content": format!("chatter {i}")});
            if sink.send(Message::text(m.to_string())).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let tmp = tempfile::tempdir().expect("tmp");
    let (ok, text, _, dir) = live(&url, "20", SIX, tmp.path());
    let _ = stop.send(());
    let _ = chatter.join();
    assert!(ok, "{text}");
    let runs = read(&dir.join("runs.csv"));
    assert_eq!(num(&runs, "messages"), 6.0, "{runs}");
    assert_eq!(num(&runs, "responses_per_msg"), 5.0, "{runs}");
    let l = read(&dir.join("live.csv"));
    assert!(num(&l, "foreign_msgs") > 0.0, "{l}");
    // Ended on its own traffic going quiet, not at the grace.
    assert_eq!(col(&l, "ended"), "done", "{l}");
}

/// A proxy between live and a real `herdsim serve` that forwards both ways
/// and, every 10 ms, injects into what live receives: YIELD, FLOOR_CLAIMED
/// and RESPONDING_TO for ids live never saw (and a new 100 kB id every
/// 100 ms), a
/// YIELD for a question nobody claimed, a forged question "from the
/// operator", a stranger's message, a replayed copy, and frames that are
/// not JSON objects. Under `none` nobody claims: the metrics must be those
/// of a quiet server (6 questions, 5 answers each, no YIELD), the injected
/// traffic counted in live.csv, and live's memory and trace stay small.
#[test]
fn a_server_that_injects_frames_fools_nobody() {
    let (_server, upstream) = spawn_serve();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let (stop, proxy) = background(move || async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
        while let Ok((tcp, _)) = listener.accept().await {
            let up = upstream.clone();
            tokio::spawn(async move {
                let Ok(client) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                let Ok((server, _)) = tokio_tungstenite::connect_async(up.as_str()).await else {
                    return;
                };
                let (mut c_sink, mut c_stream) = client.split();
                let (mut s_sink, mut s_stream) = server.split();
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
                let inject = tx.clone();
                tokio::spawn(async move {
                    while let Some(Ok(m)) = c_stream.next().await {
                        if s_sink.send(m).await.is_err() {
                            break;
                        }
                    }
                });
                tokio::spawn(async move {
                    while let Some(Ok(Message::Text(t))) = s_stream.next().await {
                        if tx.send(t.to_string()).is_err() {
                            break;
                        }
                    }
                });
                tokio::spawn(async move {
                    let big = "x".repeat(100_000);
                    for i in 0u64.. {
                        let frames = [
                            json!({"type": "YIELD", "msg_id": format!("ghost-{i}"),
                                "channel": "#general", "winner": "agent-001"})
                            .to_string(),
                            json!({"type": "FLOOR_CLAIMED", "msg_id": format!("ghost-{i}"),
                                "channel": "#general", "holder": "agent-002", "started_at": 1})
                            .to_string(),
                            json!({"type": "RESPONDING_TO", "msg_id": format!("ghost-{i}"),
                                "from": "agent-003", "started_at": 5, "channel": "#general"})
                            .to_string(),
                            // A new 100 kB id every 100 ms.
                            if i % 10 == 0 {
                                json!({"type": "FLOOR_CLAIMED", "msg_id": format!("{big}{i}"),
                                    "channel": "#general", "holder": "agent-002", "started_at": 1})
                                .to_string()
                            } else {
                                "{}".to_string()
                            },
                            json!({"type": "YIELD", "msg_id": "m0", "channel": "#general",
                                "winner": "agent-004"})
                            .to_string(),
                            json!({"type": "MSG", "id": format!("forged-{i}"), "from": "operator",
                                "to": "#general", "content": "question 999"})
                            .to_string(),
                            json!({"type": "MSG", "id": format!("x-{i}"), "from": "stranger",
                                "to": "#general", "content": "hello"})
                            .to_string(),
                            json!({"type": "MSG", "id": "m0", "from": "operator",
                                "to": "#general", "content": "question 0", "replay": true})
                            .to_string(),
                            "null".to_string(),
                            "[1, 2]".to_string(),
                            "{not json".to_string(),
                        ];
                        for f in frames {
                            if inject.send(f).is_err() {
                                return;
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                });
                while let Some(t) = rx.recv().await {
                    if c_sink.send(Message::text(t)).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let tmp = tempfile::tempdir().expect("tmp");
    // Speed 2: six seconds of injection, sixty 100 kB ids.
    let (ok, text, peak_kb, dir) = live(&url, "2", SIX, tmp.path());
    eprintln!("live's peak RSS: {peak_kb} KiB");
    let _ = stop.send(());
    let _ = proxy.join();
    assert!(ok, "{text}");
    let runs = read(&dir.join("runs.csv"));
    let l = read(&dir.join("live.csv"));
    let runs = format!("{runs}\n{l}\n{text}");
    assert_eq!(num(&runs, "messages"), 6.0, "{runs}");
    assert_eq!(num(&runs, "responses_per_msg"), 5.0, "{runs}");
    assert_eq!(num(&runs, "duplicate_rate"), 1.0, "{runs}");
    assert_eq!(num(&runs, "yields"), 0.0, "{runs}");
    assert_eq!(num(&runs, "claims"), 0.0, "{runs}");
    let l = read(&dir.join("live.csv"));
    for c in [
        "foreign_floor",
        "foreign_msgs",
        "malformed_frames",
        "replays_skipped",
    ] {
        assert!(num(&l, c) > 0.0, "{c}: {l}");
    }
    assert_eq!(num(&l, "posts"), 6.0, "{l}");
    assert_eq!(num(&l, "posts_accepted"), 6.0, "{l}");
    // A few MB of traffic a second went by: live kept none of it.
    let trace = std::fs::metadata(dir.join("trace.jsonl"))
        .expect("trace")
        .len();
    assert!(trace < 1 << 20, "trace of {trace} bytes");
    assert!(peak_kb < 200 * 1024, "live's RSS reached {peak_kb} KiB");
}
