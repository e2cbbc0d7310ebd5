//! Whole-simulation throughput: one replication of the default scenario
//! per policy, and a channel of 10, 100 and 1000 agents (relays are the
//! N-squared risk). Criterion's "elem/s" is simulation events per second.
//!
//!   cargo bench --bench scenario

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use herdsim::floor::PolicyKind;
use herdsim::model::{Prepared, simulate};
use herdsim::scenario::Loaded;
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

/// The same allocator as the `herdsim` binary, so the figures match it.
#[global_allocator]
static GLOBAL: herdsim::allocator::Mimalloc = herdsim::allocator::Mimalloc;

fn world(sets: &[String]) -> Prepared {
    let mut l = Loaded::builtin_default().expect("default scenario");
    for s in sets {
        l.apply_set(s).expect("valid override");
    }
    Prepared::new(&l.base().expect("resolves"), Path::new(".")).expect("prepares")
}

fn events(w: &Prepared, policy: PolicyKind) -> u64 {
    simulate(w, policy, 1, None)
        .expect("runs")
        .get("events")
        .unwrap_or(0.0) as u64
}

fn default_scenario(c: &mut Criterion) {
    let w = world(&[]);
    let mut g = c.benchmark_group("default_scenario_one_rep");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for policy in PolicyKind::ALL {
        g.throughput(Throughput::Elements(events(&w, policy)));
        g.bench_with_input(BenchmarkId::from_parameter(policy), &policy, |b, &p| {
            b.iter(|| black_box(simulate(&w, p, 1, None)))
        });
    }
    g.finish();
}

fn channel_size(c: &mut Criterion) {
    let mut g = c.benchmark_group("channel_agents_100_msgs");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for n in [10u32, 100, 1000] {
        let w = world(&[
            format!("agents.0.count={n}"),
            "agents.0.respond_p=0.1".into(),
            "workload.count=100".into(),
        ]);
        g.throughput(Throughput::Elements(events(&w, PolicyKind::Spec)));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| black_box(simulate(&w, PolicyKind::Spec, 1, None)))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    // No plots: criterion's plotters route needs system fonts.
    config = Criterion::default().without_plots();
    targets = default_scenario, channel_size
}
criterion_main!(benches);
