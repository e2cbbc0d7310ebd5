//! The speed goals of docs/performance.md, one criterion group each.
//! Criterion's "elem/s" is simulation events per second.
//!
//!   cargo bench --bench goals
//!
//! - `default_spec_20_reps`: the default scenario under `spec`, 20
//!   replications on one thread (what `herdsim run --set
//!   'policies=["spec"]' --jobs 1` simulates, without parsing and output).
//! - `agents_1000_msgs_100/{none,spec}`: 1000 agents, respond_p 0.1 (the
//!   large-channel scenario), a tenth of the goal's 1000 messages so that
//!   one iteration stays under a second; the full figure is a one-off
//!   command in docs/performance.md.
//! - `agents_10000_msgs_10/spec`: 10 000 agents, a tenth of the goal's
//!   100 messages, likewise.
//! - `tune_default_200_msgs`: `tune` of the default scenario at 200
//!   messages per replication (a fifth) with the 15 s p95 budget, on 2
//!   threads; the full figure is a one-off command.
//! - `engine_hold/posted_1000`: the bare engine's hold model (1000 events
//!   pending, each pop posts one more at a uniform delay under 10 ms), the
//!   yardstick of "the whole model within 3x of its engine": compare its
//!   elem/s with `default_spec_20_reps`'.
//!
//! Every group takes 10 samples: on a shared 2-core machine the whole
//! file runs in about three minutes.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use herdsim::floor::PolicyKind;
use herdsim::model::{Prepared, simulate};
use herdsim::scenario::Loaded;
use herdsim::sweep::rep_seed;
use herdsim::tune::space::Space;
use herdsim::tune::{Settings, Weights, tune};
use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[path = "common/hold.rs"]
mod hold;

use hold::Hold;

/// The same allocator as the `herdsim` binary, so the figures match it.
#[global_allocator]
static GLOBAL: herdsim::allocator::Mimalloc = herdsim::allocator::Mimalloc;

fn loaded(sets: &[String]) -> Loaded {
    let mut l = Loaded::builtin_default().expect("default scenario");
    for s in sets {
        l.apply_set(s).expect("valid override");
    }
    l
}

fn prepared(sets: &[String]) -> Prepared {
    let l = loaded(sets);
    Prepared::new(&l.base().expect("resolves"), Path::new(".")).expect("prepares")
}

/// Run replications `0..reps` as `herdsim run` seeds them; total events.
fn reps(w: &Prepared, policy: PolicyKind, reps: u32) -> u64 {
    (0..reps)
        .map(|r| {
            simulate(w, policy, rep_seed(1, 0, r), None)
                .expect("runs")
                .get("events")
                .unwrap_or(0.0) as u64
        })
        .sum()
}

fn default_spec_20_reps(c: &mut Criterion) {
    let w = prepared(&[]);
    let mut g = c.benchmark_group("default_spec_20_reps");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Elements(reps(&w, PolicyKind::Spec, 20)));
    g.bench_function("jobs_1", |b| {
        b.iter(|| black_box(reps(&w, PolicyKind::Spec, 20)))
    });
    g.finish();
}

/// The large-channel scenario's agents (respond_p 0.1), `n` of them.
fn channel(n: u32, msgs: u32) -> Prepared {
    prepared(&[
        format!("agents.0.count={n}"),
        "agents.0.respond_p=0.1".into(),
        format!("workload.count={msgs}"),
    ])
}

fn large_channels(c: &mut Criterion) {
    let mut g = c.benchmark_group("agents_1000_msgs_100");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    let w = channel(1000, 100);
    for policy in [PolicyKind::None, PolicyKind::Spec] {
        g.throughput(Throughput::Elements(reps(&w, policy, 1)));
        g.bench_with_input(BenchmarkId::from_parameter(policy), &policy, |b, &p| {
            b.iter(|| black_box(reps(&w, p, 1)))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("agents_10000_msgs_10");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    let w = channel(10_000, 10);
    g.throughput(Throughput::Elements(reps(&w, PolicyKind::Spec, 1)));
    g.bench_function("spec", |b| {
        b.iter(|| black_box(reps(&w, PolicyKind::Spec, 1)))
    });
    g.finish();
}

fn tune_default(c: &mut Criterion) {
    let l = loaded(&["workload.count=200".into()]);
    let space = Space::new(&l, &[]).expect("default search space");
    let base = l.base().expect("resolves");
    let settings = Settings {
        policy: PolicyKind::Spec,
        current_policy: PolicyKind::Spec,
        seed: base.seed,
        reps: base.reps,
        max_reps: base.reps * 4,
        levels: space.default_levels(),
        weights: Weights::default(),
        budget_ms: Some(15_000.0),
        threads: 2,
        max_pending: usize::MAX,
    };
    let mut g = c.benchmark_group("tune_default_200_msgs");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20));
    let never = AtomicBool::new(false);
    g.bench_function("jobs_2", |b| {
        b.iter(|| black_box(tune(&l, &space, &settings, &(), &never).expect("tunes")))
    });
    g.finish();
}

/// The hold model of `benches/engine.rs` (`common/hold.rs`), posted (no
/// keys): the engine alone, in the same run as the model.
fn engine_hold(c: &mut Criterion) {
    const BATCH: u64 = 100_000;
    let mut h = Hold::new(1000, 10_000, 0, true);
    let mut g = c.benchmark_group("engine_hold");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(BATCH));
    g.bench_function("posted_1000", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                h.step();
            }
            black_box(h.engine.now())
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    // No plots: criterion's plotters route needs system fonts.
    config = Criterion::default().without_plots();
    targets = engine_hold, default_spec_20_reps, large_channels, tune_default
}
criterion_main!(benches);
