//! The claim guard's memory of relayed channel messages: which message
//! (channel, id) was relayed, by whom, and when.
//!
//! Bounded by count, fairly: every sender's relays count against a budget
//! of its own ([`RELAY_MEMORY_PER_SENDER`]: its own churn forgets its own
//! oldest relays), and the whole memory holds at most [`RELAY_MEMORY_MAX`].
//! When the whole memory is full, what is forgotten is, in this order: a
//! relay older than [`RELAY_MEMORY_MS`] (ignored anyway), a relay of a
//! sender that disconnected, and otherwise the oldest relay of the sender
//! that has the most remembered. So other senders' churn never makes the
//! memory forget a relay of a sender that has fewer remembered than each
//! of them: with n senders, each keeps at least its last
//! `RELAY_MEMORY_MAX / n`, whatever the others send.
//!
//! It also knows whether a relay's sender is still on the connection it
//! relayed it from ([`RelayMemory::owner`]): a disconnect ends that.
//!
//! Sans-IO and deterministic: no wall clock, no hashing; ties between
//! senders go by their order.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How long the claim guard remembers a relayed message (10 min).
pub const RELAY_MEMORY_MS: u64 = 600_000;
/// How many relays the claim guard remembers at most, over all senders.
pub const RELAY_MEMORY_MAX: usize = 65_536;
/// How many relays of one sender the claim guard remembers at most (its
/// oldest are forgotten first).
pub const RELAY_MEMORY_PER_SENDER: usize = 4096;

/// See the module docs. `A`: a sender; `K`: a (channel, msg_id) key.
#[derive(Debug, Clone)]
pub struct RelayMemory<A, K> {
    /// key -> (its sender, server time of its last relay, the sender's
    /// connection then: its epoch).
    by_key: BTreeMap<K, (A, u64, u64)>,
    /// sender -> its epoch: how many times it disconnected since it
    /// first relayed something still remembered.
    epochs: BTreeMap<A, u64>,
    /// sender -> its relays in time order; an entry whose (sender, time)
    /// is no longer `by_key`'s was relayed again since (skipped).
    by_sender: BTreeMap<A, VecDeque<(u64, K)>>,
    /// (entries, sender) for every sender in `by_sender`.
    counts: BTreeSet<(usize, A)>,
    /// (time of its oldest entry, sender) for every sender in `by_sender`.
    oldest: BTreeSet<(u64, A)>,
    /// Senders in `by_sender` that disconnected since their last relay.
    gone: BTreeSet<A>,
    /// Entries in all of `by_sender`.
    total: usize,
    per_sender: usize,
    max: usize,
}

impl<A: Ord + Clone, K: Ord + Clone> Default for RelayMemory<A, K> {
    fn default() -> Self {
        RelayMemory::with_bounds(RELAY_MEMORY_PER_SENDER, RELAY_MEMORY_MAX)
    }
}

impl<A: Ord + Clone, K: Ord + Clone> RelayMemory<A, K> {
    /// An empty memory that keeps at most `per_sender` relays of one
    /// sender and `max` in all.
    pub fn with_bounds(per_sender: usize, max: usize) -> Self {
        RelayMemory {
            by_key: BTreeMap::new(),
            epochs: BTreeMap::new(),
            by_sender: BTreeMap::new(),
            counts: BTreeSet::new(),
            oldest: BTreeSet::new(),
            gone: BTreeSet::new(),
            total: 0,
            per_sender: per_sender.max(1),
            max: max.max(1),
        }
    }

    /// The sender and relay time of `key`, if it was relayed within
    /// [`RELAY_MEMORY_MS`] of `now` and is still remembered.
    pub fn get(&self, now: u64, key: &K) -> Option<(&A, u64)> {
        self.by_key
            .get(key)
            .filter(|(_, at, _)| now.saturating_sub(*at) <= RELAY_MEMORY_MS)
            .map(|(a, at, _)| (a, *at))
    }

    /// The sender of `key` (as [`RelayMemory::get`]) if it is still on the
    /// connection it relayed it from (it has not disconnected since).
    pub fn owner(&self, now: u64, key: &K) -> Option<&A> {
        let (a, at, epoch) = self.by_key.get(key)?;
        let fresh = now.saturating_sub(*at) <= RELAY_MEMORY_MS;
        (fresh && self.epochs.get(a).copied().unwrap_or(0) == *epoch).then_some(a)
    }

    /// Keys remembered (fresh or not yet forgotten).
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// `sender` relayed `key` at `now`: remember it, then forget what the
    /// bounds say.
    pub fn remember(&mut self, now: u64, sender: &A, key: K) {
        let epoch = self.epochs.get(sender).copied().unwrap_or(0);
        self.by_key
            .insert(key.clone(), (sender.clone(), now, epoch));
        self.gone.remove(sender);
        let before = self
            .by_sender
            .get(sender)
            .map(|q| (q.len(), q.front().map(|e| e.0)));
        let q = self.by_sender.entry(sender.clone()).or_default();
        q.push_back((now, key));
        self.total += 1;
        self.reindex(sender, before);
        // Its own budget, and (for every sender) the age limit.
        while self
            .by_sender
            .get(sender)
            .is_some_and(|q| q.len() > self.per_sender)
        {
            self.forget_oldest_of(sender);
        }
        while let Some((at, a)) = self.oldest.first().cloned() {
            if now.saturating_sub(at) <= RELAY_MEMORY_MS {
                break;
            }
            self.forget_oldest_of(&a);
        }
        // The whole memory: a sender gone first, else the heaviest.
        while self.total > self.max {
            let victim = match self.gone.first() {
                Some(a) => a.clone(),
                None => match self.counts.last() {
                    Some((_, a)) => a.clone(),
                    None => break,
                },
            };
            self.forget_oldest_of(&victim);
        }
    }

    /// `sender` disconnected: its relays stay (a claim may still follow
    /// them) but are the first forgotten when the memory is full.
    pub fn disconnect(&mut self, sender: &A) {
        if self.by_sender.contains_key(sender) {
            self.gone.insert(sender.clone());
            *self.epochs.entry(sender.clone()).or_insert(0) += 1;
        }
    }

    /// Forget `sender`'s oldest entry.
    fn forget_oldest_of(&mut self, sender: &A) {
        let Some(q) = self.by_sender.get_mut(sender) else {
            return;
        };
        let before = Some((q.len(), q.front().map(|e| e.0)));
        let Some((at, key)) = q.pop_front() else {
            return;
        };
        self.total -= 1;
        if self
            .by_key
            .get(&key)
            .is_some_and(|(a, t, _)| a == sender && *t == at)
        {
            self.by_key.remove(&key);
        }
        self.reindex(sender, before);
    }

    /// Bring `counts` and `oldest` (and `by_sender`, `gone` for a sender
    /// left with nothing) up to date for `sender`, whose (entries, oldest
    /// time) were `before`.
    fn reindex(&mut self, sender: &A, before: Option<(usize, Option<u64>)>) {
        if let Some((n, front)) = before {
            self.counts.remove(&(n, sender.clone()));
            if let Some(t) = front {
                self.oldest.remove(&(t, sender.clone()));
            }
        }
        match self.by_sender.get(sender) {
            Some(q) if !q.is_empty() => {
                self.counts.insert((q.len(), sender.clone()));
                if let Some((t, _)) = q.front() {
                    self.oldest.insert((*t, sender.clone()));
                }
            }
            _ => {
                self.by_sender.remove(sender);
                self.gone.remove(sender);
                self.epochs.remove(sender);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type M = RelayMemory<&'static str, u32>;

    #[test]
    fn remembers_the_sender_and_time_and_forgets_by_age() {
        let mut m = M::default();
        m.remember(10, &"op", 1);
        assert_eq!(m.get(10, &1), Some((&"op", 10)));
        assert_eq!(m.get(10 + RELAY_MEMORY_MS, &1), Some((&"op", 10)));
        assert_eq!(m.get(11 + RELAY_MEMORY_MS, &1), None);
        // Relayed again: counts from the last relay; the old entry is
        // skipped when it is forgotten.
        m.remember(500, &"op", 1);
        m.remember(RELAY_MEMORY_MS + 20, &"x", 2);
        assert_eq!(m.get(RELAY_MEMORY_MS + 20, &1), Some((&"op", 500)));
        m.remember(RELAY_MEMORY_MS + 501, &"x", 3);
        assert_eq!(m.len(), 2, "op's relay of 1 is older than the limit");
    }

    #[test]
    fn a_sender_churns_only_its_own_budget() {
        let mut m = M::with_bounds(4, 100);
        m.remember(0, &"op", 1000);
        for k in 0..50 {
            m.remember(1, &"flood", k);
        }
        assert_eq!(m.get(1, &1000), Some((&"op", 0)));
        assert_eq!(m.len(), 5);
        assert!(m.get(1, &46).is_some() && m.get(1, &45).is_none());
    }

    #[test]
    fn when_full_the_heaviest_sender_forgets_first_and_the_gone_before_it() {
        // 3 flooders against a memory of 12: each keeps at most its own
        // budget (8), together they pass 12, and what goes is theirs.
        let mut m = M::with_bounds(8, 12);
        m.remember(0, &"op", 1000);
        m.remember(0, &"op", 1001);
        for k in 0..300 {
            let who = ["a", "b", "c"][k as usize % 3];
            m.remember(1, &who, k);
        }
        assert_eq!(m.len(), 12);
        assert!(m.get(1, &1000).is_some() && m.get(1, &1001).is_some());
        // The op leaves: its relays go first when room is needed.
        m.disconnect(&"op");
        m.remember(2, &"a", 5000);
        assert!(m.get(2, &1000).is_none() && m.get(2, &1001).is_some());
        // Its relays have no owner on a connection any more.
        assert!(m.get(2, &1001).is_some() && m.owner(2, &1001).is_none());
        assert_eq!(m.owner(2, &5000), Some(&"a"));
        // Relaying again makes it present again.
        m.remember(3, &"op", 1002);
        m.remember(3, &"b", 5001);
        assert!(m.get(3, &1001).is_some() && m.get(3, &1002).is_some());
        assert_eq!(m.len(), 12);
    }
}
