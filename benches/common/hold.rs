//! The engine's hold model, shared by `benches/engine.rs` and
//! `benches/goals.rs` (each includes this file as a module).

use herdsim::engine::{Engine, EventKey, Time};

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
pub struct Hold {
    pub engine: Engine<u32>,
    keys: Vec<EventKey>,
    rng: SplitMix,
    max_delay: Time,
    cancel_per_mille: u64,
    /// Schedule with `post_in` (no keys, no cancels).
    post: bool,
}

impl Hold {
    pub fn new(pending: u32, max_delay: Time, cancel_per_mille: u64, post: bool) -> Self {
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
    pub fn step(&mut self) {
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
