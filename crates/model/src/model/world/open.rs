//! The open messages of a run, by number.
//!
//! Numbers are handed out in increasing order and most messages close
//! soon after they are posted, so the open ones sit in a window of
//! numbers: a deque from the oldest open number to the newest, each entry
//! an index into a slab of [`MsgInfo`] (or empty). Lookups are two array
//! reads instead of a tree search, and nothing is allocated per message
//! once the slab and the window have grown to the run's working size.
//! Memory is 4 bytes per number in the window plus one [`MsgInfo`] per
//! open message: a message held open for the whole run (a hung inference)
//! costs 4 bytes per later number, which `max_events` bounds.
//!
//! Time: each window entry is pushed once (at the back, when a newer
//! number opens) and popped at most once (from the front, when every
//! older number has closed), so a run's window work is linear in its
//! messages. The back is never trimmed: trimming it when the newest
//! message closed, with an old one still open, walked back over every
//! empty entry to the old one, and the next message pushed them all
//! again, which made a run with one question held open (a selector's
//! fallbacks on a hung choice) quadratic in its messages.

use super::messages::MsgInfo;
use std::collections::VecDeque;

/// No message in this window entry.
const EMPTY: u32 = u32::MAX;

/// A map from message number to [`MsgInfo`], iterated in number order
/// (the same interface as the `BTreeMap` it replaces).
#[derive(Default)]
pub(super) struct OpenMsgs {
    /// The number of `window[0]`.
    base: u32,
    window: VecDeque<u32>,
    slab: Vec<MsgInfo>,
    /// Free slab entries.
    free: Vec<u32>,
    /// Window entries pushed and popped so far (the test of linear work).
    #[cfg(test)]
    work: u64,
}

impl OpenMsgs {
    fn slot(&self, m: u32) -> Option<u32> {
        let i = m.checked_sub(self.base)? as usize;
        self.window.get(i).copied().filter(|&s| s != EMPTY)
    }

    pub(super) fn get(&self, m: &u32) -> Option<&MsgInfo> {
        self.slot(*m).map(|s| &self.slab[s as usize])
    }

    pub(super) fn get_mut(&mut self, m: &u32) -> Option<&mut MsgInfo> {
        self.slot(*m).map(|s| &mut self.slab[s as usize])
    }

    /// Open message `m` (replacing what was there).
    pub(super) fn insert(&mut self, m: u32, info: MsgInfo) {
        if let Some(s) = self.slot(m) {
            self.slab[s as usize] = info;
            return;
        }
        let s = match self.free.pop() {
            Some(s) => {
                self.slab[s as usize] = info;
                s
            }
            None => {
                self.slab.push(info);
                // At most one slab entry per open message, and fewer than
                // 2^32 - 1 numbers exist (`new_msg`).
                u32::try_from(self.slab.len() - 1).unwrap_or(EMPTY - 1)
            }
        };
        if self.window.is_empty() {
            self.base = m;
        }
        if m < self.base {
            #[cfg(test)]
            {
                self.work += u64::from(self.base - m);
            }
            for _ in m..self.base {
                self.window.push_front(EMPTY);
            }
            self.base = m;
        }
        let i = (m - self.base) as usize;
        if i >= self.window.len() {
            #[cfg(test)]
            {
                self.work += (i + 1 - self.window.len()) as u64;
            }
            self.window.resize(i + 1, EMPTY);
        }
        self.window[i] = s;
    }

    /// Close message `m`, returning what was known of it.
    pub(super) fn remove(&mut self, m: &u32) -> Option<MsgInfo> {
        let s = self.slot(*m)?;
        self.window[(*m - self.base) as usize] = EMPTY;
        while self.window.front() == Some(&EMPTY) {
            self.window.pop_front();
            self.base += 1;
            #[cfg(test)]
            {
                self.work += 1;
            }
        }
        self.free.push(s);
        let info = &mut self.slab[s as usize];
        Some(std::mem::replace(info, MsgInfo::new(0, 0, false, 0)))
    }

    /// The open message numbers, in increasing order.
    pub(super) fn numbers(&self) -> Vec<u32> {
        let base = self.base;
        self.window
            .iter()
            .enumerate()
            .filter(|(_, s)| **s != EMPTY)
            .map(|(i, _)| base + i as u32)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn info(post_us: u64) -> MsgInfo {
        MsgInfo::new(post_us, 0, true, 1)
    }

    #[test]
    fn opens_closes_and_trims() {
        let mut o = OpenMsgs::default();
        o.insert(5, info(5));
        o.insert(3, info(3)); // below the window: it grows at the front
        o.insert(9, info(9));
        assert_eq!(o.numbers(), vec![3, 5, 9]);
        assert_eq!(o.get(&5).map(|i| i.post_us), Some(5));
        assert!(o.get(&4).is_none() && o.get(&2).is_none() && o.get(&10).is_none());
        assert_eq!(o.remove(&3).map(|i| i.post_us), Some(3));
        assert_eq!(o.remove(&3).map(|i| i.post_us), None);
        assert_eq!((o.base, o.window.len()), (5, 5));
        assert_eq!(o.remove(&9).map(|i| i.post_us), Some(9));
        // The back is not trimmed (the next number reuses it).
        assert_eq!((o.base, o.window.len()), (5, 5));
        o.insert(6, info(6)); // reuses the freed slab entries
        assert_eq!(o.slab.len(), 3);
        assert_eq!(o.numbers(), vec![5, 6]);
        assert_eq!(o.remove(&5).map(|i| i.post_us), Some(5));
        assert_eq!(o.remove(&6).map(|i| i.post_us), Some(6));
        assert!(o.window.is_empty() && o.numbers().is_empty());
    }

    /// One message held open (number 0, a question whose selections go on)
    /// while n later messages open and close one after the other: the
    /// window work stays at most 2 entries a message (one push, one pop),
    /// for every n, instead of growing with n. Counted, not timed.
    #[test]
    fn an_old_open_message_keeps_the_work_linear() {
        for n in [1_000u32, 10_000, 100_000] {
            let mut o = OpenMsgs::default();
            o.insert(0, info(0));
            for m in 1..=n {
                o.insert(m, info(u64::from(m)));
                assert!(o.remove(&m).is_some());
            }
            assert!(o.remove(&0).is_some());
            let work = o.work;
            assert!(
                work <= 2 * u64::from(n) + 2,
                "n = {n}: {work} window entries pushed and popped"
            );
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32),
        Remove(u32),
        Bump(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u32..64).prop_map(Op::Insert),
            (0u32..64).prop_map(Op::Remove),
            (0u32..64).prop_map(Op::Bump),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// The window behaves exactly like the `BTreeMap` it replaced.
        #[test]
        fn same_as_a_btreemap(ops in prop::collection::vec(op(), 0..200)) {
            let mut o = OpenMsgs::default();
            let mut r: BTreeMap<u32, u64> = BTreeMap::new();
            for (k, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Insert(m) => {
                        o.insert(m, info(k as u64));
                        r.insert(m, k as u64);
                    }
                    Op::Remove(m) => {
                        prop_assert_eq!(o.remove(&m).map(|i| i.post_us), r.remove(&m));
                    }
                    Op::Bump(m) => {
                        if let Some(i) = o.get_mut(&m) {
                            i.post_us += 1000;
                        }
                        if let Some(v) = r.get_mut(&m) {
                            *v += 1000;
                        }
                    }
                }
                prop_assert_eq!(o.numbers(), r.keys().copied().collect::<Vec<_>>());
                for m in 0..64 {
                    prop_assert_eq!(o.get(&m).map(|i| i.post_us), r.get(&m).copied());
                }
                prop_assert!(o.slab.len() <= 64);
            }
        }
    }
}
