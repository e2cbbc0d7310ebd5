//! `herdsim serve` on loopback: the agentchat handshake, arbitration by the
//! floor, the `--log` replay, limits, disconnects, 200 connections, and a
//! clean shutdown. Every wait is bounded (a receive gives up after
//! `WAIT`), so each test stops by itself; none asserts on timing.
//!
//! The server runs on its own thread (named `herdsim-serve-*`) with its own
//! runtime; a panic hook records any panic on such a thread, and every test
//! checks that none happened.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, mpsc as std_mpsc};
use std::time::{Duration, Instant};

use base64::Engine;
use ed25519_dalek::pkcs8::EncodePublicKey;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::{Signer, SigningKey};
use futures_util::{SinkExt, StreamExt};
use herdsim::floor::{ClaimGuard, Config, PolicyKind};
use herdsim::serve::{self, Limits, Options, Report};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The longest any single wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(10);

static SERVER_PANICKED: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

fn install_panic_hook() {
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            if name.starts_with("herdsim-serve") {
                SERVER_PANICKED.store(true, Ordering::SeqCst);
            }
            prev(info);
        }));
    });
}

/// A server on an ephemeral loopback port, on its own thread.
struct TestServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Option<Report>>>,
}

fn options(policy: PolicyKind) -> Options {
    // The policy exactly as written: these tests claim messages they
    // never post (the guard, serve's default, has tests of its own in
    // serve_hostile.rs).
    let mut floor = Config::for_policy(policy);
    floor.claim_guard = ClaimGuard::Off;
    Options {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        floor,
        ..Options::default()
    }
}

fn start(opts: Options) -> TestServer {
    install_panic_hook();
    let (addr_tx, addr_rx) = std_mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("herdsim-serve-test".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let bound = serve::bind(opts).await.expect("binds");
                addr_tx.send(bound.local_addr()).expect("send addr");
                bound
                    .run(async {
                        let _ = stop_rx.await;
                    })
                    .await
                    .ok()
            })
        })
        .expect("thread");
    let addr = addr_rx.recv_timeout(WAIT).expect("server starts");
    assert!(addr.ip().is_loopback());
    TestServer {
        addr,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

impl TestServer {
    /// Stop the server and wait for it (bounded by the server's own
    /// shutdown: every connection is closed within a second).
    fn stop(mut self) -> Report {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let report = self
            .thread
            .take()
            .map(|t| t.join().expect("server thread does not panic"))
            .and_then(|r| r)
            .expect("server run succeeds");
        assert!(
            !SERVER_PANICKED.load(Ordering::SeqCst),
            "a server thread panicked"
        );
        report
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The test CA and server certificate (tests/data/tls/make.sh).
fn tls_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tls")
        .join(name)
}

/// `wss://localhost:PORT` with the test CA trusted.
async fn connect_tls(
    addr: SocketAddr,
) -> Result<
    (
        Ws,
        tokio_tungstenite::tungstenite::handshake::client::Response,
    ),
    tokio_tungstenite::tungstenite::Error,
> {
    let tls = herdsim::tls::client_config(Some(&tls_data("ca.pem"))).expect("test CA loads");
    tokio_tungstenite::connect_async_tls_with_config(
        format!("wss://localhost:{}", addr.port()),
        None,
        true,
        Some(tokio_tungstenite::Connector::Rustls(tls)),
    )
    .await
}

/// A test client: records every frame it receives.
struct Client {
    ws: Ws,
    /// Bare agent id (WELCOME's `agent_id` without `@`).
    id: String,
    seen: Vec<Value>,
    syncs: u64,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Client {
        let (ws, _) = tokio::time::timeout(
            WAIT,
            tokio_tungstenite::connect_async(format!("ws://{addr}")),
        )
        .await
        .expect("connect in time")
        .expect("connects");
        Client::over(ws)
    }

    fn over(ws: Ws) -> Client {
        Client {
            ws,
            id: String::new(),
            seen: Vec::new(),
            syncs: 0,
        }
    }

    /// Connect over TLS to `wss://localhost:PORT`, trusting the test CA.
    async fn connect_tls(addr: SocketAddr) -> Client {
        let (ws, _) = tokio::time::timeout(WAIT, connect_tls(addr))
            .await
            .expect("connect in time")
            .expect("connects");
        Client::over(ws)
    }

    /// Connect and IDENTIFY without a key; the id is the name.
    async fn named(addr: SocketAddr, name: &str) -> Client {
        let c = Client::connect(addr).await;
        c.identify(name).await
    }

    /// IDENTIFY without a key; the id is the name.
    async fn identify(mut self, name: &str) -> Client {
        self.send(json!({"type": "IDENTIFY", "name": name})).await;
        let w = self.next().await;
        assert_eq!(w["type"], "WELCOME", "{w}");
        self.id = w["agent_id"]
            .as_str()
            .unwrap_or("")
            .trim_start_matches('@')
            .to_string();
        assert_eq!(self.id, name);
        self
    }

    async fn send(&mut self, v: Value) {
        self.ws
            .send(Message::text(v.to_string()))
            .await
            .expect("sends");
    }

    async fn send_raw(&mut self, m: Message) {
        self.ws.send(m).await.expect("sends");
    }

    /// The next data frame as JSON (recorded in `seen`).
    async fn next(&mut self) -> Value {
        loop {
            let m = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("a frame in time")
                .expect("connection open")
                .expect("no error");
            let text = match m {
                Message::Text(t) => t.to_string(),
                Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
                _ => continue,
            };
            let v: Value = serde_json::from_str(&text).expect("server sends JSON");
            self.seen.push(v.clone());
            return v;
        }
    }

    /// The next frame, which must be of type `ty`.
    async fn expect(&mut self, ty: &str) -> Value {
        let v = self.next().await;
        assert_eq!(v["type"], ty, "{v}");
        v
    }

    async fn join(&mut self, channel: &str) {
        self.send(json!({"type": "JOIN", "channel": channel})).await;
        loop {
            let v = self.next().await;
            if v["type"] == "JOINED" && v["channel"] == channel {
                return;
            }
        }
    }

    /// A round trip through the hub: JOIN a fresh channel and return every
    /// frame received before its JOINED (so everything the hub sent this
    /// client before it handled the JOIN).
    async fn sync(&mut self) -> Vec<Value> {
        self.syncs += 1;
        let channel = format!("#sync-{}", self.syncs);
        self.send(json!({"type": "JOIN", "channel": channel})).await;
        let mut before = Vec::new();
        loop {
            let v = self.next().await;
            if v["type"] == "JOINED" && v["channel"] == channel.as_str() {
                return before;
            }
            before.push(v);
        }
    }

    /// Read until the server closes; the close code, if any.
    async fn closed(&mut self) -> Option<CloseCode> {
        loop {
            match tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("closes in time")
            {
                None | Some(Err(_)) => return None,
                Some(Ok(Message::Close(f))) => return f.map(|f| f.code),
                Some(Ok(Message::Text(t))) => {
                    if let Ok(v) = serde_json::from_str(&t) {
                        self.seen.push(v);
                    }
                }
                Some(Ok(_)) => {}
            }
        }
    }
}

fn claim(msg_id: &str, started_at: i64) -> Value {
    json!({"type": "RESPONDING_TO", "msg_id": msg_id, "started_at": started_at, "channel": "#general"})
}

fn types(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .map(|v| v["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[tokio::test]
async fn keyed_identify_handshake_derives_the_agentchat_id() {
    let srv = start(options(PolicyKind::Spec));
    let key = SigningKey::from_bytes(&[42u8; 32]);
    let pem = key
        .verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .expect("pem");
    let digest = Sha256::digest(pem.as_bytes());
    let want_id: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let b64 = base64::engine::general_purpose::STANDARD;

    let mut c = Client::connect(srv.addr).await;
    // Not a key.
    c.send(json!({"type": "IDENTIFY", "name": "keyed", "pubkey": "nope"}))
        .await;
    assert_eq!(c.expect("ERROR").await["code"], "INVALID_MSG");
    // A wrong signature fails, and the connection may try again.
    c.send(json!({"type": "IDENTIFY", "name": "keyed", "pubkey": pem}))
        .await;
    let ch = c.expect("CHALLENGE").await;
    let id = ch["challenge_id"]
        .as_str()
        .expect("challenge_id")
        .to_string();
    let nonce = ch["nonce"].as_str().expect("nonce").to_string();
    assert_eq!(nonce.len(), 32);
    let wrong = key.sign(format!("AGENTCHAT_AUTH|{nonce}|{id}|1").as_bytes());
    c.send(json!({"type": "VERIFY_IDENTITY", "challenge_id": id, "signature": b64.encode(wrong.to_bytes()), "timestamp": 2}))
        .await;
    assert_eq!(c.expect("ERROR").await["code"], "VERIFICATION_FAILED");
    // Only IDENTIFY, VERIFY_IDENTITY and PING before identification.
    c.send(json!({"type": "JOIN", "channel": "#general"})).await;
    assert_eq!(c.expect("ERROR").await["code"], "AUTH_REQUIRED");

    c.send(json!({"type": "IDENTIFY", "name": "keyed", "pubkey": pem}))
        .await;
    let ch = c.expect("CHALLENGE").await;
    let id = ch["challenge_id"]
        .as_str()
        .expect("challenge_id")
        .to_string();
    let nonce = ch["nonce"].as_str().expect("nonce").to_string();
    let ts = 1_700_000_000_123_i64;
    let sig = key.sign(format!("AGENTCHAT_AUTH|{nonce}|{id}|{ts}").as_bytes());
    c.send(json!({"type": "VERIFY_IDENTITY", "challenge_id": id, "signature": b64.encode(sig.to_bytes()), "timestamp": ts}))
        .await;
    let w = c.expect("WELCOME").await;
    assert_eq!(w["agent_id"], format!("@{want_id}"));
    assert_eq!(w["name"], "keyed");
    c.join("#general").await;

    // A key-less agent cannot take a keyed id, nor a name in use.
    let mut squat = Client::connect(srv.addr).await;
    squat
        .send(json!({"type": "IDENTIFY", "name": want_id}))
        .await;
    assert_eq!(squat.expect("ERROR").await["code"], "INVALID_NAME");
    let _first = Client::named(srv.addr, "plain").await;
    let mut second = Client::connect(srv.addr).await;
    second
        .send(json!({"type": "IDENTIFY", "name": "plain"}))
        .await;
    assert_eq!(second.expect("ERROR").await["code"], "INVALID_NAME");

    // The same key on a second connection displaces the first.
    let mut again = Client::connect(srv.addr).await;
    again
        .send(json!({"type": "IDENTIFY", "name": "keyed", "pubkey": pem}))
        .await;
    let ch = again.expect("CHALLENGE").await;
    let id = ch["challenge_id"]
        .as_str()
        .expect("challenge_id")
        .to_string();
    let nonce = ch["nonce"].as_str().expect("nonce").to_string();
    let sig = key.sign(format!("AGENTCHAT_AUTH|{nonce}|{id}|5").as_bytes());
    again
        .send(json!({"type": "VERIFY_IDENTITY", "challenge_id": id, "signature": b64.encode(sig.to_bytes()), "timestamp": 5}))
        .await;
    assert_eq!(
        again.expect("WELCOME").await["agent_id"],
        format!("@{want_id}")
    );
    assert_eq!(
        c.expect("SESSION_DISPLACED").await["type"],
        "SESSION_DISPLACED"
    );
    assert_eq!(c.closed().await, Some(CloseCode::Policy));
    srv.stop();
}

#[tokio::test]
async fn spec_the_later_claim_gets_yield() {
    let srv = start(options(PolicyKind::Spec));
    let mut op = Client::named(srv.addr, "operator").await;
    let mut a = Client::named(srv.addr, "agent-a").await;
    let mut b = Client::named(srv.addr, "agent-b").await;
    for c in [&mut op, &mut a, &mut b] {
        c.join("#general").await;
    }
    op.send(json!({"type": "MSG", "id": "m1", "to": "#general", "content": "question?"}))
        .await;
    assert_eq!(a.expect("MSG").await["id"], "m1");
    assert_eq!(b.expect("MSG").await["id"], "m1");
    a.send(claim("m1", 100)).await;
    let relayed = b.expect("RESPONDING_TO").await;
    assert_eq!(relayed["from"], "agent-a");
    b.send(claim("m1", 200)).await;
    assert_eq!(a.expect("RESPONDING_TO").await["from"], "agent-b");
    let y = b.expect("YIELD").await;
    assert_eq!(
        y,
        json!({"type": "YIELD", "msg_id": "m1", "winner": "agent-a", "channel": "#general"})
    );
    // The winner hears nothing more; the operator got both claims relayed.
    assert!(a.sync().await.is_empty());
    assert_eq!(types(&op.sync().await), ["RESPONDING_TO", "RESPONDING_TO"]);
    let report = srv.stop();
    assert_eq!((report.stats.claims_received, report.stats.yields), (2, 1));
}

#[tokio::test]
async fn none_arbitrates_nothing() {
    let srv = start(options(PolicyKind::None));
    let mut a = Client::named(srv.addr, "agent-a").await;
    let mut b = Client::named(srv.addr, "agent-b").await;
    a.join("#general").await;
    b.join("#general").await;
    a.send(claim("m1", 100)).await;
    assert_eq!(b.expect("RESPONDING_TO").await["from"], "agent-a");
    b.send(claim("m1", 200)).await;
    assert_eq!(a.expect("RESPONDING_TO").await["from"], "agent-b");
    a.send(json!({"type": "MSG", "to": "#general", "content": "answer a", "in_reply_to": "m1"}))
        .await;
    b.send(json!({"type": "MSG", "to": "#general", "content": "answer b", "in_reply_to": "m1"}))
        .await;
    // Both answers go through; nobody is ever yielded.
    let got_a = a.sync().await;
    let got_b = b.sync().await;
    assert_eq!(types(&got_a), ["MSG"]);
    assert_eq!(types(&got_b), ["MSG"]);
    assert_eq!(got_a[0]["content"], "answer b");
    assert_eq!(got_b[0]["content"], "answer a");
    let report = srv.stop();
    assert_eq!(report.stats.yields, 0);
}

/// The floor's sends among what a client received: everything but the
/// session layer's own message types (WELCOME, JOINED, LEFT, PONG,
/// CHALLENGE, SESSION_DISPLACED). ERRORs are all kept: the replay test
/// sends no frame the session layer refuses, and under `agentchat-0.36`
/// the floor itself uses agentchat's upper-case codes.
fn floor_sends(frames: &[Value]) -> Vec<Value> {
    frames
        .iter()
        .filter(|v| {
            let ty = v["type"].as_str().unwrap_or("");
            !matches!(
                ty,
                "WELCOME" | "JOINED" | "LEFT" | "PONG" | "CHALLENGE" | "SESSION_DISPLACED"
            )
        })
        .cloned()
        .collect()
}

fn temp_log(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    (dir, path)
}

fn arbitrate(log: &Path, policy: &str, ttl_ms: u64) -> Vec<Value> {
    let input = std::fs::read(log).expect("log written");
    let mut cmd = assert_cmd::Command::cargo_bin("herdsim").expect("binary");
    for var in [
        "AGENTCHAT_RESPOND_TTL_MS",
        "AGENTCHAT_CLAIM_TTL_MS",
        "AGENTCHAT_RESPOND_ENABLED",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd
        .args([
            "arbitrate",
            "--policy",
            policy,
            "--ttl-ms",
            &ttl_ms.to_string(),
        ])
        .write_stdin(input)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

#[tokio::test]
async fn a_recorded_log_replays_through_arbitrate_to_the_same_sends() {
    for policy in [PolicyKind::Spec, PolicyKind::Agentchat036, PolicyKind::None] {
        let (_dir, log) = temp_log("live.jsonl");
        let ttl_ms = 150;
        let mut opts = options(policy);
        opts.floor.ttl_ms = ttl_ms;
        opts.log = Some(log.clone());
        let srv = start(opts);
        let mut op = Client::named(srv.addr, "operator").await;
        let mut a = Client::named(srv.addr, "a").await;
        let mut b = Client::named(srv.addr, "b").await;
        let mut c = Client::named(srv.addr, "c").await;
        for cl in [&mut op, &mut a, &mut b, &mut c] {
            cl.join("#general").await;
        }
        op.send(json!({"type": "MSG", "id": "m1", "to": "#general", "content": "q1"}))
            .await;
        a.send(claim("m1", 10)).await;
        b.send(claim("m1", 20)).await;
        // An invalid claim, a MSG to a channel the sender is not in, a
        // DM, an unknown type: all decided (and answered) by the floor.
        b.send(json!({"type": "RESPONDING_TO", "msg_id": "m1"}))
            .await;
        b.send(json!({"type": "MSG", "to": "#elsewhere", "content": "x"}))
            .await;
        c.send(json!({"type": "MSG", "to": "@a", "content": "psst"}))
            .await;
        c.send(json!({"type": "LIST_CHANNELS"})).await;
        // c claims after a's: under `spec` again until it is granted, so
        // a's claim expired and the expiry is in the log. (agentchat's
        // sweeps come every 5 s, and `none` tracks nothing: there c claims
        // once. The replay must agree with whatever happened.)
        let deadline = Instant::now() + WAIT;
        loop {
            c.send(claim("m1", 30)).await;
            let got = c.sync().await;
            if policy != PolicyKind::Spec || got.iter().all(|v| v["type"] != "YIELD") {
                break;
            }
            assert!(Instant::now() < deadline, "a's claim never expired");
            tokio::time::sleep(Duration::from_millis(ttl_ms / 5)).await;
        }
        a.send(json!({"type": "MSG", "to": "#general", "content": "answer", "in_reply_to": "m1"}))
            .await;
        op.send(json!({"type": "MSG", "to": "#general", "content": "q2"}))
            .await;
        b.send(json!({"type": "LEAVE", "channel": "#general"}))
            .await;
        for cl in [&mut op, &mut a, &mut b, &mut c] {
            cl.sync().await;
        }
        // c goes away abruptly after reading all it was sent.
        drop(c.ws);
        let c_seen = c.seen;
        a.send(claim("m9", 5)).await;
        for cl in [&mut op, &mut a, &mut b] {
            cl.sync().await;
        }
        let report = srv.stop();
        assert!(report.inputs > 20, "{report:?}");

        let replay = arbitrate(&log, policy.name(), ttl_ms);
        assert!(!replay.is_empty());
        for (id, seen) in [
            ("operator", &op.seen),
            ("a", &a.seen),
            ("b", &b.seen),
            ("c", &c_seen),
        ] {
            let want: Vec<Value> = replay
                .iter()
                .filter(|l| l["to"] == id)
                .map(|l| l["msg"].clone())
                .collect();
            let got = floor_sends(seen);
            assert_eq!(
                got,
                before_shutdown(want, got.len()),
                "policy {}: what {id} received differs from the replay",
                policy.name()
            );
        }
    }
}

/// Whatever JSON a client sends is logged so that `arbitrate` reproduces
/// the server's sends: `null`, bare values, odd numbers, objects without a
/// usable `type`. And claims refused by the claim guard and the per-connection
/// bounds are refused before the floor, so a log of a guarded server
/// replays without the guard.
#[tokio::test]
async fn odd_json_values_and_guarded_claims_replay_through_arbitrate() {
    let (_dir, log) = temp_log("odd.jsonl");
    let mut opts = options(PolicyKind::Spec);
    opts.floor.claim_guard = herdsim::floor::ClaimGuard::Relayed;
    opts.limits.max_claims_per_conn = 2;
    opts.log = Some(log.clone());
    let srv = start(opts);
    let mut op = Client::named(srv.addr, "operator").await;
    let mut a = Client::named(srv.addr, "a").await;
    for cl in [&mut op, &mut a] {
        cl.join("#general").await;
    }
    for raw in [
        "null",
        "true",
        "1.5",
        "-0.0",
        "18446744073709551616",
        "1e300",
        "\"text\"",
        "[]",
        "[null, {\"type\": \"MSG\"}]",
        "{}",
        "{\"type\": null}",
        "{\"type\": 5}",
        "{\"type\": \"MSG\", \"to\": null, \"content\": \"x\"}",
        "{\"type\": \"RESPONDING_TO\", \"msg_id\": \"m1\", \"started_at\": 1e300}",
    ] {
        a.send_raw(Message::text(raw)).await;
    }
    // Claims: not relayed yet (refused), then relayed; then more than
    // two held at once (the third refused).
    a.send(claim("m1", 10)).await;
    a.sync().await;
    for id in ["m1", "m2", "m3"] {
        op.send(json!({"type": "MSG", "id": id, "to": "#general", "content": "q"}))
            .await;
    }
    a.sync().await;
    for id in ["m1", "m2", "m3"] {
        a.send(claim(id, 10)).await;
    }
    // a's sync comes after its claims in the hub's order, op's after that.
    for cl in [&mut a, &mut op] {
        cl.sync().await;
    }
    let errors: Vec<String> = a
        .seen
        .iter()
        .filter(|v| v["type"] == "ERROR")
        .map(|v| v["code"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(errors.contains(&"not_relayed".to_string()), "{errors:?}");
    assert!(
        errors.contains(&"TOO_MANY_CLAIMS".to_string()),
        "{errors:?}"
    );
    let report = srv.stop();
    assert_eq!(report.refused_inputs, 2, "{report:?}");
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("\"event\":null"), "{text}");
    let replay = arbitrate(&log, "spec", 45_000);
    for (id, seen) in [("operator", &op.seen), ("a", &a.seen)] {
        let want: Vec<Value> = replay
            .iter()
            .filter(|l| l["to"] == id)
            .map(|l| l["msg"].clone())
            .collect();
        // The refusals before the floor are the session layer's, not in
        // the replay.
        let got: Vec<Value> = floor_sends(seen)
            .into_iter()
            .filter(|v| !matches!(v["code"].as_str(), Some("not_relayed" | "TOO_MANY_CLAIMS")))
            .collect();
        let want = before_shutdown(want, got.len());
        assert_eq!(got, want, "what {id} received differs from the replay");
    }
}

/// The replay's sends to one client, without the FLOOR_RELEASED the
/// server sent as the test stopped it (each client's disconnect releases
/// its claims, announced to the others, who no longer read): only such
/// releases may follow the `seen` frames the client read.
fn before_shutdown(mut want: Vec<Value>, seen: usize) -> Vec<Value> {
    if want.len() > seen && want[seen..].iter().all(|v| v["type"] == "FLOOR_RELEASED") {
        want.truncate(seen);
    }
    want
}

#[tokio::test]
async fn malformed_frames_get_error_and_the_connection_lives() {
    let srv = start(options(PolicyKind::Spec));
    let mut c = Client::named(srv.addr, "agent-a").await;
    c.send_raw(Message::text("not json")).await;
    let e = c.expect("ERROR").await;
    assert_eq!(e["code"], "INVALID_MSG");
    assert!(
        e["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("Invalid JSON"),
        "{e}"
    );
    c.send_raw(Message::text("[1]")).await;
    let e = c.expect("ERROR").await;
    assert_eq!(
        (e["code"].as_str(), e["message"].as_str()),
        (Some("bad_message"), Some("message must be a JSON object"))
    );
    c.send(json!({"type": "RESPONDING_TO", "msg_id": "m", "started_at": "soon", "channel": "#general"}))
        .await;
    assert_eq!(c.expect("ERROR").await["code"], "bad_message");
    c.send(json!({"type": "IDENTIFY", "name": "again"})).await;
    assert_eq!(c.expect("ERROR").await["code"], "INVALID_MSG");
    // A binary frame is read as JSON text too.
    c.send_raw(Message::binary(br#"{"type":"PING"}"#.to_vec()))
        .await;
    c.expect("PONG").await;
    c.send(json!({"type": "PING"})).await;
    c.expect("PONG").await;
    c.join("#general").await;
    srv.stop();
}

#[tokio::test]
async fn an_oversized_frame_gets_error_and_the_connection_is_closed() {
    let mut opts = options(PolicyKind::Spec);
    opts.limits.max_frame_bytes = 1024;
    let srv = start(opts);
    let mut c = Client::named(srv.addr, "agent-a").await;
    let mut other = Client::named(srv.addr, "agent-b").await;
    let big = json!({"type": "MSG", "to": "#general", "content": "x".repeat(2000)});
    c.send(big).await;
    let e = c.expect("ERROR").await;
    assert_eq!(e["code"], "FRAME_TOO_LARGE", "{e}");
    assert_eq!(c.closed().await, Some(CloseCode::Size));
    // The server goes on serving the others.
    other.send(json!({"type": "PING"})).await;
    other.expect("PONG").await;
    srv.stop();
}

#[tokio::test]
async fn frames_over_the_rate_limit_get_error_and_the_connection_lives() {
    let mut opts = options(PolicyKind::Spec);
    opts.limits = Limits {
        rate_per_sec: 1,
        burst: 3,
        ..Limits::default()
    };
    let srv = start(opts);
    let mut c = Client::connect(srv.addr).await;
    for _ in 0..5 {
        c.send(json!({"type": "PING"})).await;
    }
    let mut got = Vec::new();
    for _ in 0..5 {
        let v = c.next().await;
        got.push(if v["type"] == "ERROR" {
            v["code"].as_str().unwrap_or("?").to_string()
        } else {
            v["type"].as_str().unwrap_or("?").to_string()
        });
    }
    assert_eq!(
        got,
        ["PONG", "PONG", "PONG", "RATE_LIMITED", "RATE_LIMITED"]
    );
    srv.stop();
}

#[tokio::test]
async fn an_abrupt_disconnect_releases_the_claims() {
    let srv = start(options(PolicyKind::Spec));
    let mut a = Client::named(srv.addr, "agent-a").await;
    let mut b = Client::named(srv.addr, "agent-b").await;
    let mut c = Client::named(srv.addr, "agent-c").await;
    for cl in [&mut a, &mut b, &mut c] {
        cl.join("#general").await;
    }
    a.send(claim("m1", 100)).await;
    assert_eq!(b.expect("RESPONDING_TO").await["from"], "agent-a");
    // a holds the floor: c's later claim is yielded.
    c.send(claim("m1", 300)).await;
    let got = c.sync().await;
    assert_eq!(types(&got), ["RESPONDING_TO", "YIELD"]);
    assert_eq!(got[1]["winner"], "agent-a");
    // a's TCP connection drops without a close handshake.
    drop(a.ws);
    // b claims until granted (the server may not have seen the drop yet:
    // then b is yielded to a and tries again). Bounded.
    let deadline = Instant::now() + WAIT;
    loop {
        b.send(claim("m1", 200)).await;
        let got = b.sync().await;
        if got.iter().all(|v| v["type"] != "YIELD") {
            break;
        }
        assert!(
            got.iter()
                .all(|v| v["type"] != "YIELD" || v["winner"] == "agent-a")
        );
        assert!(
            Instant::now() < deadline,
            "the disconnected agent's claim was never released"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Now b holds the floor: c is yielded to b.
    c.send(claim("m1", 300)).await;
    let got = c.sync().await;
    assert!(
        got.iter()
            .any(|v| v["type"] == "YIELD" && v["winner"] == "agent-b"),
        "{got:?}"
    );
    srv.stop();
}

#[tokio::test]
async fn two_hundred_concurrent_connections() {
    let srv = start(options(PolicyKind::Spec));
    let addr = srv.addr;
    let clients = futures_util::future::join_all((0..200).map(|i| async move {
        let mut c = Client::named(addr, &format!("agent-{i}")).await;
        c.join("#general").await;
        c
    }))
    .await;
    let mut clients = clients;
    // Every agent joined before anyone speaks: agent-0 posts, the 199
    // others receive it.
    clients[0]
        .send(json!({"type": "MSG", "id": "hello", "to": "#general", "content": "hi all"}))
        .await;
    let (first, rest) = clients.split_at_mut(1);
    let received = futures_util::future::join_all(rest.iter_mut().map(|c| async move {
        loop {
            let v = c.next().await;
            if v["type"] == "MSG" {
                return v["id"] == "hello" && v["from"] == "agent-0";
            }
        }
    }))
    .await;
    assert_eq!(received.iter().filter(|ok| **ok).count(), 199);
    assert!(first[0].sync().await.is_empty(), "no echo to the sender");
    drop(clients);
    let report = srv.stop();
    assert_eq!(report.connections, 200);
    assert_eq!(report.refused, 0);
}

#[tokio::test]
async fn connections_over_the_limit_are_refused() {
    let mut opts = options(PolicyKind::Spec);
    opts.limits.max_connections = 2;
    let srv = start(opts);
    let _a = Client::named(srv.addr, "agent-a").await;
    let _b = Client::named(srv.addr, "agent-b").await;
    let third = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::connect_async(format!("ws://{}", srv.addr)),
    )
    .await
    .expect("answers in time");
    assert!(third.is_err(), "the third connection must be refused");
    let report = srv.stop();
    assert_eq!((report.connections, report.refused), (2, 1));
}

/// The binary: `herdsim serve` prints its address, serves, and on SIGTERM
/// closes the connections (code 1001) and exits 0.
#[cfg(unix)]
#[tokio::test]
async fn the_binary_serves_and_stops_cleanly_on_sigterm() {
    use std::io::BufRead;
    let (_dir, log) = temp_log("serve.jsonl");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("herdsim"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--policy",
            "spec",
            "--log",
        ])
        .arg(&log)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns");
    let stderr = child.stderr.take().expect("stderr");
    let (line_tx, line_rx) = std_mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stderr).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let _ = line_tx.send(first);
        lines.map_while(Result::ok).collect::<Vec<_>>()
    });
    let first = line_rx.recv_timeout(WAIT).expect("prints its address");
    let addr: SocketAddr = first
        .split("ws://")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    assert!(addr.ip().is_loopback());
    let mut c = Client::named(addr, "agent-a").await;
    c.join("#general").await;
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    assert_eq!(c.closed().await, Some(CloseCode::Away));
    let exit = exited(&mut child);
    assert_eq!(exit.code(), Some(0));
    let rest = reader.join().expect("reader");
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
    let text = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["agent"], "agent-a");
    assert_eq!(lines[0]["role"], "agent");
    assert_eq!(
        lines[0]["event"],
        json!({"type": "JOIN", "channel": "#general"})
    );
    assert_eq!(lines[1]["event"], json!({"type": "DISCONNECT"}));
    assert!(lines[0]["at_ms"].as_u64() <= lines[1]["at_ms"].as_u64());
}

#[tokio::test]
async fn hostile_frames_never_panic_the_server() {
    let mut opts = options(PolicyKind::Agentchat036);
    // agentchat's flood limit would close this connection at its 11th
    // frame before identifying (its own test: tests/serve_hostile.rs).
    opts.limits.agentchat_flood_close = false;
    let srv = start(opts);
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let frames: Vec<String> = vec![
        String::new(),
        "null".into(),
        "1e999".into(),
        "\"PING\"".into(),
        deep,
        r#"{"type":null}"#.into(),
        r#"{"type":7}"#.into(),
        r#"{"type":"IDENTIFY"}"#.into(),
        r#"{"type":"IDENTIFY","name":"x","pubkey":5}"#.into(),
        r#"{"type":"IDENTIFY","name":"x","pubkey":"-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n"}"#.into(),
        r#"{"type":"VERIFY_IDENTITY"}"#.into(),
        r#"{"type":"VERIFY_IDENTITY","challenge_id":"c","signature":"AAAA","timestamp":1}"#.into(),
        r#"{"type":"IDENTIFY","name":"hostile"}"#.into(),
        r#"{"type":"JOIN"}"#.into(),
        r##"{"type":"JOIN","channel":["#a"]}"##.into(),
        r#"{"type":"JOIN","channel":"no-hash"}"#.into(),
        r##"{"type":"JOIN","channel":"#general"}"##.into(),
        r##"{"type":"LEAVE","channel":"#nowhere"}"##.into(),
        r##"{"type":"RESPONDING_TO","msg_id":"m","started_at":18446744073709551616,"channel":"#general"}"##.into(),
        r##"{"type":"RESPONDING_TO","msg_id":"m","started_at":-9223372036854775808,"channel":"#general"}"##.into(),
        r##"{"type":"RESPONDING_TO","msg_id":"m","started_at":0,"channel":"#general"}"##.into(),
        r##"{"type":"RESPONDING_TO","msg_id":"m","started_at":1,"channel":"@hostile"}"##.into(),
        r#"{"type":"MSG","to":"@","content":"x"}"#.into(),
        r#"{"type":"MSG","to":"@nobody","content":"x"}"#.into(),
        r#"{"type":"MSG","to":"@hostile","content":"to myself"}"#.into(),
        r##"{"type":"MSG","to":"#general","content":7}"##.into(),
        r#"{"type":"DISCONNECT"}"#.into(),
        r#"{"type":"PING","extra":{"a":[1,2,3]}}"#.into(),
    ];
    let mut c = Client::connect(srv.addr).await;
    for f in &frames {
        c.send_raw(Message::text(f.clone())).await;
    }
    c.send_raw(Message::binary(vec![0xff, 0xfe, 0x00])).await;
    // Still alive and identified, still a member of #general (a client
    // cannot send the replay format's DISCONNECT event).
    let before = c.sync().await;
    assert!(
        before.iter().any(|v| v["code"] == "INVALID_MSG"
            && v["message"].as_str().unwrap_or("").contains("DISCONNECT")),
        "{before:?}"
    );
    let mut other = Client::named(srv.addr, "other").await;
    other.join("#general").await;
    other
        .send(json!({"type": "MSG", "to": "#general", "content": "still there?"}))
        .await;
    loop {
        let v = c.next().await;
        if v["type"] == "MSG" && v["from"] == "other" {
            break;
        }
    }
    c.send(json!({"type": "PING"})).await;
    loop {
        if c.next().await["type"] == "PONG" {
            break;
        }
    }
    srv.stop();
}

/// `wss://`: the same protocol behind TLS (test CA, tests/data/tls): the
/// handshake, a relayed message, arbitration, and an oversized frame
/// (whose unread rest is drained through the TLS layer before the close);
/// a plain `ws://` client or one that does not trust the CA gets no
/// connection, and the server serves on.
#[tokio::test]
async fn tls_serves_the_same_protocol() {
    let mut opts = options(PolicyKind::Spec);
    opts.limits.max_frame_bytes = 1024;
    opts.tls = Some(
        herdsim::tls::server_config(&tls_data("server.pem"), &tls_data("server.key"))
            .expect("test certificate loads"),
    );
    let srv = start(opts);
    let mut op = Client::connect_tls(srv.addr)
        .await
        .identify("operator")
        .await;
    let mut a = Client::connect_tls(srv.addr)
        .await
        .identify("agent-a")
        .await;
    let mut b = Client::connect_tls(srv.addr)
        .await
        .identify("agent-b")
        .await;
    for c in [&mut op, &mut a, &mut b] {
        c.join("#general").await;
    }
    op.send(json!({"type": "MSG", "id": "m1", "to": "#general", "content": "over TLS"}))
        .await;
    assert_eq!(a.expect("MSG").await["content"], "over TLS");
    assert_eq!(b.expect("MSG").await["id"], "m1");
    a.send(claim("m1", 100)).await;
    assert_eq!(b.expect("RESPONDING_TO").await["from"], "agent-a");
    b.send(claim("m1", 200)).await;
    loop {
        let v = b.next().await;
        if v["type"] == "YIELD" {
            break;
        }
    }
    // Not TLS, or TLS without the CA: refused at the handshake.
    let plain = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::connect_async(format!("ws://{}", srv.addr)),
    )
    .await
    .expect("answers in time");
    assert!(plain.is_err(), "a ws:// client got a connection");
    let untrusted = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::connect_async_tls_with_config(
            format!("wss://localhost:{}", srv.addr.port()),
            None,
            true,
            Some(tokio_tungstenite::Connector::Rustls(
                herdsim::tls::client_config(None).expect("roots"),
            )),
        ),
    )
    .await
    .expect("answers in time");
    let e = untrusted.expect_err("a client without the CA is refused");
    assert!(e.to_string().contains("certificate"), "{e}");
    let big = json!({"type": "MSG", "to": "#general", "content": "x".repeat(2000)});
    a.send(big).await;
    let e = loop {
        // (b's claim, relayed to a, may come first)
        let v = a.next().await;
        if v["type"] == "ERROR" {
            break v;
        }
    };
    assert_eq!(e["code"], "FRAME_TOO_LARGE", "{e}");
    assert_eq!(a.closed().await, Some(CloseCode::Size));
    b.send(json!({"type": "PING"})).await;
    loop {
        if b.next().await["type"] == "PONG" {
            break;
        }
    }
    let report = srv.stop();
    assert_eq!(report.stats.yields, 1);
}

/// The binary with `--tls-cert/--tls-key` listens on `wss://`; the two
/// flags go together and a bad file is bad input naming it.
#[test]
fn tls_flags() {
    let cert = tls_data("server.pem");
    let key = tls_data("server.key");
    let (dir, _) = temp_log("unused");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not PEM").expect("write");
    let missing = dir.path().join("missing.pem");
    let other = tls_data("other.key");
    let run = |args: &[&std::ffi::OsStr]| {
        assert_cmd::Command::cargo_bin("herdsim")
            .expect("binary")
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .expect("runs")
    };
    let cases: Vec<(Vec<&std::ffi::OsStr>, String)> = vec![
        (
            vec!["--tls-cert".as_ref(), cert.as_os_str()],
            "--tls-key".into(),
        ),
        (
            vec!["--tls-key".as_ref(), key.as_os_str()],
            "--tls-cert".into(),
        ),
        (
            vec![
                "--tls-cert".as_ref(),
                garbage.as_os_str(),
                "--tls-key".as_ref(),
                key.as_os_str(),
            ],
            garbage.display().to_string(),
        ),
        (
            vec![
                "--tls-cert".as_ref(),
                cert.as_os_str(),
                "--tls-key".as_ref(),
                missing.as_os_str(),
            ],
            missing.display().to_string(),
        ),
        (
            vec![
                "--tls-cert".as_ref(),
                cert.as_os_str(),
                "--tls-key".as_ref(),
                other.as_os_str(),
            ],
            "--tls-key".into(),
        ),
    ];
    for (args, named) in cases {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("herdsim: error: "), "{err}");
        assert!(err.contains(&named), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn bad_flags_and_an_unwritable_log_are_input_errors() {
    let (dir, _) = temp_log("unused");
    let missing = dir.path().join("no/such/dir/log.jsonl");
    let out = assert_cmd::Command::cargo_bin("herdsim")
        .expect("binary")
        .args(["serve", "--listen", "127.0.0.1:0", "--log"])
        .arg(&missing)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("herdsim: error: --log "), "{err}");
    assert!(err.contains("log.jsonl"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for bad in [
        vec!["--listen", "localhost"],
        vec!["--policy", "nope"],
        vec!["--max-frame-bytes", "1"],
        vec!["--rate-burst", "0"],
        vec!["--ttl-ms", "0"],
    ] {
        let out = assert_cmd::Command::cargo_bin("herdsim")
            .expect("binary")
            .arg("serve")
            .args(&bad)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn a_port_in_use_is_a_failure_naming_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let addr = taken.local_addr().expect("addr");
    let out = assert_cmd::Command::cargo_bin("herdsim")
        .expect("binary")
        .args(["serve", "--listen", &addr.to_string()])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("herdsim: error: cannot listen on {addr}")),
        "{err}"
    );
}

/// stderr on a full disk: the startup and shutdown lines are lost, the
/// server neither panics nor fails (the same rule as every subcommand).
#[tokio::test]
async fn a_full_stderr_never_panics_the_server() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    // Its address cannot be read from stderr: give it a port that was free.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("herdsim"))
        .args(["serve", "--listen", &addr.to_string()])
        .stderr(full)
        .spawn()
        .expect("spawns");
    // It serves (it accepts connections after printing its address line):
    // a client is welcomed.
    let deadline = Instant::now() + WAIT;
    let ws = loop {
        match tokio_tungstenite::connect_async(format!("ws://{addr}")).await {
            Ok((ws, _)) => break ws,
            Err(e) => {
                if let Some(s) = child.try_wait().expect("wait") {
                    panic!("herdsim serve ended early: {s:?}");
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("herdsim serve never accepted a connection: {e}");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let mut c = Client::over(ws).identify("agent-a").await;
    c.join("#general").await;
    assert!(
        child.try_wait().expect("wait").is_none(),
        "herdsim serve ended early"
    );
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = exited(&mut child);
    assert_eq!(exit.code(), Some(0), "{exit:?}");
}

/// Wait (up to `WAIT`) for a child to end; kill it and fail if it does not.
fn exited(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("herdsim serve did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
