//! `herdsim serve` against hostile clients, one test per break of issue 22
//! (docs/serve.md, "Limits and what a hostile client can do"): a ping
//! flood that never reads, sockets that hold every connection slot, huge
//! names, channels and ids, a fan-out to members that never read (and the
//! whole-server memory ceiling), `--log` filling the disk, and floor
//! squatting.
//!
//! Each test spawns the binary on an ephemeral loopback port and runs one
//! attack from loopback, bounded in connections and in time (a few
//! seconds). During the attack a fresh client must be served (connect,
//! IDENTIFY, JOIN, JOINED) within 2 s, every time it tries: a liveness
//! bound, not a speed measurement. At the end the server's peak resident
//! memory (`VmHWM` in `/proc/PID/status`) must be under [`RSS_BOUND_KIB`]
//! and the server must stop cleanly on SIGTERM.
//!
//! The bound: an idle server holds about 10 MiB; the attacks below, which
//! would have taken it to gigabytes before the limits, leave it under
//! 40 MiB on the machines this was measured on (docs/serve.md). The bound
//! is 160 MiB: far below what any of these attacks cost unbounded, with
//! room for allocator and machine differences.

#![cfg(target_os = "linux")]

mod hostile;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use hostile::{
    Server, WAIT, attack, big_msg, connect, join, named, next, ping_flood, send, send_until, until,
};
use serde_json::{Value, json};
use std::process::Command;
use tokio_tungstenite::MaybeTlsStream;
use tokio_tungstenite::tungstenite::Message;

/// Peak resident memory allowed to the server in every attack, KiB.
const RSS_BOUND_KIB: u64 = 160 * 1024;
/// How long a fresh client may take to be served during an attack.
const SERVED_WITHIN: Duration = Duration::from_secs(2);

/// Check the server's peak memory against the bound, then stop it with
/// SIGTERM: its exit code and stderr.
fn stop(srv: Server) -> (Option<i32>, String) {
    let rss = srv.peak_rss_kib();
    assert!(
        rss < RSS_BOUND_KIB,
        "peak RSS {rss} KiB over the bound of {RSS_BOUND_KIB} KiB\n{}",
        srv.stderr_text()
    );
    eprintln!("server peak RSS: {rss} KiB");
    srv.terminate()
}

/// A fresh client is served: connect, IDENTIFY, JOIN, JOINED, within
/// [`SERVED_WITHIN`]; panics otherwise.
async fn fresh_client_served(addr: SocketAddr, name: String) {
    let served = tokio::time::timeout(SERVED_WITHIN, async {
        let mut ws = named(addr, &name).await;
        join(&mut ws, "#fresh").await;
        let _ = ws.close(None).await;
    })
    .await;
    assert!(
        served.is_ok(),
        "fresh client `{name}` not served within {SERVED_WITHIN:?} during the attack"
    );
}

/// Fresh clients, one after another, until `attack` finishes (and at
/// least three): each must be served within 2 s.
async fn served_during(addr: SocketAddr, attack: std::thread::JoinHandle<()>) {
    let mut n = 0;
    while !attack.is_finished() || n < 3 {
        n += 1;
        fresh_client_served(addr, format!("fresh-{n}")).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    attack.join().expect("the attack does not panic");
}

/// The server stopped cleanly (exit 0) and reports its summary.
fn stopped_ok(code: Option<i32>, stderr: &str) {
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("herdsim serve: stopped"), "{stderr}");
}

/// Ping flood without reading: 8 connections complete the handshake,
/// never identify, never read, and write 125-byte pings as fast as TCP
/// takes them for 3 s. Before the limits every pong was buffered (200
/// MiB/s, then an abort). Now a ping over the frame rate is not read
/// until a token is back, and a pong waits in a write buffer bounded by
/// one largest message (tungstenite keeps one pending pong, not one per
/// ping).
#[tokio::test]
async fn a_ping_flood_that_never_reads_costs_nothing_and_others_are_served() {
    let srv = Server::spawn(&[]);
    let addr = srv.addr;
    let attack = attack(async move {
        ping_flood(addr, 8, Instant::now() + Duration::from_secs(3)).await;
    });
    served_during(addr, attack).await;
    let (code, stderr) = stop(srv);
    stopped_ok(code, &stderr);
}

/// Lock-out: `--max-connections` sockets finish the handshake and send
/// nothing. A fresh client takes the place of the oldest of them (it is
/// closed at once), and each of them is closed by the identify deadline
/// anyway; an identified client that neither sends nor reads (so never
/// answers the server's ping) is closed by the idle timeout.
#[tokio::test]
async fn sockets_that_hold_every_slot_cannot_lock_a_client_out() {
    let srv = Server::spawn(&[
        "--max-connections",
        "32",
        "--identify-timeout-ms",
        "3000",
        "--idle-timeout-ms",
        "1000",
    ]);
    let addr = srv.addr;
    let mut idle = Vec::new();
    for _ in 0..32 {
        idle.push(connect(addr).await);
    }
    // Every slot is held by a socket that has not identified.
    for i in 0..5 {
        fresh_client_served(addr, format!("fresh-{i}")).await;
    }
    // The identify deadline closes the rest (within the 3 s deadline plus
    // a second's closing handshake).
    let mut still_open = 0;
    for mut ws in idle.drain(..) {
        let end = tokio::time::timeout(WAIT, async {
            loop {
                match ws.next().await {
                    None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                    Some(Ok(_)) => {}
                }
            }
        })
        .await;
        if end.is_err() {
            still_open += 1;
        }
    }
    assert_eq!(still_open, 0, "sockets that never identified stayed open");
    // A silent identified client that does not read: pinged at 500 ms,
    // closed at 1000 ms.
    let ws = named(addr, "silent").await;
    let tcp_closed = tokio::time::timeout(WAIT, async move {
        // Not reading on the WebSocket: wait for the peer to close the
        // TCP connection by polling the raw socket for EOF.
        let mut ws = ws;
        let tcp = match ws.get_mut() {
            MaybeTlsStream::Plain(s) => s,
            _ => return,
        };
        let mut buf = [0u8; 4096];
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            match tokio::io::AsyncReadExt::read(tcp, &mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(tcp_closed.is_ok(), "a silent client was never closed");
    let (code, stderr) = stop(srv);
    stopped_ok(code, &stderr);
    assert!(stderr.contains("evicted before identifying"), "{stderr}");
}

/// Memory by bytes, not frames: names, channels, message ids and keys of
/// 300 KB, sent for 3 s (at most 400 frames). Each is refused by the
/// session layer with `ERROR INVALID_MSG` naming the field and the flag;
/// none reaches the floor, so nothing of it is kept. Ids at the limit
/// pass.
#[tokio::test]
async fn huge_names_channels_and_ids_are_refused_and_cost_nothing() {
    let srv = Server::spawn(&["--rate-limit", "0"]);
    let addr = srv.addr;
    // At the limits: accepted.
    let mut ok = named(addr, &"n".repeat(32)).await;
    join(&mut ok, &format!("#{}", "c".repeat(31))).await;
    let long_ok = "m".repeat(128);
    send(
        &mut ok,
        &json!({"type": "MSG", "to": format!("#{}", "c".repeat(31)), "content": "hi", "id": long_ok}),
    )
    .await;
    join(&mut ok, "#sync").await;
    let attack = attack(async move {
        let big = "x".repeat(300_000);
        let frames = [
            json!({"type": "JOIN", "channel": format!("#{big}")}),
            json!({"type": "RESPONDING_TO", "msg_id": big, "started_at": 5, "channel": "#general"}),
            json!({"type": "MSG", "to": "#general", "content": "x", "id": big}),
            json!({"type": "MSG", "to": "#general", "content": "x", "in_reply_to": big}),
            json!({"type": "MSG", "to": format!("#{big}"), "content": "x"}),
            json!({"type": "MSG", "to": format!("@{big}"), "content": "x"}),
            json!({"type": "LEAVE", "channel": format!("#{big}")}),
        ];
        let mut ws = named(addr, "attacker").await;
        join(&mut ws, "#general").await;
        let mut pre = connect(addr).await;
        let end = Instant::now() + Duration::from_secs(3);
        let mut sent = 0;
        while Instant::now() < end && sent < 400 {
            let f = &frames[sent % frames.len()];
            send(&mut ws, f).await;
            let e = next(&mut ws).await;
            assert_eq!(e["type"], "ERROR", "{e}");
            assert_eq!(e["code"], "INVALID_MSG", "{e}");
            let m = e["message"].as_str().unwrap_or("");
            assert!(m.contains("--max-"), "{m}");
            sent += 1;
            if sent % 5 == 0 {
                // Before IDENTIFY: a huge name and a huge key.
                send(&mut pre, &json!({"type": "IDENTIFY", "name": big})).await;
                assert_eq!(next(&mut pre).await["code"], "INVALID_MSG");
                let key = json!({"type": "IDENTIFY", "name": "k", "pubkey": big});
                send(&mut pre, &key).await;
                assert_eq!(next(&mut pre).await["code"], "INVALID_MSG");
            }
        }
        // 300 KB frames at the default 1 MiB/s byte rate (2 MiB burst).
        assert!(sent >= 5, "only {sent} frames went through");
    });
    served_during(addr, attack).await;
    let (code, stderr) = stop(srv);
    stopped_ok(code, &stderr);
}

/// Fan-out to members that never read: 8 members of `#general` stop
/// reading, and one sender posts 256 KiB messages as fast as the server
/// reads them (byte-rate limit off) for 4 s. Each non-reader is dropped
/// once 4 MiB are queued for it (or a write stalls 10 s); a relay is
/// encoded once for all its recipients.
#[tokio::test]
async fn a_fan_out_to_non_readers_drops_them_and_memory_stays_bounded() {
    let srv = Server::spawn(&["--byte-rate-limit", "0", "--rate-limit", "0"]);
    let addr = srv.addr;
    let mut readers_off = Vec::new();
    for i in 0..8 {
        let mut ws = named(addr, &format!("sink-{i}")).await;
        join(&mut ws, "#general").await;
        readers_off.push(ws);
    }
    let attack = attack(async move {
        let mut ws = named(addr, "sender").await;
        join(&mut ws, "#general").await;
        let end = Instant::now() + Duration::from_secs(4);
        send_until(&mut ws, &big_msg(256 * 1024, 'y'), end, || false).await;
    });
    served_during(addr, attack).await;
    drop(readers_off);
    let (code, stderr) = stop(srv);
    stopped_ok(code, &stderr);
    let slow: u64 = stderr
        .split(" dropped as too slow")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(slow >= 1, "no non-reader was dropped:\n{stderr}");
}

/// The whole-server memory ceiling: with a per-connection queue bound far
/// above it (64 MiB each), 6 non-readers fill the server past an 8 MiB
/// ceiling, and it drops the connection holding the most rather than
/// growing or aborting.
#[tokio::test]
async fn the_memory_ceiling_sheds_the_heaviest_connection() {
    let srv = Server::spawn(&[
        "--byte-rate-limit",
        "0",
        "--rate-limit",
        "0",
        "--max-queued-bytes",
        "67108864",
        "--max-memory-mb",
        "8",
    ]);
    let addr = srv.addr;
    let mut sinks = Vec::new();
    for i in 0..6 {
        let mut ws = named(addr, &format!("sink-{i}")).await;
        join(&mut ws, "#general").await;
        sinks.push(ws);
    }
    let stderr = Arc::clone(&srv.stderr);
    let attack = attack(async move {
        let mut ws = named(addr, "sender").await;
        join(&mut ws, "#general").await;
        let shed = || {
            stderr
                .lock()
                .map(|v| v.iter().any(|l| l.contains("memory ceiling")))
                .unwrap_or(false)
        };
        let end = Instant::now() + Duration::from_secs(6);
        send_until(&mut ws, &big_msg(512 * 1024, 'z'), end, shed).await;
    });
    served_during(addr, attack).await;
    drop(sinks);
    let (code, stderr) = stop(srv);
    stopped_ok(code, &stderr);
    assert!(stderr.contains("memory ceiling"), "{stderr}");
}

/// `--log` filling the disk: a client posts 10 KB messages (at most 2000,
/// for at most 3 s) into a log capped at 200 000 bytes. Logging stops at
/// the cap with a message on stderr at once; the file stays under the cap
/// and replays through `herdsim arbitrate`; the server goes on serving and
/// exits 1 at the end, saying why.
#[tokio::test]
async fn a_log_that_would_fill_the_disk_stops_at_its_cap_and_replays() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("session.jsonl");
    let log_arg = log.to_str().expect("utf-8").to_string();
    let srv = Server::spawn(&[
        "--log",
        &log_arg,
        "--log-max-bytes",
        "200000",
        "--rate-limit",
        "0",
    ]);
    let addr = srv.addr;
    let attack = attack(async move {
        let mut ws = named(addr, "talker").await;
        join(&mut ws, "#general").await;
        let content = "w".repeat(10_000);
        let end = Instant::now() + Duration::from_secs(3);
        for i in 0..2000 {
            let m =
                json!({"type": "MSG", "to": "#general", "content": content, "id": format!("m{i}")});
            let left = end.saturating_duration_since(Instant::now());
            let sent = tokio::time::timeout(left, ws.send(Message::text(m.to_string()))).await;
            if !matches!(sent, Ok(Ok(()))) {
                break;
            }
        }
    });
    served_during(addr, attack).await;
    let (code, stderr) = stop(srv);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--log reached its limit of 200000 bytes"),
        "{stderr}"
    );
    assert!(stderr.contains("--log-max-bytes"), "{stderr}");
    let size = std::fs::metadata(&log).expect("log").len();
    assert!(size <= 200_000 && size > 100_000, "log is {size} bytes");
    let replay = Command::new(env!("CARGO_BIN_EXE_herdsim"))
        .args(["arbitrate", "--policy", "spec"])
        .stdin(std::fs::File::open(&log).expect("open log"))
        .output()
        .expect("arbitrate runs");
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
}

/// Floor squatting under `spec` (claim guard `relayed` by default): 150
/// claims for message ids that do not exist yet, dated 1, are refused
/// (`not_relayed`); once a message is relayed an honest claim on it is
/// granted. With `--claim-guard clock`, a claim on a relayed message
/// dated long before it reached the server is refused too
/// (`bad_started_at`). The log holds none of the refused claims and
/// replays through `arbitrate` (no guard flag needed).
#[tokio::test]
async fn floor_squatting_is_refused() {
    for guard in ["relayed", "clock"] {
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("squat.jsonl");
        let log_arg = log.to_str().expect("utf-8").to_string();
        let mut args = vec!["--policy", "spec", "--log", &log_arg];
        if guard == "clock" {
            args.extend(["--claim-guard", "clock"]);
        }
        let srv = Server::spawn(&args);
        assert!(
            srv.stderr_text().contains(&format!("claim guard {guard}")),
            "{}",
            srv.stderr_text()
        );
        let addr = srv.addr;
        let mut op = named(addr, "operator").await;
        join(&mut op, "#general").await;
        let mut honest = named(addr, "honest").await;
        join(&mut honest, "#general").await;
        let attack = attack(async move {
            let mut sq = named(addr, "squatter").await;
            join(&mut sq, "#general").await;
            for i in 1..=150 {
                let c = json!({"type": "RESPONDING_TO", "msg_id": format!("m{i}"), "started_at": 1, "channel": "#general"});
                send(&mut sq, &c).await;
                let e = next(&mut sq).await;
                assert_eq!(e["code"], "not_relayed", "{e}");
            }
        });
        served_during(addr, attack).await;
        // The operator posts m1; the honest agent claims it with its clock.
        send(
            &mut op,
            &json!({"type": "MSG", "to": "#general", "content": "q", "id": "m1"}),
        )
        .await;
        let m = until(&mut honest, "MSG").await;
        assert_eq!(m["id"], "m1");
        let mut sq = named(addr, "late-squatter").await;
        join(&mut sq, "#general").await;
        let c = json!({"type": "RESPONDING_TO", "msg_id": "m1", "started_at": 1, "channel": "#general"});
        send(&mut sq, &c).await;
        if guard == "clock" {
            let e = next(&mut sq).await;
            assert_eq!(e["code"], "bad_started_at", "{e}");
        }
        join(&mut sq, "#sync").await;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let claim = json!({"type": "RESPONDING_TO", "msg_id": "m1", "started_at": now_ms, "channel": "#general"});
        send(&mut honest, &claim).await;
        join(&mut honest, "#sync").await;
        // What the operator saw: the claims that were granted.
        join(&mut op, "#sync2").await;
        let (code, stderr) = stop(srv);
        stopped_ok(code, &stderr);
        let text = std::fs::read_to_string(&log).expect("log");
        let claims: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["event"]["type"] == "RESPONDING_TO")
            .collect();
        let from: Vec<&str> = claims.iter().filter_map(|c| c["agent"].as_str()).collect();
        // The pre-claims never reached the floor; the late squatter's claim
        // on the relayed m1 did under `relayed` (and wins: dated 1), not
        // under `clock`.
        let want: &[&str] = if guard == "clock" {
            &["honest"]
        } else {
            &["late-squatter", "honest"]
        };
        assert_eq!(from, want, "{guard}: {text}");
        let replay = Command::new(env!("CARGO_BIN_EXE_herdsim"))
            .args(["arbitrate", "--policy", "spec"])
            .stdin(std::fs::File::open(&log).expect("open log"))
            .output()
            .expect("arbitrate runs");
        assert!(replay.status.success());
    }
}

/// `agentchat-0.36` keeps the real server's behaviour by default: a claim
/// for a message id that does not exist is granted (FLOOR_CLAIMED to the
/// channel), as agentchat does.
#[tokio::test]
async fn agentchat_keeps_the_real_servers_behaviour_by_default() {
    let srv = Server::spawn(&["--policy", "agentchat-0.36"]);
    assert!(srv.stderr_text().contains("claim guard off"));
    let addr = srv.addr;
    let mut a = named(addr, "watcher").await;
    join(&mut a, "#general").await;
    let mut sq = named(addr, "squatter").await;
    join(&mut sq, "#general").await;
    let c = json!({"type": "RESPONDING_TO", "msg_id": "future-1", "started_at": 1, "channel": "#general"});
    send(&mut sq, &c).await;
    let f = until(&mut a, "FLOOR_CLAIMED").await;
    assert_eq!(f["msg_id"], "future-1");
    let (code, stderr) = stop(srv);
    stopped_ok(code, &stderr);
}

/// Bad limit combinations are input errors naming the flag.
#[test]
fn limits_that_do_not_fit_together_are_input_errors() {
    for (args, needle) in [
        (
            &["--max-queued-bytes", "1000"][..],
            "--max-queued-bytes 1000 must be at least",
        ),
        (&["--byte-burst", "1000"][..], "--byte-burst 1000"),
        (&["--max-memory-mb", "1"][..], "--max-memory-mb"),
        (&["--claim-guard", "maybe"][..], "--claim-guard"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_herdsim"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Unix time in ms: what an honest agentchat client stamps `started_at`
/// with (the `clock` guard reads claims on that clock).
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Send `claim`, then JOIN a channel to sync: every frame the claim
/// brought comes before the JOINED (one connection's inputs are handled
/// in order). Returns those frames.
async fn claim_and_sync(ws: &mut hostile::Ws, claim: &Value, sync: &str) -> Vec<Value> {
    send(ws, claim).await;
    send(ws, &json!({"type": "JOIN", "channel": sync})).await;
    let mut got = Vec::new();
    loop {
        let v = next(ws).await;
        if v["type"] == "JOINED" && v["channel"] == sync {
            return got;
        }
        got.push(v);
    }
}

/// Issue 39, item 5, and issue 47, item 3, a client's own posts: under
/// `relayed` and `clock`, a squatter posts a MSG under the id the operator
/// will use next (`m1`) and claims it with an honest `started_at`. The
/// operator's own `m1` is then relayed under the server's next id (`s1`)
/// and echoed to the operator (before, it was refused `id_taken`: the
/// squatter could block every operator message whose id it guessed); the
/// honest agent claims `s1` and holds the floor with no YIELD. The
/// server's ids cannot be posted under at all.
#[tokio::test]
async fn the_claim_guard_holds_against_a_clients_own_posts() {
    for guard in ["relayed", "clock"] {
        let srv = Server::spawn(&["--policy", "spec", "--claim-guard", guard]);
        let addr = srv.addr;
        let mut op = named(addr, "operator").await;
        join(&mut op, "#general").await;
        let mut honest = named(addr, "honest").await;
        join(&mut honest, "#general").await;
        let mut sq = named(addr, "squatter").await;
        join(&mut sq, "#general").await;
        let decoy = json!({"type": "MSG", "to": "#general", "content": "decoy", "id": "m1"});
        send(&mut sq, &decoy).await;
        let m = until(&mut honest, "MSG").await;
        assert_eq!(
            (m["id"].as_str(), m["from"].as_str()),
            (Some("m1"), Some("squatter"))
        );
        let squat = json!({"type": "RESPONDING_TO", "msg_id": "m1", "started_at": unix_ms(), "channel": "#general"});
        let got = claim_and_sync(&mut sq, &squat, "#sync-sq").await;
        assert!(got.iter().all(|v| v["type"] != "ERROR"), "{guard}: {got:?}");
        // The operator's m1: relayed as s1, and echoed to the operator.
        let real = json!({"type": "MSG", "to": "#general", "content": "the question", "id": "m1"});
        send(&mut op, &real).await;
        // (The operator got the squatter's decoy first.)
        let echo = loop {
            let v = until(&mut op, "MSG").await;
            if v["from"] == "operator" {
                break v;
            }
        };
        assert_eq!(
            (echo["id"].as_str(), echo["from"].as_str()),
            (Some("s1"), Some("operator")),
            "{guard}: {echo}"
        );
        let m = until(&mut honest, "MSG").await;
        assert_eq!(
            (m["id"].as_str(), m["from"].as_str(), m["content"].as_str()),
            (Some("s1"), Some("operator"), Some("the question")),
            "{m}"
        );
        // The server's next id cannot be taken.
        let s2 = json!({"type": "MSG", "to": "#general", "content": "decoy", "id": "s2"});
        send(&mut sq, &s2).await;
        let e = until(&mut sq, "ERROR").await;
        assert_eq!(e["code"], "id_taken", "{guard}: {e}");
        // The honest agent claims the operator's message and holds it.
        let claim = json!({"type": "RESPONDING_TO", "msg_id": "s1", "started_at": unix_ms(), "channel": "#general"});
        let got = claim_and_sync(&mut honest, &claim, "#sync-h").await;
        assert!(
            got.iter()
                .all(|v| v["type"] != "YIELD" && v["type"] != "ERROR"),
            "{guard}: {got:?}"
        );
        let (code, stderr) = stop(srv);
        stopped_ok(code, &stderr);
    }
}

/// Issue 39, item 5, churn by other connections: 200 connections post
/// 400 tiny MSGs each (80 000 relays, more than the guard remembers in
/// all, each in a channel of its own, within a raised burst) after the
/// operator's question. The guard forgets the flooders' oldest relays
/// (a claim on the first one is `not_relayed`), never the operator's: the
/// honest claim on it is granted.
#[tokio::test]
async fn the_claim_guard_holds_against_churn_by_other_connections() {
    let srv = Server::spawn(&["--policy", "spec", "--rate-burst", "1000"]);
    let addr = srv.addr;
    let mut op = named(addr, "operator").await;
    join(&mut op, "#general").await;
    let mut honest = named(addr, "honest").await;
    join(&mut honest, "#general").await;
    let q = json!({"type": "MSG", "to": "#general", "content": "q", "id": "q1"});
    send(&mut op, &q).await;
    assert_eq!(until(&mut honest, "MSG").await["id"], "q1");
    let flood = attack(async move {
        let floods = (0..200).map(|i| async move {
            let mut ws = named(addr, &format!("flood-{i}")).await;
            let ch = format!("#f{i}");
            join(&mut ws, &ch).await;
            for k in 0..400 {
                let m = json!({"type": "MSG", "to": ch, "content": "x", "id": format!("f{i}-{k}")});
                ws.send(Message::text(m.to_string())).await.expect("sends");
            }
            // Every MSG handled before this JOIN is confirmed.
            join(&mut ws, &format!("#done-{i}")).await;
            let _ = ws.close(None).await;
        });
        futures_util::future::join_all(floods).await;
    });
    served_during(addr, flood).await;
    let forgotten = json!({"type": "RESPONDING_TO", "msg_id": "f0-0", "started_at": unix_ms(), "channel": "#f0"});
    let got = claim_and_sync(&mut honest, &forgotten, "#sync-1").await;
    assert!(
        got.iter().any(|v| v["code"] == "not_relayed"),
        "the flood did not fill the memory: {got:?}"
    );
    let claim = json!({"type": "RESPONDING_TO", "msg_id": "q1", "started_at": unix_ms(), "channel": "#general"});
    let got = claim_and_sync(&mut honest, &claim, "#sync-2").await;
    assert!(
        got.iter()
            .all(|v| v["type"] != "ERROR" && v["type"] != "YIELD"),
        "{got:?}"
    );
    let (code, stderr) = stop(srv);
    stopped_ok(code, &stderr);
}

/// The close code and reason of the next close frame `ws` gets (other
/// frames are skipped).
async fn closed_with(ws: &mut hostile::Ws) -> Option<(u16, String)> {
    loop {
        let m = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame in time");
        match m {
            Some(Ok(Message::Close(f))) => {
                return f.map(|f| (u16::from(f.code), f.reason.to_string()));
            }
            Some(Ok(_)) => {}
            _ => return None,
        }
    }
}

/// Issue 39, item 7: under `agentchat-0.36`, agentchat 0.36.19's flood
/// limit. An identified connection's 61st frame within 10 s (PINGs count)
/// closes it with 1008, and the close releases its claim: a later claim
/// on the message takes the floor (FLOOR_CLAIMED) instead of a YIELD. A
/// connection that has not identified is closed at its 11th frame.
#[tokio::test]
async fn agentchat_closes_a_flooding_connection_with_1008_and_releases_its_claims() {
    let srv = Server::spawn(&["--policy", "agentchat-0.36"]);
    let addr = srv.addr;
    let mut watcher = named(addr, "watcher").await;
    join(&mut watcher, "#general").await;
    // IDENTIFY, JOIN, RESPONDING_TO: 3 frames.
    let mut holder = named(addr, "holder").await;
    join(&mut holder, "#general").await;
    let c =
        json!({"type": "RESPONDING_TO", "msg_id": "m1", "started_at": 1000, "channel": "#general"});
    send(&mut holder, &c).await;
    let f = until(&mut watcher, "FLOOR_CLAIMED").await;
    assert_eq!(f["holder"], "holder");
    // 57 PINGs: 60 frames, all answered.
    for _ in 0..57 {
        send(&mut holder, &json!({"type": "PING"})).await;
        assert_eq!(until(&mut holder, "PONG").await["type"], "PONG");
    }
    send(&mut holder, &json!({"type": "PING"})).await;
    assert_eq!(
        closed_with(&mut holder).await,
        Some((1008, "Rate limit exceeded".to_string()))
    );
    let mut late = named(addr, "late").await;
    join(&mut late, "#general").await;
    let c =
        json!({"type": "RESPONDING_TO", "msg_id": "m1", "started_at": 2000, "channel": "#general"});
    let got = claim_and_sync(&mut late, &c, "#sync").await;
    assert!(got.iter().all(|v| v["type"] != "YIELD"), "{got:?}");
    let f = until(&mut watcher, "FLOOR_CLAIMED").await;
    assert_eq!(f["holder"], "late", "{f}");
    // Before identifying: 10 frames pass, the 11th closes.
    let mut anon = connect(addr).await;
    for _ in 0..10 {
        send(&mut anon, &json!({"type": "PING"})).await;
        assert_eq!(until(&mut anon, "PONG").await["type"], "PONG");
    }
    send(&mut anon, &json!({"type": "PING"})).await;
    assert_eq!(closed_with(&mut anon).await.map(|c| c.0), Some(1008));
    let (code, stderr) = stop(srv);
    stopped_ok(code, &stderr);
}
