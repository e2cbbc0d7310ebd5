//! A generic discrete-event queue. It knows nothing of agents: it stores
//! opaque events of type `E`, each due at a virtual [`Time`], and hands
//! them back earliest first.
//!
//! # Semantics
//! - Virtual time is an integer count of microseconds ([`Time`]). The engine
//!   never reads a wall clock.
//! - [`Engine::pop`] returns the pending event with the smallest time; events
//!   due at the same instant come out in the order they were scheduled (a
//!   monotonically increasing sequence number breaks ties). Nothing depends
//!   on hashing or on memory addresses, so a run is reproducible.
//! - Popping an event advances [`Engine::now`] to its time. Time never goes
//!   backwards: scheduling in the past is clamped to `now` (see
//!   [`Engine::schedule_at`]).
//! - [`Engine::cancel`] removes a pending event in O(1) amortised time; a
//!   cancelled event never pops. Keys carry the event's unique sequence
//!   number, so a stale key (already fired, already cancelled) can never
//!   cancel a later event that happens to reuse the same storage slot.
//!
//! # Implementation
//! A binary min-heap of `(time, seq, slot)` entries plus a slab of slots
//! holding the payloads. Cancelling frees the slot at once (it is reused by
//! later events) and leaves its heap entry behind as a *stale* entry,
//! recognised by a sequence-number mismatch and skipped. The heap top is
//! kept live at all times, so [`Engine::peek_time`] is exact, and the heap
//! is compacted whenever stale entries outnumber live ones, so memory stays
//! bounded by a constant factor of the number of pending events however
//! long the run.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;

#[cfg(test)]
mod tests;

/// Virtual time in microseconds since the start of the run.
pub type Time = u64;

/// Handle to a scheduled event, used to cancel it.
///
/// A key is only meaningful for the [`Engine`] that issued it. It stays
/// valid (but inert) after its event fired or was cancelled: cancelling it
/// then is a no-op returning `false`, even if the storage slot was reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventKey {
    seq: u64,
    slot: u32,
}

/// Sequence number marking a free slot (real sequence numbers start at 0
/// and would need 2^64 schedules to reach it).
const FREE: u64 = u64::MAX;

/// Compaction is not worth it for tiny heaps.
const COMPACT_MIN_STALE: usize = 1024;

struct Slot<E> {
    /// Sequence number of the event held, or [`FREE`].
    seq: u64,
    ev: Option<E>,
}

#[derive(Clone, Copy)]
struct Entry {
    time: Time,
    seq: u64,
    slot: u32,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed, so that `BinaryHeap` (a max-heap) yields the earliest
    /// `(time, seq)` first.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .cmp(&self.time)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// A discrete-event queue over events of type `E`.
pub struct Engine<E> {
    now: Time,
    next_seq: u64,
    popped: u64,
    /// Number of live (scheduled, neither fired nor cancelled) events.
    live: usize,
    /// Live and stale entries; the top is always live (or the heap empty).
    heap: BinaryHeap<Entry>,
    slots: Vec<Slot<E>>,
    free: Vec<u32>,
}

impl<E> Default for Engine<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> fmt::Debug for Engine<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("now", &self.now)
            .field("pending", &self.live)
            .field("popped", &self.popped)
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

impl<E> Engine<E> {
    /// An empty engine at time 0.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty engine at time 0 with room for `n` pending events before
    /// it reallocates.
    pub fn with_capacity(n: usize) -> Self {
        Engine {
            now: 0,
            next_seq: 0,
            popped: 0,
            live: 0,
            heap: BinaryHeap::with_capacity(n),
            slots: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
        }
    }

    /// Current virtual time: the time of the last popped event (0 before
    /// the first pop).
    #[inline]
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedule `ev` at absolute time `at`.
    ///
    /// An `at` earlier than [`now`](Self::now) is clamped to `now`: the
    /// event fires at the current instant, after every event already
    /// scheduled for that instant. This never panics (except when more than
    /// `u32::MAX` events are pending at once).
    pub fn schedule_at(&mut self, at: Time, ev: E) -> EventKey {
        let at = at.max(self.now);
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                let cell = &mut self.slots[s as usize];
                cell.seq = seq;
                cell.ev = Some(ev);
                s
            }
            None => {
                let s = u32::try_from(self.slots.len())
                    .expect("herdsim engine: more than u32::MAX pending events");
                self.slots.push(Slot { seq, ev: Some(ev) });
                s
            }
        };
        self.heap.push(Entry {
            time: at,
            seq,
            slot,
        });
        self.live += 1;
        EventKey { seq, slot }
    }

    /// Schedule `ev` at `now + delay` (saturating at `Time::MAX`).
    #[inline]
    pub fn schedule_in(&mut self, delay: Time, ev: E) -> EventKey {
        self.schedule_at(self.now.saturating_add(delay), ev)
    }

    /// Cancel a pending event; its payload is dropped at once.
    ///
    /// Returns `true` if the event was pending. Cancelling an event that
    /// already fired or was already cancelled is a no-op returning `false`.
    /// O(1) amortised (plus O(log n) when the cancelled event was the next
    /// one due).
    pub fn cancel(&mut self, key: EventKey) -> bool {
        let Some(cell) = self.slots.get_mut(key.slot as usize) else {
            return false;
        };
        if cell.seq != key.seq {
            return false;
        }
        cell.seq = FREE;
        cell.ev = None;
        self.free.push(key.slot);
        self.live -= 1;
        self.drop_stale_top();
        let stale = self.heap.len() - self.live;
        if stale >= COMPACT_MIN_STALE && stale > self.live {
            let slots = &self.slots;
            self.heap.retain(|e| slots[e.slot as usize].seq == e.seq);
        }
        true
    }

    /// Whether the event behind `key` is still pending.
    #[inline]
    pub fn is_pending(&self, key: EventKey) -> bool {
        self.slots
            .get(key.slot as usize)
            .is_some_and(|c| c.seq == key.seq)
    }

    /// Remove and return the next event: earliest time first, equal times
    /// in scheduling order. Advances [`now`](Self::now) to its time.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let e = self.heap.pop()?;
        let cell = &mut self.slots[e.slot as usize];
        debug_assert_eq!(cell.seq, e.seq, "heap top must be live");
        let ev = cell
            .ev
            .take()
            .expect("herdsim engine invariant: the heap top is a live event");
        cell.seq = FREE;
        self.free.push(e.slot);
        self.live -= 1;
        self.popped += 1;
        self.now = e.time;
        self.drop_stale_top();
        Some((e.time, ev))
    }

    /// Time of the next event, if any (exact: cancelled events are never
    /// reported).
    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.time)
    }

    /// Number of pending (live, non-cancelled) events.
    #[inline]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no event is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Number of events delivered by [`pop`](Self::pop) so far.
    #[inline]
    pub fn popped(&self) -> u64 {
        self.popped
    }

    /// Restore the invariant that the heap top is live.
    #[inline]
    fn drop_stale_top(&mut self) {
        while let Some(top) = self.heap.peek() {
            if self.slots[top.slot as usize].seq == top.seq {
                break;
            }
            self.heap.pop();
        }
    }

    /// Heap entries held (live + stale); for tests of the memory bound.
    #[cfg(test)]
    fn heap_entries(&self) -> usize {
        self.heap.len()
    }

    /// Slots allocated; for tests of slot reuse.
    #[cfg(test)]
    fn slots_allocated(&self) -> usize {
        self.slots.len()
    }
}
