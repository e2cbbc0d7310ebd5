//! Parallel scaling of a sweep: the same plan (the csma-window scenario
//! at 1000 messages: 6 points x 2 policies x 4 replications = 48 runs)
//! executed by `sweep::execute` on a pool of 1 and of 2 threads, without
//! process start-up, scenario parsing or output writing.
//!
//!   cargo bench --bench sweep
//!
//! Two measurements:
//! - criterion's `sweep_48_runs/jobs/1` and `/jobs/2`;
//! - then `speedup`: 15 rounds, each timing 1 thread then 2 threads back
//!   to back, and the median of the per-round ratios. On a VM whose speed
//!   drifts by tens of percent over seconds, adjacent pairs compare like
//!   with like; criterion's two groups run a minute apart.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use herdsim::floor::PolicyKind;
use herdsim::model::Prepared;
use herdsim::scenario::Loaded;
use herdsim::sweep::{self, Job, Row};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

/// The same allocator as the `herdsim` binary, so the figures match it.
#[global_allocator]
static GLOBAL: herdsim::allocator::Mimalloc = herdsim::allocator::Mimalloc;

const POLICIES: [PolicyKind; 2] = [PolicyKind::None, PolicyKind::Spec];
const REPS: u32 = 4;

struct Plan {
    prepared: Vec<(usize, Prepared)>,
    jobs: Vec<Job>,
}

impl Plan {
    fn new() -> Plan {
        let mut l = Loaded::from_file(Path::new("scenarios/csma-window.toml")).expect("scenario");
        l.apply_set("workload.count=1000").expect("valid override");
        let prepared: Vec<(usize, Prepared)> = l
            .points()
            .expect("resolves")
            .iter()
            .map(|p| {
                let w = Prepared::new(&p.scenario, Path::new("scenarios")).expect("prepares");
                (p.index, w)
            })
            .collect();
        let indexes: Vec<usize> = prepared.iter().map(|(i, _)| *i).collect();
        let jobs = sweep::plan(1, &indexes, &POLICIES, REPS);
        Plan { prepared, jobs }
    }

    fn run(&self, threads: usize) -> Vec<Row> {
        let record = |_: &Row| Ok(());
        let pool = sweep::pool(threads).expect("pool");
        let stop = std::sync::atomic::AtomicBool::new(false);
        let world = |p: usize| {
            let i = self.prepared.binary_search_by_key(&p, |(q, _)| *q).ok()?;
            Some(&self.prepared[i].1)
        };
        sweep::execute(&self.jobs, &world, &pool, &record, &stop).expect("sweep runs")
    }
}

fn sweep_threads(c: &mut Criterion) {
    let plan = Plan::new();
    let mut g = c.benchmark_group(format!("sweep_{}_runs", plan.jobs.len()));
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    g.throughput(Throughput::Elements(plan.jobs.len() as u64));
    for threads in [1usize, 2] {
        g.bench_with_input(BenchmarkId::new("jobs", threads), &threads, |b, &t| {
            b.iter(|| black_box(plan.run(t)))
        });
    }
    g.finish();
}

/// Alternate 1 and 2 threads and report the median ratio.
fn speedup_pairs() {
    const ROUNDS: usize = 15;
    let plan = Plan::new();
    black_box(plan.run(2)); // warm up
    let mut ratios = Vec::with_capacity(ROUNDS);
    println!(
        "speedup: {} runs per sweep, 1 thread then 2 threads",
        plan.jobs.len()
    );
    for round in 1..=ROUNDS {
        let t = Instant::now();
        black_box(plan.run(1));
        let one = t.elapsed();
        let t = Instant::now();
        black_box(plan.run(2));
        let two = t.elapsed();
        let r = one.as_secs_f64() / two.as_secs_f64();
        println!(
            "  round {round:2}: 1 thread {:7.1} ms, 2 threads {:7.1} ms, ratio {r:.2}",
            one.as_secs_f64() * 1e3,
            two.as_secs_f64() * 1e3
        );
        ratios.push(r);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "speedup: median {:.2} (min {:.2}, max {:.2}) over {ROUNDS} rounds",
        ratios[ROUNDS / 2],
        ratios[0],
        ratios[ROUNDS - 1]
    );
}

criterion_group! {
    name = benches;
    // No plots: criterion's plotters route needs system fonts.
    config = Criterion::default().without_plots();
    targets = sweep_threads
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo test --benches` runs bench targets with `--test`: keep that quick.
    if !std::env::args().any(|a| a == "--test" || a == "--list") {
        speedup_pairs();
    }
}
