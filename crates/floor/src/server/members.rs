//! The members of one channel, a sorted list.

use super::*;

/// The members of one channel: a set kept as a sorted list, so a relay
/// walks contiguous memory and skips its sender by position. Ids join
/// mostly in order (the simulator's are numbered), so an insert is
/// usually a push.
///
/// `hint` is where the last lookup found its agent: one input looks up its
/// sender up to three times (the membership check, the claim's holder, the
/// relay), and the hint makes the second and third one comparison. It is
/// checked before use, so a stale hint costs a search, never a wrong answer.
#[derive(Debug)]
pub(super) struct Members<A>(pub(super) Vec<A>, AtomicUsize);

impl<A> Default for Members<A> {
    fn default() -> Self {
        Members(Vec::new(), AtomicUsize::new(0))
    }
}

impl<A: Clone> Clone for Members<A> {
    fn clone(&self) -> Self {
        Members(self.0.clone(), AtomicUsize::new(self.1.load(Relaxed)))
    }
}

impl<A: Ord> Members<A> {
    /// `Ok(position)` of `agent`, or `Err(where it would go)`.
    pub(super) fn find<Q: Ord + ?Sized>(&self, agent: &Q) -> Result<usize, usize>
    where
        A: Borrow<Q>,
    {
        let hint = self.1.load(Relaxed);
        if self.0.get(hint).is_some_and(|m| m.borrow() == agent) {
            return Ok(hint);
        }
        let found = self.0.binary_search_by(|m| m.borrow().cmp(agent));
        if let Ok(i) = found {
            self.1.store(i, Relaxed);
        }
        found
    }

    pub(super) fn insert(&mut self, agent: A) {
        if let Err(i) = self.find(&agent) {
            self.0.insert(i, agent);
        }
    }

    pub(super) fn remove(&mut self, agent: &A) {
        if let Ok(i) = self.find(agent) {
            self.0.remove(i);
        }
    }
}
