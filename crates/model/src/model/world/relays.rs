//! Large relays as cursors.
//!
//! A message relayed to a channel of thousands of agents is thousands of
//! deliveries, each due at its own time (the base delay plus the
//! recipient's downlink jitter). Scheduled one by one, they fill the
//! event queue with entries that are moved from bucket to bucket before
//! they pop. A relay to [`CURSOR_MIN`] recipients or more is instead kept
//! here as one *cursor*: its arrivals sorted by time (ties in the order
//! they were sent, that is recipient order), with the earliest arrival not
//! yet delivered due in a small heap of the cursors in flight, which the
//! world merges with the event queue. When that arrival is taken, the
//! cursor's next arrival is made due in its place (one step of the heap)
//! and the world delivers this one.
//!
//! The times and draws are the same either way; what a cursor changes is
//! the order of events due in the same microsecond: a cursor's arrival
//! runs after every event of the queue due in that microsecond, where a
//! delivery scheduled at the relay would have run before those scheduled
//! after it (docs/model.md, modelling choice 28).

use super::ServerMsg;
use super::agents::Hold;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::binary_heap::PeekMut;
use std::sync::Arc;

/// The fewest deliveries of one server step kept as a cursor; fewer are
/// scheduled one by one. A channel of fewer agents than this is simulated
/// exactly as before cursors existed.
pub(super) const CURSOR_MIN: usize = 64;

/// One delivery of a relay: when it arrives, to which agent (and which
/// incarnation of it), and which of its cursor's payloads.
#[derive(Clone, Copy)]
pub(super) struct Arrival {
    pub(super) at: u64,
    pub(super) agent: u32,
    pub(super) inc: u32,
    pub(super) msg: u32,
}

/// One payload of a relay, and the hold its arrivals keep on the message
/// it relays.
///
/// A delivery of a MSG keeps its message open until it arrives (docs/model.md:
/// a message is counted once nothing about it is in flight). A delivery
/// scheduled on its own takes a hold of its own; the arrivals of one
/// payload of a cursor share one, taken when the cursor starts and dropped
/// after its last arrival: the message can close only after that arrival
/// either way, so it closes at the same moment, and the message's table is
/// read once per relay instead of twice per recipient.
pub(super) struct Payload {
    msg: Arc<ServerMsg>,
    /// The number of the message relayed, while it is held open.
    relay: Option<u32>,
    /// That message's reply depth (fixed when it was posted).
    depth: Option<u32>,
    /// Arrivals of this payload still to come.
    left: u32,
}

/// A relay's deliveries while the server step that makes them is sent.
#[derive(Default)]
pub(super) struct Batch {
    arrivals: Vec<Arrival>,
    /// Per payload of the step (by its index in the server's sends): the
    /// message it relays, and how many of the arrivals carry it.
    payloads: Vec<(Option<u32>, u32)>,
}

impl Batch {
    /// A server step's sends begin, with `payloads` payloads.
    pub(super) fn begin(&mut self, payloads: usize) {
        self.arrivals.clear();
        self.payloads.clear();
        self.payloads.resize(payloads, (None, 0));
    }

    /// Add a delivery of payload `p` at `at` to `agent` (incarnation
    /// `inc`); `relay`: the message it relays, if the world knows it.
    pub(super) fn push(&mut self, at: u64, agent: u32, inc: u32, p: u32, relay: Option<u32>) {
        if let Some((r, n)) = self.payloads.get_mut(p as usize) {
            *r = relay;
            // Fewer arrivals than pending events, which fit a u32.
            *n += 1;
        }
        self.arrivals.push(Arrival {
            at,
            agent,
            inc,
            msg: p,
        });
    }
}

/// One relay in flight.
#[derive(Default)]
struct Cursor {
    /// Arrivals not yet delivered, latest first: the next one is the last.
    arrivals: Vec<Arrival>,
    msgs: Vec<Payload>,
}

/// A cursor's arrival as the world takes it: with its payload's hold,
/// dropped after the payload's last arrival.
pub(super) struct Taken {
    pub(super) arrival: Arrival,
    pub(super) msg: Arc<ServerMsg>,
    pub(super) hold: Hold,
}

/// The cursors of a run, by id (an id is reused once its cursor is done).
#[derive(Default)]
pub(super) struct Relays {
    cursors: Vec<Cursor>,
    free: Vec<u32>,
    /// Arrivals still waiting in cursors, and entries of `due` (they
    /// count as pending events).
    waiting: usize,
    /// Room for the sort, kept from one relay to the next.
    keys: Vec<u64>,
    tmp: Vec<u64>,
    counts: Vec<u32>,
    /// Each cursor's next arrival, by time, ties in the order they were
    /// scheduled: `(time, order, id)`. Kept here rather than in the event
    /// queue (a handful of cursors are in flight at once, and a push into
    /// the radix queue and a pop out of it cost more than this heap's);
    /// the world merges it with the queue ([`Engine::pop_due_by`]).
    ///
    /// [`Engine::pop_due_by`]: crate::engine::Engine::pop_due_by
    due: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// Arrivals scheduled in `due` so far (the next one's order; those
    /// not in `due` any more were taken: events of the run).
    scheduled: u64,
}

/// How many arrivals ahead of the next agent's a cursor's arrivals are
/// fetched into the caches ([`Relays::agent_ahead`]).
const ARRIVALS_AHEAD: usize = 16;

/// Most bits per digit of the radix sort: 2048 counters, in the L1 cache.
const DIGIT_BITS: u32 = 11;

impl Relays {
    /// Arrivals waiting in cursors, and the cursors' next arrivals due
    /// (which were each an event in the queue before `due` was kept apart,
    /// and still count as one more pending event).
    pub(super) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Cursor `id`'s next arrival is due at `at`.
    pub(super) fn schedule(&mut self, at: u64, id: u32) {
        self.due.push(Reverse((at, self.scheduled, id)));
        self.scheduled += 1;
        self.waiting += 1;
    }

    /// When the earliest next arrival of a cursor is due.
    #[inline]
    pub(super) fn next_due(&self) -> Option<u64> {
        self.due.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Take the earliest next arrival of a cursor: its time and cursor.
    /// The cursor's arrival after it (if any) is made due in its place, in
    /// one step of the heap rather than a pop and a push: the order it is
    /// made due in is the same as if [`schedule`](Self::schedule) had been
    /// called just after this.
    pub(super) fn take_due(&mut self) -> Option<(u64, u32)> {
        let mut top = self.due.peek_mut()?;
        let Reverse((at, _, id)) = *top;
        let after = self.cursors.get(id as usize).and_then(|c| {
            let i = c.arrivals.len().checked_sub(2)?;
            c.arrivals.get(i).map(|x| x.at)
        });
        match after {
            Some(t) => {
                *top = Reverse((t, self.scheduled, id));
                self.scheduled += 1;
            }
            None => {
                PeekMut::pop(top);
                self.waiting -= 1;
            }
        }
        Some((at, id))
    }

    /// Arrivals taken with [`take_due`](Self::take_due) so far.
    pub(super) fn taken(&self) -> u64 {
        // Fewer entries in `due` than pending events, which fit a u64.
        self.scheduled - self.due.len() as u64
    }

    /// Make a cursor of `batch` (left empty, with its room), whose
    /// payloads are `payloads`; returns its id and the time of its first
    /// arrival, or `None` if `batch` is empty.
    pub(super) fn start(
        &mut self,
        batch: &mut Batch,
        payloads: &[Arc<ServerMsg>],
    ) -> Option<(u32, u64)> {
        if batch.arrivals.is_empty() {
            batch.payloads.clear();
            return None;
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                // Fewer cursors than pending events, and the pending events
                // are bounded below u32::MAX (`Prepared::set_max_pending`).
                self.cursors.push(Cursor::default());
                (self.cursors.len() - 1) as u32
            }
        };
        let cursor = &mut self.cursors[id as usize];
        cursor.arrivals.clear();
        sort_latest_first(
            &batch.arrivals,
            &mut self.keys,
            &mut self.tmp,
            &mut self.counts,
            &mut cursor.arrivals,
        );
        batch.arrivals.clear();
        cursor.msgs.clear();
        cursor
            .msgs
            .extend(
                payloads
                    .iter()
                    .zip(batch.payloads.drain(..))
                    .map(|(msg, (relay, left))| Payload {
                        msg: Arc::clone(msg),
                        relay,
                        depth: None,
                        left,
                    }),
            );
        self.waiting += cursor.arrivals.len();
        let first = cursor.arrivals.last().map(|a| a.at)?;
        Some((id, first))
    }

    /// Take the holds of cursor `id`'s payloads: `hold(m)` holds message
    /// `m` open once and gives its depth, or `None` if the world does not
    /// know it (it is then not held, and its arrivals carry no number, as a
    /// delivery scheduled on its own would find none on arrival).
    pub(super) fn hold(&mut self, id: u32, mut hold: impl FnMut(u32) -> Option<u32>) {
        let Some(cursor) = self.cursors.get_mut(id as usize) else {
            return;
        };
        // A payload none of whose sends became an arrival (to the operator,
        // or lost) is not held: its relay is `None`, as `Batch::push`
        // records the relay only with an arrival.
        for p in cursor.msgs.iter_mut() {
            if let Some(m) = p.relay {
                p.depth = hold(m);
                if p.depth.is_none() {
                    p.relay = None;
                }
            }
        }
    }

    /// Take cursor `id`'s next arrival and its payload; with the time of
    /// the one after it, or `None` when the cursor is done (and its id free
    /// again).
    pub(super) fn next(&mut self, id: u32) -> Option<(Taken, Option<u64>)> {
        let cursor = self.cursors.get_mut(id as usize)?;
        let a = cursor.arrivals.pop()?;
        let p = cursor.msgs.get_mut(a.msg as usize)?;
        p.left = p.left.saturating_sub(1);
        let taken = Taken {
            arrival: a,
            msg: Arc::clone(&p.msg),
            hold: Hold {
                relay: p.relay,
                depth: p.depth,
                release: p.left == 0,
            },
        };
        self.waiting -= 1;
        let after = cursor.arrivals.last().map(|x| x.at);
        if after.is_none() {
            cursor.msgs.clear();
            self.free.push(id);
        }
        Some((taken, after))
    }

    /// The agent of cursor `id`'s arrival `k` places after its next one
    /// (for prefetching). With `fetch`, also fetch the arrivals
    /// [`ARRIVALS_AHEAD`] places after that from memory: a cursor is read
    /// long after it was sorted, and in a large channel the cursors in
    /// flight outgrow the caches.
    pub(super) fn agent_ahead(&self, id: u32, k: usize, fetch: bool) -> Option<u32> {
        let arrivals = &self.cursors.get(id as usize)?.arrivals;
        let i = arrivals.len().checked_sub(1 + k)?;
        if fetch && let Some(far) = i.checked_sub(ARRIVALS_AHEAD).and_then(|j| arrivals.get(j)) {
            super::prefetch(far);
        }
        arrivals.get(i).map(|a| a.agent)
    }
}

/// Append `arrivals` to `out` sorted by time, latest first, arrivals due
/// at the same time in reverse order of `arrivals` (so that popping from
/// the end gives time order, ties in sending order).
///
/// An LSD radix sort of keys `(at - earliest) << 32 | index`, over only
/// the digits the span of the times needs (two for a span under 4 s, each
/// as narrow as two allow), with its room kept between calls: a relay to
/// 10 000 agents is sorted in well under a tenth of the time `sort_by_key`
/// takes, and allocates nothing. A radix sort is stable, and the index in
/// the low half keeps the sending order of equal times anyway. The keys
/// are read once for the counters of every digit (made with the keys)
/// and once per digit to place them.
fn sort_latest_first(
    arrivals: &[Arrival],
    keys: &mut Vec<u64>,
    tmp: &mut Vec<u64>,
    counts: &mut Vec<u32>,
    out: &mut Vec<Arrival>,
) {
    let Some(first) = arrivals.first() else {
        return;
    };
    let (lo, hi) = arrivals.iter().fold((first.at, first.at), |(lo, hi), a| {
        (lo.min(a.at), hi.max(a.at))
    });
    let span = hi - lo;
    let n = arrivals.len();
    if span >= 1 << 32 || n as u64 >= 1 << 32 {
        // Over 71 minutes of spread (or 4 billion recipients): the general
        // stable sort.
        let mut v = arrivals.to_vec();
        v.sort_by_key(|a| a.at);
        out.extend(v.iter().rev());
        return;
    }
    let bits = 64 - span.leading_zeros();
    // As few passes as digits of at most DIGIT_BITS allow, each digit as
    // narrow as that many passes allow: fewer counters to clear and sum
    // (a span of 17 bits, a relay spread over 0.1 s: two digits of 9 bits,
    // 512 counters each, not 2048).
    let passes = bits.div_ceil(DIGIT_BITS) as usize;
    let digit_bits = bits.div_ceil(passes.max(1) as u32).max(1);
    let radix = 1usize << digit_bits;
    let mask = (radix - 1) as u64;
    // Every pass's counters, filled in the one pass that makes the keys.
    counts.clear();
    counts.resize(passes * radix, 0);
    keys.clear();
    keys.reserve(n);
    for (i, a) in arrivals.iter().enumerate() {
        let k = ((a.at - lo) << 32) | i as u64;
        keys.push(k);
        let mut t = k >> 32;
        for c in counts.chunks_exact_mut(radix) {
            // At most n < 2^32 per counter.
            let d = (t & mask) as usize;
            c[d] = c[d].wrapping_add(1);
            t >>= digit_bits;
        }
    }
    // Grown, never cleared: every entry is written before it is read.
    if tmp.len() < n {
        tmp.resize(n, 0);
    }
    tmp.truncate(n);
    let mut shift = 32;
    for count in counts.chunks_exact_mut(radix) {
        let mut sum = 0u32;
        for c in count.iter_mut() {
            let x = *c;
            *c = sum;
            // The counts add up to n < 2^32.
            sum = sum.wrapping_add(x);
        }
        for &k in keys.iter() {
            let d = ((k >> shift) & mask) as usize;
            tmp[count[d] as usize] = k;
            count[d] = count[d].wrapping_add(1);
        }
        std::mem::swap(keys, tmp);
        shift += digit_bits;
    }
    out.reserve(n);
    out.extend(
        keys.iter()
            .rev()
            .map(|&k| arrivals[(k & 0xffff_ffff) as usize]),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrivals(times: &[u64]) -> Vec<Arrival> {
        times
            .iter()
            .enumerate()
            .map(|(i, &at)| Arrival {
                at,
                agent: i as u32,
                inc: 0,
                msg: 0,
            })
            .collect()
    }

    /// What the sort must give: time order, ties in sending order, reversed.
    fn reference(a: &[Arrival]) -> Vec<(u64, u32)> {
        let mut v: Vec<(u64, u32)> = a.iter().map(|x| (x.at, x.agent)).collect();
        v.sort();
        v.reverse();
        v
    }

    fn sorted(a: &[Arrival]) -> Vec<(u64, u32)> {
        let (mut keys, mut tmp, mut counts, mut out) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        sort_latest_first(a, &mut keys, &mut tmp, &mut counts, &mut out);
        out.iter().map(|x| (x.at, x.agent)).collect()
    }

    #[test]
    fn sorts_by_time_with_ties_in_sending_order() {
        for times in [
            vec![5, 3, 5, 1, 3, 5],
            vec![7; 100],
            vec![1_000_000, 40_000, 40_001, 4_000_000_000, 0],
            // Spans of one, two and three digits, and over 2^32.
            (0..500).map(|i| (i * 7919) % 2048).collect(),
            (0..500).map(|i| (i * 7919) % 3_000_000 + 123).collect(),
            // An hour into a run: the keys are offsets from the earliest.
            (0..500)
                .map(|i| 3_600_000_000 + (i * 7919) % 3_000_000)
                .collect(),
            // Spreads of 2^32 µs and more: the general sort.
            vec![1 << 32, 0, 1 << 32, 5, 0],
            (0..500)
                .map(|i| (i * 104_729_000_003) % (1 << 40) + 10)
                .collect(),
            (0..500)
                .map(|i| (i * 7_919_000_000_001) % (1 << 50))
                .collect(),
        ] {
            let a = arrivals(&times);
            assert_eq!(sorted(&a), reference(&a), "{times:?}");
        }
        assert!(sorted(&[]).is_empty());
        // Every span from 0 to 32 bits: digits of every width the sort
        // picks (one pass of up to 11 bits, two of 6 to 11, three of 8 to
        // 11), with ties.
        for bits in 0..=32u32 {
            let modulus = (1u64 << bits).max(1);
            let times: Vec<u64> = (0..300u64)
                .map(|i| 1_000 + (i * 2_654_435_761 + (i * i) % 97) % modulus)
                .chain([1_000, 1_000 + modulus - 1])
                .collect();
            let a = arrivals(&times);
            assert_eq!(sorted(&a), reference(&a), "{bits} bits");
        }
    }

    #[test]
    fn a_cursor_gives_its_arrivals_in_order_and_frees_its_id() {
        let mut r = Relays::default();
        let m = Arc::new(ServerMsg::Error {
            code: "X".into(),
            message: String::new(),
        });
        let payloads = [Arc::clone(&m)];
        let mut b = Batch::default();
        b.begin(1);
        for (i, at) in [30, 10, 20, 10].into_iter().enumerate() {
            b.push(at, i as u32, 0, 0, None);
        }
        assert_eq!(b.payloads, [(None, 4)], "one payload for the whole relay");
        let (id, first) = r.start(&mut b, &payloads).expect("a cursor");
        assert_eq!(first, 10);
        assert!(b.arrivals.is_empty() && b.payloads.is_empty());
        assert_eq!(r.waiting(), 4);
        assert_eq!(r.agent_ahead(id, 0, false), Some(1));
        assert_eq!(r.agent_ahead(id, 1, true), Some(3));
        let mut got = Vec::new();
        while let Some((t, after)) = r.next(id) {
            let a = t.arrival;
            got.push((a.at, a.agent));
            if after.is_none() {
                break;
            }
        }
        assert_eq!(got, [(10, 1), (10, 3), (20, 2), (30, 0)]);
        assert_eq!(r.waiting(), 0);
        // The id is reused.
        b.begin(1);
        b.push(5, 9, 0, 0, None);
        assert_eq!(r.start(&mut b, &payloads), Some((id, 5)));
        assert!(r.start(&mut Batch::default(), &payloads).is_none());
    }

    #[test]
    fn the_cursors_next_arrivals_come_due_by_time_ties_in_the_order_made_due() {
        let mut r = Relays::default();
        assert_eq!((r.next_due(), r.take_due()), (None, None));
        for (at, id) in [(50, 0), (20, 1), (50, 2), (20, 3), (10, 4), (50, 1)] {
            r.schedule(at, id);
        }
        assert_eq!(r.waiting(), 6, "each counts as a pending event");
        let mut got = Vec::new();
        while let Some(t) = r.next_due() {
            let (at, id) = r.take_due().expect("due");
            assert_eq!(at, t);
            got.push((at, id));
        }
        assert_eq!(got, [(10, 4), (20, 1), (20, 3), (50, 0), (50, 2), (50, 1)]);
        assert_eq!((r.taken(), r.waiting()), (6, 0));
    }

    #[test]
    fn taking_an_arrival_makes_its_cursors_next_one_due_in_its_place() {
        // Two cursors driven as the world drives them: each arrival taken
        // from the heap, then from its cursor.
        let m = Arc::new(ServerMsg::Error {
            code: "X".into(),
            message: String::new(),
        });
        let mut r = Relays::default();
        let start = |times: &[u64], r: &mut Relays| {
            let mut b = Batch::default();
            b.begin(1);
            for (i, &at) in times.iter().enumerate() {
                b.push(at, i as u32, 0, 0, None);
            }
            let (id, first) = r.start(&mut b, &[Arc::clone(&m)]).expect("a cursor");
            r.schedule(first, id);
            id
        };
        let a = start(&[10, 30, 20], &mut r);
        let b = start(&[20, 40], &mut r);
        assert_eq!(r.waiting(), 5 + 2, "arrivals, and one due per cursor");
        let mut got = Vec::new();
        while let Some((at, id)) = r.take_due() {
            let (Taken { arrival: x, .. }, _) = r.next(id).expect("an arrival");
            assert_eq!(x.at, at);
            got.push((at, id, x.agent));
        }
        // At 20, cursor `a`'s second arrival was made due (when its first
        // was taken, at 10) after cursor `b`'s first (at its start).
        assert_eq!(
            got,
            [(10, a, 0), (20, b, 0), (20, a, 2), (30, a, 1), (40, b, 1)]
        );
        assert_eq!((r.taken(), r.waiting()), (5, 0));
        assert_eq!(r.next_due(), None);
    }

    #[test]
    fn each_arrival_gets_its_own_payload_and_the_last_of_each_drops_its_hold() {
        // A server step that relays a MSG and answers its sender (an
        // ERROR here) sends two payloads; each arrival must carry its own.
        let msg = |code: &str| {
            Arc::new(ServerMsg::Error {
                code: code.into(),
                message: String::new(),
            })
        };
        let (relay, answer) = (msg("relay"), msg("answer"));
        // A third payload sent to nobody simulated (the operator).
        let payloads = [Arc::clone(&relay), Arc::clone(&answer), msg("lost")];
        let mut b = Batch::default();
        b.begin(3);
        b.push(30, 0, 0, 0, Some(7));
        b.push(10, 1, 0, 0, Some(7));
        b.push(20, 2, 0, 1, None);
        b.push(5, 3, 0, 0, Some(7));
        let mut r = Relays::default();
        let (id, _) = r.start(&mut b, &payloads).expect("a cursor");
        // One hold per payload that relays a message and has arrivals.
        let mut holds = Vec::new();
        r.hold(id, |m| {
            holds.push(m);
            Some(1)
        });
        assert_eq!(holds, [7]);
        let mut got = Vec::new();
        while let Some((t, after)) = r.next(id) {
            let answered = Arc::ptr_eq(&t.msg, &answer);
            let h = t.hold;
            got.push((t.arrival.agent, answered, h.relay, h.depth, h.release));
            if after.is_none() {
                break;
            }
        }
        let held = (Some(7), Some(1));
        assert_eq!(
            got,
            [
                (3, false, held.0, held.1, false),
                (1, false, held.0, held.1, false),
                (2, true, None, None, true),
                (0, false, held.0, held.1, true),
            ]
        );
        // A message the world does not know is neither held nor named.
        b.begin(1);
        b.push(5, 0, 0, 0, Some(8));
        b.push(6, 1, 0, 0, Some(8));
        let (id, _) = r.start(&mut b, &payloads[..1]).expect("a cursor");
        r.hold(id, |_| None);
        let (t, _) = r.next(id).expect("an arrival");
        let h = t.hold;
        assert_eq!((h.relay, h.depth, h.release), (None, None, false));
    }
}
