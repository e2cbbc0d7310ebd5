//! The documented upper bounds of a scenario and of a run (docs/limits.md).
//!
//! Every duration, time and count a scenario can give is bounded so that
//! no accepted input can overflow the simulator's integer arithmetic:
//! virtual time is a `u64` of microseconds and the agents' wall clocks an
//! `i64` of microseconds, and with these bounds every sum the simulator
//! forms stays far inside both ranges. Validation refuses anything above a
//! bound (exit 2, naming the key); samples of unbounded distributions
//! (exponential, normal, lognormal) are clamped to [`MAX_DURATION_MS`].

/// Largest value of any duration key or distribution parameter, in ms
/// (1e10 ms, about 115.7 days). A drawn sample above it is clamped to it.
pub const MAX_DURATION_MS: f64 = 1e10;
/// [`MAX_DURATION_MS`] in µs.
pub const MAX_DURATION_US: u64 = 10_000_000_000_000;

/// Largest virtual time a scenario can name (`workload.duration_ms`,
/// `script.*.at_ms`) or that a count-based workload may be expected to
/// last (`workload.count` x `workload.mean_gap_ms`), in ms (1e12 ms,
/// about 31.7 years).
pub const MAX_TIME_MS: f64 = 1e12;

/// The virtual horizon: no run simulates past 1e13 ms (about 317 years)
/// of virtual time; one that would stops with an error. In µs.
pub const HORIZON_US: u64 = 10_000_000_000_000_000;

/// Largest `epoch_ms` (9e15 ms, about the year 287 000): epoch plus the
/// horizon plus the largest clock offset stays inside an `i64` of µs.
pub const MAX_EPOCH_MS: u64 = 9_000_000_000_000_000;

/// Most operator messages (`workload.count`).
pub const MAX_MESSAGES: u64 = 1_000_000_000;

/// Default of `max_events`: events one replication may process before it
/// stops with an error.
pub const DEFAULT_MAX_EVENTS: u64 = 1_000_000_000;
/// Largest `max_events`.
pub const MAX_MAX_EVENTS: u64 = 1_000_000_000_000;

/// Most fallbacks a question may have (`schemes.max_fallbacks`): under
/// `owner` at most the agents but one ever take part; under `selector`
/// each is one more selection.
pub const MAX_FALLBACKS: u32 = 100;

/// Most message ids a squatter pre-claims (`agents.N.squat_ahead`).
pub const MAX_SQUAT_AHEAD: u32 = 100;

/// Largest scenario file, in bytes (16 MiB: a scripted incident of about
/// 100 000 lines).
pub const MAX_SCENARIO_BYTES: u64 = 16 << 20;

/// Largest empirical CSV file, in bytes (64 MiB).
pub const MAX_EMPIRICAL_BYTES: u64 = 64 * 1024 * 1024;

/// Highest `--speed` of `live` (and of `calibrate`'s prediction).
pub const MAX_SPEED: f64 = 100_000.0;

/// Lowest `--speed` (a thousand times slower than real time).
pub const MIN_SPEED: f64 = 0.001;

const _: () = {
    // The largest wall clock an agent can read, in µs, fits an i64.
    assert!(
        (MAX_EPOCH_MS as u128) * 1000 + (HORIZON_US as u128) + 4 * (MAX_DURATION_US as u128)
            < i64::MAX as u128
    );
    assert!(MAX_DURATION_MS as u64 * 1000 == MAX_DURATION_US);
};
