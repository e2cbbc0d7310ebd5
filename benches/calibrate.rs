//! `herdsim calibrate` on a large log (docs/observe.md, "How long and how
//! much memory"): 10^6 frames of a realistic recording, 10^5 questions
//! and 8 agents, written to a temporary file once, then calibrated as
//! `herdsim calibrate --reps 0 --no-plot` does (read, fit, write).
//!
//!   cargo bench --bench calibrate
//!
//! The log: agentchat-like server stamps (`ts`, whole ms), Poisson
//! questions every 30 s, each agent answering with p 0.6 after a uniform
//! 2..8 s wait; agents whose wait ends within two link delays (20 ms
//! each) of the first claim claim too (relayed, as under `spec`); the
//! first claimant answers after a lognormal inference (p50 3 s). Each
//! broadcast is recorded on three connections (a recording: the copies
//! are skipped), with one uplink frame per answer: about 10 frames a
//! question.
//!
//! One sample is one whole calibration (several seconds): 10 samples.

#[path = "common/calibrate.rs"]
mod common;

use criterion::{Criterion, criterion_group};
use herdsim::calibrate;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use serde_json::json;
use std::io::Write;
use std::path::Path;

/// Questions in the log (about 10 frames each).
const QUESTIONS: usize = 100_000;
const AGENTS: usize = 8;

/// The log being written: its lines counted.
struct Log {
    out: std::io::BufWriter<std::fs::File>,
    lines: u64,
}

impl Log {
    fn line(&mut self, ms: f64, conn: u32, dir: &str, frame: &str) {
        let l = json!({"ms": ms, "conn": conn, "dir": dir, "frame": frame});
        writeln!(self.out, "{l}").expect("write log");
        self.lines += 1;
    }

    /// A frame the server sent to the three connections.
    fn broadcast(&mut self, ms: f64, frame: serde_json::Value) {
        let text = frame.to_string();
        for c in 0..3 {
            self.line(ms + 0.1 * f64::from(c), c, "down", &text);
        }
    }
}

/// Write the log to `path`; returns its lines.
pub fn write_log(path: &Path, questions: usize, agents: usize) -> u64 {
    let file = std::fs::File::create(path).expect("create log");
    let mut log = Log {
        out: std::io::BufWriter::new(file),
        lines: 0,
    };
    let mut r = ChaCha8Rng::seed_from_u64(1);
    let gap = Exp::new(1.0 / 30_000.0).expect("rate");
    let inference = LogNormal::new(3000f64.ln(), 0.6).expect("lognormal");
    let link = 20.0;
    let mut t = 1_000_000.0;
    for q in 0..questions {
        t += gap.sample(&mut r);
        log.broadcast(
            t,
            json!({"type": "MSG", "ts": t.floor(), "from": "@op", "from_name": "operator",
                   "to": "#general", "content": format!("question {q}"), "msg_id": format!("q{q}")}),
        );
        let mut starts: Vec<(f64, usize)> = Vec::new();
        for a in 0..agents {
            if r.random::<f64>() < 0.6 {
                starts.push((t + link + 2000.0 + 6000.0 * r.random::<f64>(), a));
            }
        }
        starts.sort_by(|x, y| x.0.total_cmp(&y.0));
        let Some(&(first, winner)) = starts.first() else {
            continue;
        };
        for &(s, a) in starts.iter().filter(|(s, _)| *s < first + 2.0 * link) {
            log.broadcast(
                s + link,
                json!({"type": "RESPONDING_TO", "ts": (s + link).floor(), "from": format!("@a{a}"),
                       "from_name": format!("agent-{a}"), "channel": "#general",
                       "msg_id": format!("q{q}"), "started_at": s.floor() + 5.0}),
            );
        }
        let at = first + link + inference.sample(&mut r);
        log.line(at, 1, "up", "{}");
        log.broadcast(
            at,
            json!({"type": "MSG", "ts": at.floor(), "from": format!("@a{winner}"),
                   "from_name": format!("agent-{winner}"), "to": "#general", "content": "answer",
                   "msg_id": format!("r{q}"), "in_reply_to": format!("q{q}")}),
        );
    }
    log.out.flush().expect("flush log");
    log.lines
}

fn calibrate_big_log(c: &mut Criterion) {
    common::bench(
        c,
        "calibrate",
        "big.jsonl",
        "frames",
        |path| write_log(path, QUESTIONS, AGENTS),
        |opts, stop| {
            calibrate::run(opts, &(), stop).expect("calibrates");
        },
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = calibrate_big_log
}

/// With HERDSIM_CALIBRATE_LOG=PATH, only write the log there (to measure
/// the command line on it: docs/observe.md); else the benchmark.
fn main() {
    common::main(
        "HERDSIM_CALIBRATE_LOG",
        "lines",
        |path| write_log(path, QUESTIONS, AGENTS),
        benches,
    );
}
