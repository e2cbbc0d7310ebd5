//! Engine throughput: the classic "hold model". A queue holds a fixed number
//! of pending events; every pop schedules a replacement at now + a random
//! delay, and with probability 1/10 a random pending event is cancelled and
//! rescheduled as well. One element = one delivered event (one pop, one
//! schedule, plus a cancel + schedule for 10% of them), so criterion's
//! "elem/s" figure is events per second. The `_posted` cases schedule with
//! `post_in` (no key, no cancelling), as the simulator schedules most of its
//! events.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
#[path = "common/hold.rs"]
mod hold;

use hold::Hold;
use std::hint::black_box;
use std::time::Duration;

/// Events delivered per benchmark iteration.
const BATCH: u64 = 10_000;

fn hold(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_hold");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(20)
        .throughput(Throughput::Elements(BATCH));
    for &(name, pending, cancel, post) in &[
        ("pending1000_cancel10pct", 1_000u32, 100u64, false),
        ("pending1000_nocancel", 1_000, 0, false),
        ("pending1000_posted", 1_000, 0, true),
        ("pending100000_cancel10pct", 100_000, 100, false),
        ("pending100000_posted", 100_000, 0, true),
    ] {
        let mut h = Hold::new(pending, 10_000, cancel, post);
        g.bench_function(name, |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    h.step();
                }
                black_box(h.engine.now())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    // No plots: they need system fonts, which CI machines may lack.
    config = Criterion::default().without_plots();
    targets = hold
}
criterion_main!(benches);
