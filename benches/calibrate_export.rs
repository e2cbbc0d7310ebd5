//! `herdsim calibrate` on a large chat export (docs/exports.md, "How long
//! and how much memory"): 10^6 messages of a DiscordChatExporter export,
//! 250 000 questions and 6 bots, written to a temporary file once, then
//! calibrated as `herdsim calibrate --reps 0 --no-plot` does (stream,
//! map, measure the channel, fit, write).
//!
//!   cargo bench --bench calibrate_export
//!
//! The export: a question every 30 s on average (Poisson), each bot
//! answering with p 0.5 after a lognormal 4 s (p50), about one in ten
//! answers replied to by another bot; texts of 40 to 200 bytes (skipped
//! by the reader, but parsed past).
//!
//! One sample is one whole calibration (several seconds): 10 samples.

#[path = "common/calibrate.rs"]
mod common;

use criterion::{Criterion, criterion_group};
use herdsim::calibrate::export;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use serde_json::json;
use std::io::Write;
use std::path::Path;

const QUESTIONS: usize = 250_000;
const BOTS: usize = 6;

/// An ISO 8601 time from ms since 2024-01-01T00:00:00Z (within 400 days).
fn iso(ms: f64) -> String {
    let ms = ms as i64;
    let (day, rest) = (ms / 86_400_000, ms % 86_400_000);
    let (month, dom) = if day < 31 {
        (1, day + 1)
    } else if day < 60 {
        (2, day - 30)
    } else {
        (3 + (day - 60) / 31, (day - 60) % 31 + 1)
    };
    format!(
        "2024-{month:02}-{dom:02}T{:02}:{:02}:{:02}.{:03}+00:00",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// Write the export to `path`; returns its messages.
pub fn write_export(path: &Path, questions: usize, bots: usize) -> u64 {
    let file = std::fs::File::create(path).expect("create export");
    let mut out = std::io::BufWriter::new(file);
    let mut r = ChaCha8Rng::seed_from_u64(1);
    let gap = Exp::new(1.0 / 30_000.0).expect("rate");
    let inference = LogNormal::new(4000f64.ln(), 0.6).expect("lognormal");
    let text = |r: &mut ChaCha8Rng| "lorem ipsum ".repeat(r.random_range(4..17));
    write!(
        out,
        "{{\"guild\": {{\"id\": \"1\", \"name\": \"bench\"}}, \"channel\": {{\"id\": \"2\", \
         \"name\": \"general\"}}, \"messages\": ["
    )
    .expect("write");
    let mut n = 0u64;
    let mut msg = |out: &mut std::io::BufWriter<std::fs::File>, m: serde_json::Value| {
        if n > 0 {
            out.write_all(b",\n").expect("write");
        }
        serde_json::to_writer(&mut *out, &m).expect("write");
        n += 1;
    };
    let mut t = 0.0;
    for q in 0..questions {
        t += gap.sample(&mut r);
        let content = text(&mut r);
        msg(
            &mut out,
            json!({"id": format!("q{q}"), "type": "Default", "timestamp": iso(t),
                   "timestampEdited": null, "content": content,
                   "author": {"id": format!("u{}", q % 50), "name": "someone", "isBot": false}}),
        );
        let mut answers: Vec<(f64, usize)> = Vec::new();
        for b in 0..bots {
            if r.random::<f64>() < 0.5 {
                answers.push((t + inference.sample(&mut r), b));
            }
        }
        answers.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (at, b) in answers {
            let content = text(&mut r);
            msg(
                &mut out,
                json!({"id": format!("a{q}-{b}"), "type": "Reply", "timestamp": iso(at),
                       "timestampEdited": null, "content": content,
                       "author": {"id": format!("bot{b}"), "name": format!("bot{b}"), "isBot": true},
                       "reference": {"messageId": format!("q{q}")}}),
            );
            if r.random::<f64>() < 0.1 {
                let other = (b + 1) % bots;
                let content = text(&mut r);
                msg(
                    &mut out,
                    json!({"id": format!("c{q}-{b}"), "type": "Reply",
                           "timestamp": iso(at + 1500.0), "timestampEdited": null,
                           "content": content,
                           "author": {"id": format!("bot{other}"), "name": format!("bot{other}"),
                                      "isBot": true},
                           "reference": {"messageId": format!("a{q}-{b}")}}),
                );
            }
        }
    }
    write!(out, "]}}").expect("write");
    out.flush().expect("flush export");
    n
}

fn calibrate_big_export(c: &mut Criterion) {
    common::bench(
        c,
        "calibrate_export",
        "big.json",
        "messages",
        |path| write_export(path, QUESTIONS, BOTS),
        |opts, stop| {
            export::run(opts, &export::Settings::default(), &(), stop).expect("calibrates");
        },
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = calibrate_big_export
}

/// With HERDSIM_EXPORT_LOG=PATH, only write the export there (to measure
/// the command line on it: docs/exports.md); else the benchmark.
fn main() {
    common::main(
        "HERDSIM_EXPORT_LOG",
        "messages",
        |path| write_export(path, QUESTIONS, BOTS),
        benches,
    );
}
