//! The floor embeds in a real agent (issue 40): four processes of
//! `examples/floor_agent.rs` (a WebSocket client around `herdsim-floor`'s
//! agent half and a fake model) against `herdsim serve`, with this test as
//! the operator posting questions. Under `spec` every question gets exactly
//! one answer; the same agents without the floor (`none`) answer some
//! questions more than once.
//!
//! The settings make the contrast certain rather than likely: CSMA waits
//! of 0..1 s and inferences of 1.5..2 s, so without claims every agent has
//! started before any answer can arrive; with claims the first claim
//! reaches the others in milliseconds, far inside the 1.5 s an aborted
//! inference would need to post. Every wait is bounded; the processes are
//! killed when the test ends, pass or fail. The same agents against
//! `examples/floor_server.rs` (the floor behind a minimal transport) show
//! that the server half embeds too.

mod common;

use common::example_bin;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const AGENTS: usize = 4;
const QUESTIONS: usize = 4;
const GAP: Duration = Duration::from_millis(2500);
/// After the last question: the slowest answer is at most 1 s + 2 s away.
const TAIL: Duration = Duration::from_secs(5);
const WAIT: Duration = Duration::from_secs(20);

/// Processes killed on drop, the last started first.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        // The agents first (the server last), so none sees its server vanish.
        for c in self.0.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The first line of `from` that `pick` accepts, within `WAIT`.
fn line_where(
    from: impl std::io::Read + Send + 'static,
    pick: fn(&str) -> Option<String>,
) -> String {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if let Some(got) = pick(&line) {
                let _ = tx.send(got);
                return;
            }
        }
    });
    rx.recv_timeout(WAIT).expect("the line in time")
}

/// Which server the agents talk to.
#[derive(Clone, Copy)]
enum Srv {
    /// `herdsim serve`.
    Herdsim,
    /// `examples/floor_server.rs`: the floor behind a minimal transport.
    Example,
}

/// The server on a free loopback port, and its `ws://` address.
fn serve(srv: Srv, policy: &str, procs: &mut Procs) -> String {
    let listen = ["--listen", "127.0.0.1:0", "--policy", policy];
    let mut cmd = match srv {
        Srv::Herdsim => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_herdsim"));
            c.arg("serve").args(listen);
            c
        }
        Srv::Example => {
            let mut c = Command::new(example_bin("floor_server"));
            // It stops by itself, after the longest run (and is killed at the end).
            let run_ms = (GAP * QUESTIONS as u32 + TAIL + WAIT * 2).as_millis();
            c.args(listen).args(["--run-ms", &run_ms.to_string()]);
            c
        }
    };
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herdsim serve starts");
    let err = child.stderr.take().expect("stderr");
    procs.0.push(child);
    line_where(err, |l| {
        let at = l.find("listening on ws://")?;
        let url = l[at + "listening on ".len()..].split_whitespace().next()?;
        Some(url.to_string())
    })
}

/// Answers per question, from what the operator saw relayed.
fn run(srv: Srv, policy: &str) -> Vec<usize> {
    let mut procs = Procs(Vec::new());
    let url = serve(srv, policy, &mut procs);
    let run_ms = (GAP * QUESTIONS as u32 + TAIL + WAIT)
        .as_millis()
        .to_string();
    let mut outs = Vec::new();
    for i in 0..AGENTS {
        let mut child = Command::new(example_bin("floor_agent"))
            .args([
                "--url",
                &url,
                "--name",
                &format!("agent-{i}"),
                "--policy",
                policy,
            ])
            .args([
                "--csma-min-ms",
                "0",
                "--csma-max-ms",
                "1000",
                "--infer-min-ms",
                "1500",
                "--infer-max-ms",
                "2000",
            ])
            .args(["--seed", &i.to_string(), "--run-ms", &run_ms])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the example agent starts");
        outs.push(child.stdout.take().expect("stdout"));
        procs.0.push(child);
    }
    for out in outs {
        line_where(out, |l| (l == "ready").then(String::new));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let answers = rt.block_on(operate(&url));
    drop(procs);
    answers
}

/// The operator: post the questions, then count the answers relayed.
async fn operate(url: &str) -> Vec<usize> {
    let (mut ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
        .await
        .expect("connects in time")
        .expect("connects");
    for frame in [
        json!({"type": "IDENTIFY", "name": "operator"}),
        json!({"type": "JOIN", "channel": "#general"}),
    ] {
        ws.send(Message::text(frame.to_string()))
            .await
            .expect("sends");
    }
    let mut answers = vec![0; QUESTIONS];
    let start = Instant::now();
    let mut posted = 0;
    let end = GAP * (QUESTIONS as u32 - 1) + TAIL;
    while start.elapsed() < end {
        if posted < QUESTIONS && start.elapsed() >= GAP * posted as u32 {
            let q = json!({"type": "MSG", "to": "#general", "id": format!("q{posted}"),
                           "content": format!("question {posted}")});
            ws.send(Message::text(q.to_string())).await.expect("sends");
            posted += 1;
        }
        let Ok(frame) = tokio::time::timeout(Duration::from_millis(50), ws.next()).await else {
            continue;
        };
        let Some(Ok(Message::Text(t))) = frame else {
            continue;
        };
        let v: Value = serde_json::from_str(&t).expect("the server sends JSON");
        if v["type"] == "MSG"
            && let Some(q) = v["in_reply_to"].as_str()
            && let Some(k) = q.strip_prefix('q').and_then(|k| k.parse::<usize>().ok())
            && k < QUESTIONS
        {
            answers[k] += 1;
        }
    }
    answers
}

#[test]
fn with_the_floor_every_question_gets_one_answer() {
    assert_eq!(run(Srv::Herdsim, "spec"), vec![1; QUESTIONS]);
}

/// The same agents against `examples/floor_server.rs`: the floor embedded
/// behind a minimal WebSocket transport arbitrates as `herdsim serve` does.
#[test]
fn through_the_example_server_every_question_gets_one_answer() {
    assert_eq!(run(Srv::Example, "spec"), vec![1; QUESTIONS]);
}

#[test]
fn without_the_floor_the_same_agents_answer_at_once() {
    for srv in [Srv::Herdsim, Srv::Example] {
        let answers = run(srv, "none");
        assert!(
            answers.iter().any(|&n| n >= 2),
            "no question got two answers: {answers:?}"
        );
        assert!(answers.iter().all(|&n| n >= 1), "{answers:?}");
    }
}

/// The example server's edge and bounds: a frame that is not JSON gets
/// the floor's ERROR (the connection lives on), a frame over 64 KiB
/// ends the connection.
#[test]
fn the_example_server_answers_bad_frames_and_bounds_their_size() {
    let mut procs = Procs(Vec::new());
    let url = serve(Srv::Example, "spec", &mut procs);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (mut ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(&url))
            .await
            .expect("connects in time")
            .expect("connects");
        let hello = json!({"type": "IDENTIFY", "name": "agent-x"}).to_string();
        ws.send(Message::text(hello)).await.expect("sends");
        let welcome = read_text(&mut ws).await.expect("WELCOME");
        assert!(welcome.contains("WELCOME"), "{welcome}");
        ws.send(Message::text("{not json")).await.expect("sends");
        let error = read_text(&mut ws).await.expect("an ERROR");
        assert!(
            error.starts_with(r#"{"type":"ERROR","code":"bad_message""#),
            "{error}"
        );
        let big = format!("\"{}\"", "x".repeat(70 * 1024));
        let _ = ws.send(Message::text(big)).await;
        assert_eq!(read_text(&mut ws).await, None, "the connection ends");
    });
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next text frame, or `None` when the connection ends; within `WAIT`.
async fn read_text(ws: &mut Ws) -> Option<String> {
    loop {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("in time");
        match frame {
            Some(Ok(Message::Text(t))) => return Some(t.to_string()),
            Some(Ok(Message::Close(_)) | Err(_)) | None => return None,
            Some(Ok(_)) => {}
        }
    }
}
