//! `herdsim live` against the real agentchat wire, replayed. Two sessions
//! were recorded frame by frame between `herdsim live --keyed` and a real
//! agentchat 0.36 server (tests/data/agentchat-wire/README.md). A fake
//! server here plays the server's side of a recording to a live run, in the
//! recorded order: it answers each connection's handshake when the client
//! sends it, and releases what followed each of the operator's posts when
//! live's operator posts (its content put in place of the recorded one, as
//! a server echoes what a client sent). Everything else live's agents send
//! is drained and ignored: the server's side is the recording's.
//!
//! live must then count, per replication, exactly what the recording
//! holds: posts relayed and refused, claims announced, YIELDs, answers,
//! replayed history, server notices and presence frames. (What live's own
//! agents decide is not compared: their timing is real, the recording's
//! server does not react to them.)

use assert_cmd::Command;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// One recorded frame.
#[derive(Debug, Clone)]
struct Rec {
    conn: usize,
    up: bool,
    v: Value,
}

impl Rec {
    fn ty(&self) -> &str {
        self.v["type"].as_str().unwrap_or("")
    }
}

fn load(name: &str) -> Vec<Rec> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/agentchat-wire")
        .join(format!("{name}.jsonl.gz"));
    let bytes = std::fs::read(&path).expect("recording");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .expect("gzip");
    text.lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).expect("a recorded line");
            Rec {
                conn: r["conn"].as_u64().expect("conn") as usize,
                up: r["dir"] == "up",
                v: serde_json::from_str(r["frame"].as_str().expect("frame")).expect("frame json"),
            }
        })
        .collect()
}

/// The replications of a recording: the connections from one operator's
/// IDENTIFY to the next, each cut where its first AGENT_LEFT comes (the
/// recorded live closing its connections at the end: nobody reads those).
fn replications(recs: &[Rec]) -> Vec<Vec<Rec>> {
    let mut reps: Vec<Vec<Rec>> = Vec::new();
    let mut closed = false;
    for r in recs {
        if r.up && r.ty() == "IDENTIFY" && r.v["name"] == "operator" {
            reps.push(Vec::new());
            closed = false;
        }
        closed |= !r.up && r.ty() == "AGENT_LEFT";
        if !closed && let Some(rep) = reps.last_mut() {
            rep.push(r.clone());
        }
    }
    reps
}

/// What live must count in one replication (`live.csv`'s columns).
fn expected(rep: &[Rec]) -> BTreeMap<&'static str, u64> {
    let op = rep[0].conn;
    let op_id = rep
        .iter()
        .find(|r| r.conn == op && r.ty() == "WELCOME")
        .and_then(|r| r.v["agent_id"].as_str())
        .expect("the operator's WELCOME")
        .to_string();
    let mut e: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut joined: BTreeMap<usize, u64> = BTreeMap::new();
    for r in rep {
        let on_op = r.conn == op;
        if r.up {
            if on_op && r.ty() == "MSG" {
                *e.entry("posts").or_default() += 1;
            }
            continue;
        }
        let replay = r.v["replay"] == Value::Bool(true);
        let key = match r.ty() {
            "CHALLENGE" | "WELCOME" => None,
            "JOINED" => {
                let n = joined.entry(r.conn).or_default();
                *n += 1;
                (*n > 1).then_some("presence_frames")
            }
            _ if replay => Some("replays_skipped"),
            "MSG" if r.v["from"] == "@server" => Some("notices_skipped"),
            "MSG" if on_op && r.v["from"] == op_id.as_str() => Some("posts_accepted"),
            "MSG" if on_op && r.v["in_reply_to"].is_string() => Some("answers_seen"),
            "MSG" => Some("msgs"),
            "ERROR" if on_op => Some("posts_refused"),
            "ERROR" => Some("agent_errors"),
            "FLOOR_CLAIMED" | "RESPONDING_TO" if on_op => Some("announced_claims"),
            "FLOOR_CLAIMED" | "RESPONDING_TO" => Some("claims"),
            "YIELD" => Some("yields_received"),
            "AGENT_JOINED" | "AGENT_LEFT" | "LEFT" => Some("presence_frames"),
            _ => Some("other_frames"),
        };
        if let Some(k) = key {
            *e.entry(k).or_default() += 1;
            *e.entry("frames").or_default() += 1;
        }
    }
    e
}

/// Frames a client sent, by connection and type, not yet consumed.
#[derive(Default)]
struct Inbox {
    q: BTreeMap<(usize, String), VecDeque<Value>>,
}

/// Play `reps` on `listener`: the k-th connection accepted is recorded
/// connection k (of the first replication played, counted from there).
async fn play(
    listener: tokio::net::TcpListener,
    reps: Vec<Vec<Rec>>,
    done: tokio::sync::oneshot::Receiver<()>,
) {
    let first = reps[0][0].conn;
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<(usize, Value)>();
    let (conn_tx, mut conn_rx) =
        mpsc::unbounded_channel::<(usize, mpsc::UnboundedSender<String>)>();
    tokio::spawn(async move {
        let mut k = first;
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                continue;
            };
            let (mut sink, mut stream) = ws.split();
            let (tx, mut rx) = mpsc::unbounded_channel::<String>();
            let _ = conn_tx.send((k, tx));
            tokio::spawn(async move {
                while let Some(t) = rx.recv().await {
                    if sink.send(Message::text(t)).await.is_err() {
                        break;
                    }
                }
            });
            let ev = ev_tx.clone();
            tokio::spawn(async move {
                while let Some(Ok(m)) = stream.next().await {
                    if let Message::Text(t) = m
                        && let Ok(v) = serde_json::from_str::<Value>(&t)
                    {
                        let _ = ev.send((k, v));
                    }
                }
            });
            k += 1;
        }
    });
    let mut writers: BTreeMap<usize, mpsc::UnboundedSender<String>> = BTreeMap::new();
    let mut inbox = Inbox::default();
    // Recorded post content -> what live's operator posted in its place.
    let mut content: BTreeMap<String, String> = BTreeMap::new();
    for rec in reps.iter().flatten() {
        if rec.up {
            let operator_post = rec.ty() == "MSG" && rec.conn == operator_of(&reps, rec.conn);
            let gate = matches!(rec.ty(), "IDENTIFY" | "VERIFY_IDENTITY" | "JOIN") || operator_post;
            if !gate {
                continue;
            }
            let key = (rec.conn, rec.ty().to_string());
            let sent = loop {
                if let Some(v) = inbox.q.get_mut(&key).and_then(VecDeque::pop_front) {
                    break v;
                }
                let ev = tokio::time::timeout(Duration::from_secs(60), ev_rx.recv())
                    .await
                    .unwrap_or_else(|_| panic!("live never sent {key:?}"))
                    .expect("readers");
                inbox
                    .q
                    .entry((ev.0, ev.1["type"].as_str().unwrap_or("").to_string()))
                    .or_default()
                    .push_back(ev.1);
            };
            if operator_post {
                let (Some(was), Some(now)) = (rec.v["content"].as_str(), sent["content"].as_str())
                else {
                    panic!("a post without content: {sent}");
                };
                content.insert(was.to_string(), now.to_string());
            }
            continue;
        }
        while !writers.contains_key(&rec.conn) {
            let (k, tx) = tokio::time::timeout(Duration::from_secs(60), conn_rx.recv())
                .await
                .expect("a connection")
                .expect("the acceptor");
            writers.insert(k, tx);
        }
        let mut v = rec.v.clone();
        if v["type"] == "MSG"
            && v["from"] != "@server"
            && let Some(c) = v["content"].as_str().and_then(|c| content.get(c))
        {
            v["content"] = Value::String(c.clone());
        }
        let _ = writers[&rec.conn].send(v.to_string());
    }
    // Everything played: keep the connections open until live is done.
    eprintln!("the fake server played the whole recording");
    let _ = done.await;
}

/// The operator's connection of the replication that holds `conn`.
fn operator_of(reps: &[Vec<Rec>], conn: usize) -> usize {
    reps.iter()
        .map(|r| r[0].conn)
        .filter(|&op| op <= conn)
        .max()
        .unwrap_or(0)
}

/// Replay `name` to a live run of `scenario` (`posts` per replication) and
/// compare live.csv with what the recording holds.
fn replay(name: &str, scenario: &str, reps_wanted: usize) {
    let recs = load(name);
    let reps: Vec<Vec<Rec>> = replications(&recs).into_iter().take(reps_wanted).collect();
    assert_eq!(
        reps.len(),
        reps_wanted,
        "{name} has {reps_wanted} replications"
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let played = reps.clone();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    // The fake server on a thread of its own, with its own runtime.
    let player = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            play(listener, played, done_rx).await;
        });
    });
    let tmp = tempfile::tempdir().expect("tmp");
    let sc = tmp.path().join("s.toml");
    std::fs::write(&sc, scenario).expect("scenario");
    let out = tmp.path().join("out");
    let o = Command::cargo_bin("herdsim")
        .expect("binary")
        .args([
            "live",
            "--keyed",
            "--policy",
            "agentchat-0.36",
            "--speed",
            "2000",
            "--url",
        ])
        .arg(&url)
        .arg("--key-file")
        .arg(tmp.path().join("key"))
        .arg("--reps")
        .arg(reps_wanted.to_string())
        .arg("--out")
        .arg(&out)
        .arg(&sc)
        .timeout(Duration::from_secs(300))
        .output()
        .expect("live runs");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let _ = done_tx.send(());
    if !o.status.success() {
        // Told to stop, the fake server ends at once unless it is stuck;
        // if it panicked, its message says why live failed.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !player.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    if !o.status.success() && player.is_finished() {
        let why = player.join().err().map(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        });
        panic!("live failed: {stderr}\nthe fake server: {why:?}");
    }
    assert!(o.status.success(), "{stderr}");
    // The player went through the whole recording (it panics on a frame
    // live never sent, and ends only after the last one).
    player.join().expect("the fake server played everything");
    let dir = std::fs::read_dir(&out)
        .expect("out")
        .next()
        .expect("a results folder")
        .expect("entry")
        .path();
    let live = std::fs::read_to_string(dir.join("live.csv")).expect("live.csv");
    let mut rows = csv::Reader::from_reader(live.as_bytes());
    let head = rows.headers().expect("header").clone();
    let got: Vec<BTreeMap<String, String>> = rows
        .records()
        .map(|r| {
            let r = r.expect("row");
            head.iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect();
    assert_eq!(got.len(), reps_wanted, "{live}");
    for (i, (rep, row)) in reps.iter().zip(&got).enumerate() {
        let e = expected(rep);
        eprintln!("{name} replication {i}: {e:?}");
        let n = |k: &str| {
            row[k]
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{k}: {}", row[k]))
        };
        let want = |k: &str| e.get(k).copied().unwrap_or(0);
        for k in [
            "posts_accepted",
            "posts_refused",
            "announced_claims",
            "yields_received",
            "answers_seen",
            "agent_errors",
            "replays_skipped",
            "notices_skipped",
            "presence_frames",
            "frames",
        ] {
            assert_eq!(
                n(k),
                want(k),
                "{name} replication {i}: {k}\n{live}\n{stderr}"
            );
        }
        // Nothing of the recording is foreign, malformed or dropped.
        for k in [
            "foreign_msgs",
            "foreign_floor",
            "malformed_frames",
            "dropped_frames",
        ] {
            assert_eq!(n(k), 0, "{name} replication {i}: {k}\n{live}");
        }
        // Every recorded post was matched to one of live's; a recording
        // cut short leaves live's extra posts unconfirmed.
        assert_eq!(n("posts") - n("posts_unconfirmed"), want("posts"), "{live}");
        assert!(want("answers_seen") > 0 && want("announced_claims") > 0);
    }
}

/// The default scenario, 40 questions, 3 replications at speed 20: the
/// operator's posts refused for agentchat's rate limit, later
/// replications' agents sent the earlier ones' messages as replays,
/// joins and leaves announced. (The recording ends before the third
/// replication's last post: live's 40th post there goes unconfirmed.)
#[test]
fn the_recorded_default_session_is_counted_as_recorded() {
    replay(
        "default-3reps",
        r#"
name = "default-3reps"
seed = 1
[[agents]]
count = 5
[workload]
count = 40
"#,
        3,
    );
}

/// Claims expiring under a 1 s TTL: FLOOR_CLAIMED, YIELD ("Another agent
/// claimed first") and duplicate answers.
#[test]
fn the_recorded_expiry_session_is_counted_as_recorded() {
    replay(
        "expiry-ttl1s",
        r#"
name = "expiry-ttl1s"
seed = 1
[server]
ttl_ms = 1000
[[agents]]
count = 5
[workload]
arrivals = "fixed"
mean_gap_ms = 12000
count = 20
"#,
        2,
    );
}
