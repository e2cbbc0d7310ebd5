//! What a run's decisions asked of the claim TTL.
//!
//! The TTL enters the floor in two places only: the server expires a claim
//! (or a `tombstone` marker) at `granted_at + TTL`, and a client believes a
//! claim it saw live until `seen + TTL` (its CSMA timer skips while it is,
//! and a recheck waits for it). Both keep a [`TtlAudit`]: whether any
//! decision went the "ran out" way, and the least TTL under which every
//! "still live" decision would have gone the same way.
//!
//! An embedder that drives the floor from events that do not themselves
//! depend on the TTL (it wakes the server only at
//! [`Server::poll_timeout`](crate::Server::poll_timeout), and a
//! client only at its `WakeAt`s) can then say: **a run whose audit has no
//! expiry is the same run, decision for decision, under any TTL of at least
//! [`TtlAudit::least_ttl_ms`]** (by induction over its inputs: every
//! comparison with the TTL comes out the same, so every output does, so
//! every later input does). `herdsim tune` uses this to take a replication
//! under one TTL from a run under another.

/// See the module docs. Merging two audits ([`TtlAudit::merge`]) gives the
/// audit of both: the server's and every client's make a run's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TtlAudit {
    /// Some decision went the way of a TTL that ran out: a claim or marker
    /// expired, a client judged a claim it saw stale, or waited for a
    /// claim's TTL to recheck. The run then depends on the TTL's exact value.
    pub expired: bool,
    /// The least TTL (ms) under which every "still live" decision holds: a
    /// claim released `age` ms after its grant needs `age + 1`, a claim seen
    /// `age` ms before a client's CSMA timer fired needs `age + 1`.
    pub least_ttl_ms: u64,
}

impl TtlAudit {
    /// A claim (or a belief in one) was judged still live `age_ms` after it
    /// began: any TTL above `age_ms` judges it so.
    pub fn live_at(&mut self, age_ms: u64) {
        self.least_ttl_ms = self.least_ttl_ms.max(age_ms.saturating_add(1));
    }

    /// A decision went the way of a TTL that ran out.
    pub fn ran_out(&mut self) {
        self.expired = true;
    }

    /// The audit of two parts of one run.
    pub fn merge(&mut self, other: &TtlAudit) {
        self.expired |= other.expired;
        self.least_ttl_ms = self.least_ttl_ms.max(other.least_ttl_ms);
    }

    /// The least TTL from which the run is the same run, if there is one
    /// (no decision went the "ran out" way).
    pub fn same_from(&self) -> Option<u64> {
        (!self.expired).then_some(self.least_ttl_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_ages_raise_the_least_ttl_and_an_expiry_ends_it() {
        let mut a = TtlAudit::default();
        assert_eq!(a.same_from(), Some(0));
        a.live_at(1999);
        a.live_at(500);
        assert_eq!(a.same_from(), Some(2000));
        a.live_at(u64::MAX);
        assert_eq!(a.same_from(), Some(u64::MAX));
        let mut b = TtlAudit::default();
        b.live_at(7000);
        let mut c = TtlAudit::default();
        c.live_at(100);
        c.merge(&b);
        assert_eq!(c.same_from(), Some(7001));
        b.ran_out();
        c.merge(&b);
        assert_eq!(c.same_from(), None);
        assert!(c.expired);
    }
}
