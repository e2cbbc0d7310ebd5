//! `herdsim live` against servers and channels it does not control: other
//! users talking all the time, and a server that injects frames live did
//! not cause (YIELDs and claims for ids it never saw, a forged operator
//! question, history replays, malformed frames, a flood of 100 kB ids).
//! live must end when its own workload is done, keep all of that out of
//! its metrics (counted in live.csv instead), and stay small.
//!
//! And against a server that is hostile to the connection itself (the
//! tests at the end): one that floods pings and never reads, one that sends
//! junk before WELCOME, one that sends a frame too large. observe and live
//! must end within a stated bound, with the right exit status and message,
//! holding bounded memory.
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

/// How a [`hostile_server`] treats each connection.
#[derive(Debug, Clone, Copy)]
enum Hostility {
    /// WELCOME, JOINED for the first JOIN, then pings as fast as it can,
    /// never reading again (through a 4 kB receive buffer: what the client
    /// sends soon cannot be written).
    FloodPings,
    /// After IDENTIFY, `frames` text frames of `bytes` each, and never a
    /// WELCOME.
    JunkBeforeWelcome { frames: usize, bytes: usize },
    /// WELCOME, JOINED, then one 2 MB frame.
    HugeFrame,
}

/// How long a hostile server lives: it stops by itself after this.
const HOSTILE_LIFE: Duration = Duration::from_secs(90);

/// One connection of a [`hostile_server`].
async fn hostile_conn(tcp: tokio::net::TcpStream, how: Hostility) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
        return;
    };
    // IDENTIFY.
    if !matches!(ws.next().await, Some(Ok(_))) {
        return;
    }
    if let Hostility::JunkBeforeWelcome { frames, bytes } = how {
        let junk = "x".repeat(bytes);
        for _ in 0..frames {
            if ws.send(Message::text(junk.clone())).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(HOSTILE_LIFE).await;
        return;
    }
    let welcome = json!({"type": "WELCOME"}).to_string();
    if ws.send(Message::text(welcome)).await.is_err() {
        return;
    }
    let Some(Ok(Message::Text(join))) = ws.next().await else {
        return;
    };
    let join: serde_json::Value = serde_json::from_str(&join).unwrap_or_default();
    let joined = json!({"type": "JOINED", "channel": join["channel"]}).to_string();
    if ws.send(Message::text(joined)).await.is_err() {
        return;
    }
    match how {
        Hostility::HugeFrame => {
            let _ = ws.send(Message::text("y".repeat(2_000_000))).await;
            tokio::time::sleep(HOSTILE_LIFE).await;
        }
        _ => {
            let ping = Message::Ping(vec![7u8; 125].into());
            while ws.send(ping.clone()).await.is_ok() {}
        }
    }
}

/// A hostile server on loopback, treating every connection `how`, until the
/// returned sender is dropped or [`HOSTILE_LIFE`] has passed; its URL.
fn hostile_server(
    how: Hostility,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, h) = background(move || async move {
        let sock = tokio::net::TcpSocket::new_v4().expect("socket");
        sock.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        sock.bind("127.0.0.1:0".parse().expect("addr"))
            .expect("bind");
        let listener = sock.listen(64).expect("listen");
        addr_tx
            .send(listener.local_addr().expect("addr"))
            .expect("address sent");
        let accept = async {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(hostile_conn(tcp, how));
            }
        };
        tokio::select! {
            () = accept => {}
            () = tokio::time::sleep(HOSTILE_LIFE) => {}
        }
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the hostile server listens");
    (format!("ws://{addr}"), stop, h)
}

/// What a bounded run of herdsim gave: exit code, stderr, how long it ran
/// and its peak RSS (KiB).
struct Ran {
    code: Option<i32>,
    stderr: String,
    took: Duration,
    peak_kb: u64,
}

/// Run herdsim with `args`, reading its peak RSS every 20 ms; SIGINT sent
/// to it once `sigint_after` has passed; killed (and the test failed) after
/// `within`.
fn run_bounded(args: &[&str], within: Duration, sigint_after: Option<Duration>) -> Ran {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("herdsim"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herdsim starts");
    let status = format!("/proc/{}/status", child.id());
    let t0 = Instant::now();
    let mut peak_kb = 0u64;
    let mut signalled = false;
    let code = loop {
        if let Ok(text) = std::fs::read_to_string(&status)
            && let Some(kb) = text
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        if let Ok(Some(st)) = child.try_wait() {
            break st.code();
        }
        if let Some(after) = sigint_after
            && !signalled
            && t0.elapsed() >= after
        {
            signalled = true;
            // SAFETY: sends SIGINT to the child this test started.
            assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
        }
        if t0.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("herdsim {args:?} did not end within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = t0.elapsed();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    eprintln!(
        "herdsim {}: exit {code:?} after {took:?}, peak RSS {peak_kb} KiB",
        args[0]
    );
    Ran {
        code,
        stderr,
        took,
        peak_kb,
    }
}

/// `herdsim observe --no-calibrate` of #general at `url` into `tmp`, with
/// `more` flags.
fn observe_args<'a>(url: &'a str, out: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "observe",
        "--url",
        url,
        "--channel",
        "#general",
        "--no-calibrate",
        "--quiet",
        "--out",
        out,
    ];
    a.extend_from_slice(more);
    a
}

/// observe (recording only, into a temporary folder, killed after 30 s)
/// against a server behaving as `how`: what the run gave, the folder and
/// the server's URL.
fn observe_against(
    how: Hostility,
    more: &[&str],
    sigint_after: Option<Duration>,
) -> (Ran, tempfile::TempDir, String) {
    let (url, stop, h) = hostile_server(how);
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().to_string_lossy().into_owned();
    let r = run_bounded(
        &observe_args(&url, &out, more),
        Duration::from_secs(30),
        sigint_after,
    );
    let _ = stop.send(());
    let _ = h.join();
    (r, tmp, url)
}

/// live of the six-agent scenario at `speed` against a server behaving as
/// `how`, killed after `within`: what the run gave and the server's URL.
fn live_against(
    how: Hostility,
    speed: &str,
    within: Duration,
    sigint_after: Option<Duration>,
) -> (Ran, String) {
    let (url, stop, h) = hostile_server(how);
    let tmp = tempfile::tempdir().expect("tmp");
    let sc = tmp.path().join("s.toml");
    std::fs::write(&sc, SIX).expect("scenario");
    let (sc, out) = (sc.to_string_lossy(), tmp.path().join("out"));
    let out = out.to_string_lossy();
    let r = run_bounded(
        &["live", "--speed", speed, "--url", &url, "--out", &out, &sc],
        within,
        sigint_after,
    );
    let _ = stop.send(());
    let _ = h.join();
    (r, url)
}

/// A server that floods pings and never reads fills observe's socket with
/// its pongs, so observe's own ping cannot be sent: `--duration 5s` still
/// ends it at 5 s (exit 0). Bound: 15 s (5 s, 1 s for a polite close, the
/// rest for a loaded machine); before the fix it waited for the server to
/// go away (here 60 s).
#[test]
fn observe_honours_its_duration_against_a_server_that_never_reads() {
    let (r, tmp, _) = observe_against(Hostility::FloodPings, &["--duration", "5s"], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(15), "took {:?}", r.took);
    let log = read(&tmp.path().join("observe-general/frames.jsonl"));
    assert!(log.contains("the duration was reached"), "{log}");
    assert!(
        r.peak_kb < 100 * 1024,
        "observe's RSS reached {} KiB",
        r.peak_kb
    );
}

/// The same server, and Ctrl-C 4 s in (after observe's first ping, at 2 s,
/// could not be sent): observe stops within 3 s of it, exit 0, its log
/// ended "interrupted".
#[test]
fn observe_honours_ctrl_c_against_a_server_that_never_reads() {
    let (r, tmp, _) = observe_against(Hostility::FloodPings, &[], Some(Duration::from_secs(4)));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(7), "took {:?}", r.took);
    let log = read(&tmp.path().join("observe-general/frames.jsonl"));
    assert!(log.contains("\"reason\":\"interrupted\""), "{log}");
}

/// With no duration, the ping observe cannot send drops the connection
/// after the send timeout (10 s, after the first ping at 2 s): exit 1,
/// saying so. Bound: 30 s.
#[test]
fn observe_drops_a_server_that_never_reads() {
    let (r, _, _) = observe_against(Hostility::FloodPings, &[], None);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("the observation ended early")
            && r.stderr
                .contains("could not be sent within 10 s (the server is not reading)"),
        "{}",
        r.stderr
    );
}

/// Ten 900 kB frames before WELCOME (9 MB, over the 8 MiB held before the
/// handshake ends): observe refuses the server, naming it and the bound,
/// exit 1, having held at most that; no log is left.
#[test]
fn observe_refuses_a_server_that_sends_too_much_before_welcome() {
    let (r, tmp, url) = observe_against(
        Hostility::JunkBeforeWelcome {
            frames: 10,
            bytes: 900_000,
        },
        &[],
        None,
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("{url}: refused"))
            && r.stderr
                .contains("more than 4096 frames or 8 MiB before its handshake ended"),
        "{}",
        r.stderr
    );
    assert!(!tmp.path().join("observe-general").exists());
    assert!(
        r.peak_kb < 100 * 1024,
        "observe's RSS reached {} KiB",
        r.peak_kb
    );
}

/// A 2 MB frame after JOINED: over the 1 MiB live and observe read; observe
/// ends saying so (exit 1).
#[test]
fn observe_refuses_a_frame_over_its_limit() {
    let (r, _, _) = observe_against(Hostility::HugeFrame, &[], None);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("a frame larger than 1 MiB, the largest herdsim reads"),
        "{}",
        r.stderr
    );
}

/// live against a server that floods pings and never reads: its socket
/// fills with live's pongs, the operator's posts (every 5 s at --speed
/// 0.2) cannot be sent, and the connection is dropped after the send
/// timeout (10 s): exit 1 naming why, within 60 s (the last post is at
/// 30 s; the rest for a loaded machine), in bounded memory.
#[test]
fn live_drops_a_server_that_never_reads() {
    let (r, _) = live_against(Hostility::FloodPings, "0.2", Duration::from_secs(60), None);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("the connection of operator ended: a frame could not be sent within 10 s (the server is not reading)"),
        "{}",
        r.stderr
    );
    assert!(
        r.peak_kb < 200 * 1024,
        "live's RSS reached {} KiB",
        r.peak_kb
    );
}

/// The same server, and Ctrl-C 3 s in: live stops within 3 s of it, exit
/// 130 (interrupted).
#[test]
fn live_honours_ctrl_c_against_a_server_that_never_reads() {
    let (r, _) = live_against(
        Hostility::FloodPings,
        "0.2",
        Duration::from_secs(30),
        Some(Duration::from_secs(3)),
    );
    assert_eq!(r.code, Some(130), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(6), "took {:?}", r.took);
}

/// live against a server that sends 5 000 frames before WELCOME: refused
/// (more than the 4096 frames held before the handshake ends), exit 1,
/// naming the server and the bound.
#[test]
fn live_refuses_a_server_that_sends_too_much_before_welcome() {
    let (r, url) = live_against(
        Hostility::JunkBeforeWelcome {
            frames: 5000,
            bytes: 10,
        },
        "1",
        Duration::from_secs(30),
        None,
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("{url}: refused"))
            && r.stderr
                .contains("more than 4096 frames or 8 MiB before its handshake ended"),
        "{}",
        r.stderr
    );
}

/// A server that never sends WELCOME, and Ctrl-C 2 s in: observe stops
/// waiting for its handshake (bounded at 10 s) within 2 s of it, exit 1,
/// saying nothing was recorded.
#[test]
fn observe_honours_ctrl_c_during_the_handshake() {
    let (r, tmp, _) = observe_against(
        Hostility::JunkBeforeWelcome {
            frames: 0,
            bytes: 0,
        },
        &[],
        Some(Duration::from_secs(2)),
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(4), "took {:?}", r.took);
    assert!(
        r.stderr
            .contains("interrupted before WELCOME/JOINED: nothing was recorded"),
        "{}",
        r.stderr
    );
    assert!(!tmp.path().join("observe-general").exists());
}
