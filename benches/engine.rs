//! Engine throughput: the classic "hold model". A queue holds a fixed number
//! of pending events; every pop schedules a replacement at now + a random
//! delay, and with probability 1/10 a random pending event is cancelled and
//! rescheduled as well. One element = one delivered event (one pop, one
//! schedule, plus a cancel + schedule for 10% of them), so criterion's
//! "elem/s" figure is events per second. The `_posted` cases schedule with
//! `post_in` (no key, no cancelling), as the simulator schedules most of its
//! events.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use herdsim::engine::{Engine, EventKey, Time};
use std::hint::black_box;
use std::time::Duration;

/// Events delivered per benchmark iteration.
const BATCH: u64 = 10_000;

/// SplitMix64: tiny and fast, so the bench measures the queue, not the RNG.
struct SplitMix(u64);

impl SplitMix {
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform-ish in `0..n` (multiply-shift; bias irrelevant here).
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Hold-model state: `keys[i]` is the key of the one pending event whose
/// payload is `i`.
struct Hold {
    engine: Engine<u32>,
    keys: Vec<EventKey>,
    rng: SplitMix,
    max_delay: Time,
    cancel_per_mille: u64,
    /// Schedule with `post_in` (no keys, no cancels).
    post: bool,
}

impl Hold {
    fn new(pending: u32, max_delay: Time, cancel_per_mille: u64, post: bool) -> Self {
        let mut rng = SplitMix(42);
        let mut engine = Engine::with_capacity(pending as usize);
        let keys = (0..pending)
            .map(|i| engine.schedule_in(rng.below(max_delay), i))
            .collect();
        Hold {
            engine,
            keys,
            rng,
            max_delay,
            cancel_per_mille,
            post,
        }
    }

    #[inline]
    fn step(&mut self) {
        let (_, i) = self.engine.pop().expect("hold model never empties");
        let d = self.rng.below(self.max_delay);
        if self.post {
            self.engine.post_in(d, i);
            return;
        }
        self.keys[i as usize] = self.engine.schedule_in(d, i);
        if self.rng.below(1000) < self.cancel_per_mille {
            let j = self.rng.below(self.keys.len() as u64) as usize;
            let cancelled = self.engine.cancel(self.keys[j]);
            debug_assert!(cancelled);
            let d = self.rng.below(self.max_delay);
            self.keys[j] = self.engine.schedule_in(d, j as u32);
        }
    }
}

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
