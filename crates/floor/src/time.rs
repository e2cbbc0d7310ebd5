//! The one time type of both halves: [`Millis`], a time on the embedder's
//! clock in milliseconds. The floor never reads a clock; every input comes
//! with the time, and a half says when it wants to be woken as a `Millis`
//! ([`crate::Server::poll_timeout`], [`crate::Agent::poll_timeout`]).
//! Convert at the edge only: `Millis(unix_ms)` from a wall clock, or from
//! a monotonic clock's milliseconds since any fixed start.

use std::fmt;

/// A time on the embedder's clock, in milliseconds since an epoch of its
/// choosing (the Unix epoch on a wall clock; the wire's `started_at` is
/// this number). Ordered, copied, and never negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Millis(pub u64);

impl Millis {
    /// The epoch.
    pub const ZERO: Millis = Millis(0);

    /// The number of milliseconds.
    pub const fn as_ms(self) -> u64 {
        self.0
    }

    /// `ms` later, saturating at the end of time.
    pub const fn saturating_add(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }

    /// How long after `earlier` this is (ms; 0 if it is not after).
    pub const fn saturating_since(self, earlier: Millis) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ms", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Millis(5).saturating_add(u64::MAX), Millis(u64::MAX));
        assert_eq!(Millis(5).saturating_since(Millis(7)), 0);
        assert_eq!(Millis(7).saturating_since(Millis(5)), 2);
        assert_eq!(Millis(45_000).to_string(), "45000 ms");
    }
}
