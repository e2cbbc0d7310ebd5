//! A generic discrete-event queue. It knows nothing of agents: it stores
//! opaque events of type `E`, each due at a virtual [`Time`], and hands
//! them back earliest first.
//!
//! # Semantics
//! - Virtual time is an integer count of microseconds ([`Time`]). The engine
//!   never reads a wall clock.
//! - [`Engine::pop`] returns the pending event with the smallest time; events
//!   due at the same instant come out in the order they were scheduled.
//!   Nothing depends on hashing or on memory addresses, so a run is
//!   reproducible.
//! - Popping an event advances [`Engine::now`] to its time. Time never goes
//!   backwards: scheduling in the past is clamped to `now` (see
//!   [`Engine::schedule_at`]).
//! - [`Engine::cancel`] removes a pending event in O(1) amortised time; a
//!   cancelled event never pops. Keys carry a generation number, so a stale
//!   key (already fired, already cancelled) can never cancel a later event
//!   that happens to reuse the same storage slot.
//! - [`Engine::post_at`] schedules an event that will never be cancelled
//!   (no key): the same order, and cheaper (no slot to take or check).
//! - [`Engine::pop_due_by`] merges the queue with events a caller keeps
//!   apart: it pops the next event only if it is due by a given time, and
//!   otherwise moves the clock to that time for the caller's own event.
//!
//! # Implementation
//! A monotone radix queue (a hierarchical timing wheel over the bits of the
//! time), which beats a binary heap because event times never go below
//! `now`. Times are split into 8-bit digits; a stored event sits in level
//! `L` (the highest digit in which its time differs from a base time, the
//! base never exceeding `now`) at the slot given by its digit `L`. Level 0
//! slots hold exactly one instant each. Popping takes from the first
//! non-empty level-0 slot; when level 0 is empty, the first slot of the
//! lowest non-empty level is redistributed into the (empty) lower levels,
//! or, when it holds a single entry, that entry is delivered at once.
//! Each event moves at most 7 times, and once for delays under 65 ms.
//! Events only ever enter empty slots or are appended, so every slot is in
//! scheduling order: ties need no sequence comparison. Scheduling is O(1);
//! popping is O(1) amortised (plus one bitmap scan).
//!
//! While few events are pending (at most [`SMALL_MAX`] entries), they sit
//! in a small sorted list instead (latest first: a pop takes the last
//! entry, an insert scans from the back, moving up one place each entry
//! due no later than the new one: one or two, mostly). A simulation of a
//! handful of agents keeps a dozen or two events pending, spread over
//! seconds, where the radix queue would refill a bucket for almost every
//! pop (and a binary heap, measured, costs as much as the radix queue).
//! When the list outgrows [`SMALL_MAX`] its live entries move into the
//! radix queue in order, and the engine stays with the radix queue until
//! it is empty again. Either way the order is the same: earliest time
//! first, ties in scheduling order.
//!
//! An entry carries its payload (an event is moved along with its entry,
//! which is cheaper than a payload kept apart: with thousands of events
//! pending, a payload kept apart is a cache miss when the event is
//! scheduled and another when it pops). An event that can be cancelled
//! also has a slot in a table of generation counters (4 bytes each),
//! reused through a free list; a key or stored entry whose generation no
//! longer matches its slot's is stale. Cancelling bumps the generation at
//! once and leaves a stale entry behind, skipped (and its payload dropped)
//! when reached; the entries are compacted whenever stale ones outnumber
//! live ones (and number at least 1024), so memory stays bounded by a
//! constant factor of the pending events however long the run. An event
//! posted with [`Engine::post_at`] has no slot and is always live.

#![warn(missing_docs)]

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
    slot: u32,
    generation: u32,
}

/// Bits per digit of the radix queue.
const BITS: u32 = 8;
/// Slots per level.
const SLOTS: usize = 1 << BITS;
/// Levels needed to cover 64-bit times.
const LEVELS: usize = 64_usize.div_ceil(BITS as usize);
const DIGIT_MASK: u64 = SLOTS as u64 - 1;
/// Buckets in all, indexed `level * SLOTS + digit`: index order is time
/// order.
const BUCKETS: usize = LEVELS * SLOTS;
/// Words of the occupancy bitmap.
const WORDS: usize = BUCKETS / 64;
const _: () = assert!(SLOTS.is_multiple_of(64) && WORDS <= 64);

/// Compaction is not worth it for a handful of stale entries.
const COMPACT_MIN_STALE: usize = 1024;

/// The most entries (live or stale) the small list holds before they move
/// into the radix queue.
pub const SMALL_MAX: usize = 64;

/// The slot of an entry that cannot be cancelled ([`Engine::post_at`]).
const NO_SLOT: u32 = u32::MAX;

/// A scheduled event. `ev` is `None` only in the consumed front of a
/// level-0 bucket.
struct Entry<E> {
    time: Time,
    /// Its slot in [`Engine::gens`], or [`NO_SLOT`].
    slot: u32,
    /// The slot's generation when the event was scheduled: the entry is
    /// live while they match.
    generation: u32,
    ev: Option<E>,
}

/// Move an entry out of its place, leaving it without its payload.
#[inline(always)]
fn take_entry<E>(x: &mut Entry<E>) -> Entry<E> {
    Entry {
        time: x.time,
        slot: x.slot,
        generation: x.generation,
        ev: x.ev.take(),
    }
}

#[inline]
fn is_live<E>(gens: &[u32], e: &Entry<E>) -> bool {
    e.slot == NO_SLOT || gens[e.slot as usize] == e.generation
}

/// The capacity (entries) an emptied bucket always keeps. A larger one (a
/// fan-out of thousands of deliveries passed through it) is kept only
/// while the room kept in all empty buckets stays within a budget of
/// [`SPARE_PER_PENDING`] times the most events ever pending (at least
/// [`SPARE_MIN`]); beyond that it is freed. Over a long run the
/// simulation's time passes through many buckets, and each keeping its
/// peak would make memory grow with the run's length instead of its peak
/// of pending events; freeing every large one would make a queue that
/// keeps a few hundred events pending grow its buckets again and again.
const KEEP_CAPACITY: usize = 64;
/// See [`KEEP_CAPACITY`].
const SPARE_PER_PENDING: usize = 2;
/// See [`KEEP_CAPACITY`].
const SPARE_MIN: usize = 1 << 14;

/// Whether bucket `b` is at level 0 (its entries all due at one instant).
/// Bucket `SLOTS` (level 1, digit 0) never holds an entry: an entry goes to
/// level L >= 1 only when its time first differs from the base in digit
/// L, and as time >= base, its digit there is at least 1.
#[inline(always)]
fn at_level0(b: usize) -> bool {
    b < SLOTS
}

/// Index of the bucket (level * SLOTS + digit) for `time` given `base`.
#[inline]
fn locate(base: Time, time: Time) -> usize {
    let x = time ^ base;
    let level = if x == 0 {
        0
    } else {
        (63 - x.leading_zeros()) / BITS
    };
    let digit = (time >> (level * BITS)) & DIGIT_MASK;
    level as usize * SLOTS + digit as usize
}

/// A discrete-event queue over events of type `E`.
pub struct Engine<E> {
    now: Time,
    /// Radix base: `base <= now` between calls, and every stored entry is
    /// bucketed by the highest digit in which its time differs from `base`.
    base: Time,
    popped: u64,
    /// Pending (scheduled, neither fired nor cancelled) events.
    live: usize,
    /// Entries held in buckets, live or stale (level-0 entries already
    /// consumed are not counted).
    stored: usize,
    /// Bit `b % 64` of word `b / 64`: bucket `b` holds entries.
    occupied: [u64; WORDS],
    /// Bit `w`: `occupied[w] != 0`.
    summary: u64,
    /// Level-0 buckets are consumed from the front: index of the next entry.
    head0: [u32; SLOTS],
    buckets: Box<[Vec<Entry<E>>; BUCKETS]>,
    /// Generation of each slot: bumped when its event fires or is
    /// cancelled. A slot at `u32::MAX` is retired (never reused).
    gens: Vec<u32>,
    /// Slots free for reuse.
    free: Vec<u32>,
    /// Whether events go to the radix queue (else to `small`). Set when
    /// `small` outgrows [`SMALL_MAX`]; cleared when the radix queue is
    /// empty (no entry stored, live or stale).
    radix: bool,
    /// The small queue (empty while `radix`): sorted latest first, so the
    /// next event is the last.
    small: Vec<Entry<E>>,
    /// Room (entries) kept beyond [`KEEP_CAPACITY`] in empty buckets.
    spare: usize,
    /// The most events pending at once so far.
    peak: usize,
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
            .finish_non_exhaustive()
    }
}

impl<E> Engine<E> {
    /// An empty engine at time 0.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty engine at time 0 with room for `n` pending events before
    /// its payload storage reallocates.
    pub fn with_capacity(n: usize) -> Self {
        Engine {
            now: 0,
            base: 0,
            popped: 0,
            live: 0,
            stored: 0,
            occupied: [0; WORDS],
            summary: 0,
            head0: [0; SLOTS],
            buckets: (0..BUCKETS)
                .map(|_| Vec::new())
                .collect::<Box<[_]>>()
                .try_into()
                .unwrap_or_else(|_| unreachable!("BUCKETS buckets")),
            gens: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
            radix: false,
            small: Vec::with_capacity(SMALL_MAX + 1),
            spare: 0,
            peak: 0,
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
    /// `u32::MAX - 1` cancellable events are pending at once).
    #[inline]
    pub fn schedule_at(&mut self, at: Time, ev: E) -> EventKey {
        let (slot, generation) = match self.free.pop() {
            Some(i) => (i, self.gens[i as usize]),
            None => (self.new_slot(), 0),
        };
        self.push(at, slot, generation, ev);
        EventKey { slot, generation }
    }

    /// Schedule `ev` at absolute time `at`, for good: it cannot be
    /// cancelled, so it needs no key and no slot. Otherwise as
    /// [`schedule_at`](Self::schedule_at), in the same order (ties in
    /// scheduling order, whichever of the two scheduled them).
    #[inline]
    pub fn post_at(&mut self, at: Time, ev: E) {
        self.push(at, NO_SLOT, 0, ev);
    }

    /// [`post_at`](Self::post_at) `now + delay` (saturating at
    /// `Time::MAX`).
    #[inline]
    pub fn post_in(&mut self, delay: Time, ev: E) {
        self.post_at(self.now.saturating_add(delay), ev);
    }

    /// Store a new pending event. The small list's insert is inlined at
    /// the caller; the radix queue's is a call (a large channel's pushes
    /// pay for the call, a handful of agents' do not pay for its frame).
    #[inline(always)]
    fn push(&mut self, at: Time, slot: u32, generation: u32, ev: E) {
        let e = Entry {
            time: at.max(self.now),
            slot,
            generation,
            ev: Some(ev),
        };
        self.live += 1;
        if self.radix {
            self.push_radix(e);
        } else {
            self.push_small(e);
        }
    }

    /// [`push`](Self::push) in radix mode. An empty radix queue (no entry
    /// at all, stale or not) hands back to the small list.
    #[inline(never)]
    fn push_radix(&mut self, e: Entry<E>) {
        if self.stored == 0 {
            self.radix = false;
            self.push_small(e);
        } else {
            self.insert(e);
            self.stored += 1;
        }
    }

    /// [`push`](Self::push) into the small list.
    #[inline(always)]
    fn push_small(&mut self, e: Entry<E>) {
        // Latest first, the next event last: the new entry goes after
        // every later one and before those due at the same time, which
        // were scheduled before it and pop first. Found from the back:
        // a new event is mostly among the next few to fire (in the
        // default scenario 40% go last, three in four within two of
        // the back), where a scan beats a binary search.
        // The scan moves each entry it passes one place up as it goes
        // (an insertion sort's step): for the one or two entries it
        // mostly passes, cheaper than `Vec::insert`'s call to memmove.
        let small = &mut self.small;
        small.reserve(1);
        let len = small.len();
        let time = e.time;
        let p = small.as_mut_ptr();
        // SAFETY: `p[..len]` are initialised entries and `p[len]` is
        // room (reserved above). Each step moves entry `i - 1` into
        // the hole at `i` (bitwise, so `i - 1` becomes the hole); the
        // new entry is written into the final hole, after which
        // `p[..=len]` are all initialised, exactly once each. Nothing
        // in the loop can panic or unwind.
        unsafe {
            let mut i = len;
            while i > 0 && (*p.add(i - 1)).time <= time {
                std::ptr::copy_nonoverlapping(p.add(i - 1), p.add(i), 1);
                i -= 1;
            }
            std::ptr::write(p.add(i), e);
            small.set_len(len + 1);
        }
        if small.len() > SMALL_MAX {
            self.hand_over_to_radix();
        }
    }

    /// Move the small list's live entries into the radix queue, in
    /// (time, sequence) order (so ties keep their order), and use the
    /// radix queue from now on.
    #[cold]
    #[inline(never)]
    fn hand_over_to_radix(&mut self) {
        let mut entries = std::mem::take(&mut self.small);
        for e in entries.drain(..).rev() {
            if is_live(&self.gens, &e) {
                self.insert(e);
                self.stored += 1;
            }
        }
        self.small = entries; // keep the allocation
        self.radix = true;
    }

    /// Schedule `ev` at `now + delay` (saturating at `Time::MAX`).
    #[inline]
    pub fn schedule_in(&mut self, delay: Time, ev: E) -> EventKey {
        self.schedule_at(self.now.saturating_add(delay), ev)
    }

    /// Cancel a pending event. Its payload is dropped when its entry is
    /// reached or compacted away (or with the engine).
    ///
    /// Returns `true` if the event was pending. Cancelling an event that
    /// already fired or was already cancelled is a no-op returning `false`.
    /// O(1) amortised.
    pub fn cancel(&mut self, key: EventKey) -> bool {
        if !self.is_pending(key) {
            return false;
        }
        self.release(key.slot);
        self.live -= 1;
        // The small list holds at most SMALL_MAX entries, stale or not;
        // in radix mode every live entry is in the radix queue.
        if self.radix {
            let stale = self.stored - self.live;
            if stale >= COMPACT_MIN_STALE && stale > self.live {
                self.compact();
            }
        }
        true
    }

    /// Whether the event behind `key` is still pending.
    #[inline]
    pub fn is_pending(&self, key: EventKey) -> bool {
        self.gens
            .get(key.slot as usize)
            .is_some_and(|&g| g == key.generation)
    }

    /// Remove and return the next event: earliest time first, equal times
    /// in scheduling order. Advances [`now`](Self::now) to its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        if self.live == 0 {
            return None;
        }
        if !self.radix {
            return self.pop_small();
        }
        // Fast path: the first bucket is at level 0 and its front is live.
        let b = self.first_bucket();
        if at_level0(b)
            && let Some(x) = self.take_front0(b)
        {
            return Some(x);
        }
        self.pop_slow()
    }

    /// Merge the queue with a source of events kept outside it: pop the
    /// next event if it is due at or before `limit`; otherwise leave every
    /// event pending, advance [`now`](Self::now) to `limit` (if later) and
    /// return `None`, so that the caller's own event due at `limit` happens
    /// now, before everything pending here. Events due at `limit` itself
    /// pop first: the outside event comes after them.
    ///
    /// The same order as [`pop`](Self::pop) for what it pops. Whatever a
    /// caller schedules after a `None` is clamped to `limit` at the
    /// earliest, as after a [`pop`](Self::pop) of an event due then.
    pub fn pop_due_by(&mut self, limit: Time) -> Option<(Time, E)> {
        if self.live > 0 {
            if !self.radix {
                // Stale entries at the back are dropped on the way.
                while let Some(e) = self.small.last() {
                    if is_live(&self.gens, e) {
                        if e.time <= limit {
                            return self.pop_small();
                        }
                        break;
                    }
                    self.small.pop();
                }
            } else {
                loop {
                    // `live > 0`, so some bucket holds a live entry.
                    let b = self.first_bucket();
                    if at_level0(b) {
                        // A level-0 bucket holds one instant.
                        if self.buckets[b][self.head0[b] as usize].time > limit {
                            break;
                        }
                        // Due by the limit: delivered, or consumed if stale.
                        if let Some(x) = self.take_front0(b) {
                            return Some(x);
                        }
                        continue;
                    }
                    // Every entry of bucket `b` (above level 0) shares its
                    // digits from its level up: none is due before `start`,
                    // which is where a refill puts the base.
                    let shift = (b / SLOTS) as u32 * BITS;
                    let start = (self.buckets[b][0].time >> shift) << shift;
                    if start > limit {
                        break;
                    }
                    if self.buckets[b].len() == 1 {
                        // Taking it moves the base to its time: only if
                        // that is by the limit, stale or not.
                        if self.buckets[b][0].time > limit {
                            break;
                        }
                        if let Some(x) = self.take_lone(b) {
                            return Some(x);
                        }
                    } else {
                        // The base moves to `start <= limit`, and `now`
                        // moves to at least `limit` below: `base <= now`.
                        self.refill(b);
                    }
                }
            }
        }
        self.now = self.now.max(limit);
        None
    }

    /// [`pop`](Self::pop) from the small list; `live > 0`.
    #[inline]
    fn pop_small(&mut self) -> Option<(Time, E)> {
        while let Some(e) = self.small.pop() {
            if let Some(x) = self.deliver(e) {
                return Some(x);
            }
        }
        None
    }

    /// [`pop`](Self::pop) when level 0 needs a refill or holds stale
    /// entries first; `live > 0`.
    #[inline(never)]
    fn pop_slow(&mut self) -> Option<(Time, E)> {
        loop {
            // `live > 0`, so some bucket holds a live entry.
            let b = self.first_bucket();
            if at_level0(b) {
                if let Some(x) = self.take_front0(b) {
                    return Some(x);
                }
            } else if self.buckets[b].len() == 1 {
                // A lone earliest entry (events are sparse at the
                // microsecond scale): deliver it without filing it into
                // level 0 first.
                if let Some(x) = self.take_lone(b) {
                    return Some(x);
                }
            } else {
                self.refill(b);
            }
        }
    }

    /// Consume the lone entry of bucket `b` (above level 0, the first
    /// non-empty bucket); deliver it if live.
    #[inline]
    fn take_lone(&mut self, b: usize) -> Option<(Time, E)> {
        // Taken out in place: `empty_bucket` counts the room of a bucket
        // it empties (not of one found empty).
        let e = take_entry(&mut self.buckets[b][0]);
        self.empty_bucket(b);
        self.unmark(b);
        self.base = e.time;
        self.stored -= 1;
        self.deliver(e)
    }

    /// Index of the first non-empty bucket (some bucket must be non-empty).
    #[inline]
    fn first_bucket(&self) -> usize {
        let w = self.summary.trailing_zeros() as usize;
        w * 64 + self.occupied[w].trailing_zeros() as usize
    }

    /// Consume the front entry of level-0 bucket `b` (non-empty); deliver
    /// it if live.
    #[inline]
    fn take_front0(&mut self, b: usize) -> Option<(Time, E)> {
        let h = self.head0[b] as usize;
        let bucket = &mut self.buckets[b];
        let e = take_entry(&mut bucket[h]);
        if h + 1 == bucket.len() {
            self.empty_bucket(b);
            self.head0[b] = 0;
            self.unmark(b);
        } else {
            self.head0[b] = (h + 1) as u32;
        }
        self.stored -= 1;
        self.deliver(e)
    }

    /// Deliver a consumed entry if it is live (the caller has taken it out
    /// of its bucket and out of `stored`).
    #[inline(always)]
    fn deliver(&mut self, e: Entry<E>) -> Option<(Time, E)> {
        if !is_live(&self.gens, &e) {
            return None; // stale: cancelled, slot possibly reused
        }
        // A live entry holds its payload (only the consumed front of a
        // level-0 bucket does not, and it is never taken again).
        let ev = e.ev?;
        if e.slot != NO_SLOT {
            self.release(e.slot);
        }
        self.live -= 1;
        self.popped += 1;
        self.now = e.time;
        Some((e.time, ev))
    }

    /// The payload of an event that will pop about `ahead` pops from now
    /// (0: the next), when that is cheap to tell; `None` otherwise. From
    /// the small list, or from the 1 µs buckets of the current 256 µs
    /// window in order, or else from the next bucket to be refilled when it
    /// holds at most [`SMALL_MAX`] entries (it pops before every other
    /// bucket, though not in its stored order). A hint, for a caller that
    /// prefetches the state a coming event will touch: it may be a
    /// cancelled event's payload, or pop a little earlier or later.
    #[inline]
    pub fn hint(&self, ahead: usize) -> Option<&E> {
        if !self.radix {
            let i = self.small.len().checked_sub(ahead)?.checked_sub(1)?;
            return self.small.get(i).and_then(|e| e.ev.as_ref());
        }
        let mut left = ahead;
        for w in 0..SLOTS / 64 {
            let mut occ = self.occupied[w];
            while occ != 0 {
                let b = w * 64 + occ.trailing_zeros() as usize;
                occ &= occ - 1;
                let entries = &self.buckets[b][self.head0[b] as usize..];
                match entries.get(left) {
                    Some(e) => return e.ev.as_ref(),
                    None => left -= entries.len(),
                }
            }
        }
        // Level 0 holds fewer: the first bucket above it pops next.
        let above = self.summary & !((1u64 << (SLOTS / 64)) - 1);
        if above == 0 {
            return None;
        }
        let w = above.trailing_zeros() as usize;
        let b = w * 64 + self.occupied[w].trailing_zeros() as usize;
        let bucket = &self.buckets[b];
        if bucket.len() > SMALL_MAX {
            return None;
        }
        bucket
            .get(left.min(bucket.len() - 1))
            .and_then(|e| e.ev.as_ref())
    }

    /// Time of the next event, if any (exact: cancelled events are never
    /// reported). O(1) when the next event is within the current 256 µs
    /// window, otherwise a scan of one bucket.
    pub fn peek_time(&self) -> Option<Time> {
        if self.live == 0 {
            return None;
        }
        if !self.radix {
            return self
                .small
                .iter()
                .rev()
                .find(|e| is_live(&self.gens, e))
                .map(|e| e.time);
        }
        let mut summary = self.summary;
        while summary != 0 {
            let w = summary.trailing_zeros() as usize;
            summary &= summary - 1;
            let mut occ = self.occupied[w];
            while occ != 0 {
                let b = w * 64 + occ.trailing_zeros() as usize;
                occ &= occ - 1;
                let bucket = &self.buckets[b];
                let found = if at_level0(b) {
                    bucket[self.head0[b] as usize..]
                        .iter()
                        .find(|e| is_live(&self.gens, e))
                        .map(|e| e.time)
                } else {
                    bucket
                        .iter()
                        .filter(|e| is_live(&self.gens, e))
                        .map(|e| e.time)
                        .min()
                };
                if found.is_some() {
                    return found;
                }
            }
        }
        None
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

    /// Allocate a fresh slot, generation 0.
    #[cold]
    #[inline(never)]
    fn new_slot(&mut self) -> u32 {
        let i = u32::try_from(self.gens.len())
            .ok()
            .filter(|&i| i != NO_SLOT)
            .expect("herdsim engine: more than u32::MAX - 1 cancellable events pending");
        self.gens.push(0);
        i
    }

    /// File an entry into its bucket (does not count it in `stored`).
    #[inline]
    fn insert(&mut self, e: Entry<E>) {
        let b = locate(self.base, e.time);
        let bucket = &mut self.buckets[b];
        if bucket.is_empty() {
            // Kept room back in use.
            self.spare -= bucket.capacity().saturating_sub(KEEP_CAPACITY);
        }
        bucket.push(e);
        self.occupied[b / 64] |= 1 << (b % 64);
        self.summary |= 1 << (b / 64);
    }

    /// Empty bucket `b`, keeping its room within the budget of
    /// [`KEEP_CAPACITY`]. A bucket taken away by `refill` is counted in
    /// `spare` already: the caller puts it back empty, then calls this.
    #[inline]
    fn empty_bucket(&mut self, b: usize) {
        let bucket = &mut self.buckets[b];
        let extra = bucket.capacity().saturating_sub(KEEP_CAPACITY);
        let counted = bucket.is_empty();
        bucket.clear();
        if extra == 0 {
            return;
        }
        if !counted {
            self.spare += extra;
        }
        self.peak = self.peak.max(self.live);
        let budget = (SPARE_PER_PENDING * self.peak).max(SPARE_MIN);
        if self.spare > budget {
            self.spare -= extra;
            *bucket = Vec::with_capacity(KEEP_CAPACITY);
        }
    }

    /// Mark bucket `b` empty.
    #[inline]
    fn unmark(&mut self, b: usize) {
        let w = b / 64;
        self.occupied[w] &= !(1 << (b % 64));
        if self.occupied[w] == 0 {
            self.summary &= !(1 << w);
        }
    }

    /// Free the slot of an event that fired or was cancelled: bump its
    /// generation so its key and entry no longer match, and make it
    /// reusable. A slot whose generation reaches `u32::MAX` is retired
    /// instead (4 bytes per 2^32 reuses): no entry or key ever carries that
    /// generation, so nothing matches it.
    #[inline]
    fn release(&mut self, slot: u32) {
        let g = &mut self.gens[slot as usize];
        *g += 1;
        if *g != u32::MAX {
            self.free.push(slot);
        }
    }

    /// Level 0 is empty and `b` (above level 0) is the first non-empty
    /// bucket: redistribute it into the (empty) levels below. Stale entries
    /// move along; they are dropped when reached or by compaction.
    #[inline(never)]
    fn refill(&mut self, b: usize) {
        debug_assert!(!at_level0(b));
        let mut items = std::mem::take(&mut self.buckets[b]);
        self.unmark(b);
        // Every entry of the bucket shares the digits from `level` up; the
        // new base keeps them and zeroes the rest, so it is <= all of them
        // and leaves every other bucket's classification unchanged. (The
        // earliest time as the base, a radix heap's rule, saves moves but
        // costs a scan: measured slower on the hold model.)
        let shift = (b / SLOTS) as u32 * BITS;
        self.base = (items[0].time >> shift) << shift;
        // Counted as kept while it is away (it is empty to `insert`).
        self.spare += items.capacity().saturating_sub(KEEP_CAPACITY);
        for e in items.drain(..) {
            self.insert(e);
        }
        self.buckets[b] = items;
        self.empty_bucket(b);
    }

    /// Drop every stale entry.
    #[cold]
    fn compact(&mut self) {
        let gens = &self.gens;
        let mut stored = 0;
        let mut emptied = Vec::new();
        for w in 0..WORDS {
            let mut occ = self.occupied[w];
            while occ != 0 {
                let b = w * 64 + occ.trailing_zeros() as usize;
                occ &= occ - 1;
                let bucket = &mut self.buckets[b];
                if at_level0(b) {
                    bucket.drain(..self.head0[b] as usize);
                    self.head0[b] = 0;
                }
                bucket.retain(|e| is_live(gens, e));
                if bucket.is_empty() {
                    self.occupied[w] &= !(1 << (b % 64));
                    // Its room is kept now (and freed below if over the
                    // budget).
                    self.spare += bucket.capacity().saturating_sub(KEEP_CAPACITY);
                    emptied.push(b);
                }
                stored += bucket.len();
            }
            if self.occupied[w] == 0 {
                self.summary &= !(1 << w);
            }
        }
        self.stored = stored;
        for b in emptied {
            self.empty_bucket(b);
        }
    }

    /// Entries held (live + stale); for tests of the memory bound.
    #[cfg(test)]
    fn heap_entries(&self) -> usize {
        self.stored + self.small.len()
    }

    /// Entries the buckets have room for, in all; for tests of the memory
    /// bound.
    #[cfg(test)]
    fn bucket_capacity(&self) -> usize {
        let kept: usize = self
            .buckets
            .iter()
            .filter(|b| b.is_empty())
            .map(|b| b.capacity().saturating_sub(KEEP_CAPACITY))
            .sum();
        assert_eq!(kept, self.spare, "the room kept is counted");
        self.buckets.iter().map(Vec::capacity).sum()
    }

    /// Slots allocated; for tests of slot reuse.
    #[cfg(test)]
    fn slots_allocated(&self) -> usize {
        self.gens.len()
    }
}
