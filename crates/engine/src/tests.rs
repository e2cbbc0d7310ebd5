use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

/// How long a watched test may run: they take milliseconds.
const BOUND: Duration = Duration::from_secs(10);

/// The watched tests that are running (every test below but the two long
/// ones, and each case of the property test), with when each started.
static WATCHED: Mutex<BTreeMap<u64, (&'static str, Instant)>> = Mutex::new(BTreeMap::new());

/// A test's registration with the watchdog; it ends when dropped.
struct Watch(u64);

/// Watch a test: one that runs past [`BOUND`] is caught in an endless loop
/// (a broken queue, as mutation testing makes them: docs/testing.md), and
/// since a running thread cannot be stopped, the test binary is aborted
/// with a message rather than left to hang.
fn watch(name: &'static str) -> Watch {
    static WATCHDOG: Once = Once::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    WATCHDOG.call_once(|| {
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_millis(100));
                let watched = WATCHED.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some((name, _)) = watched.values().find(|(_, t)| t.elapsed() > BOUND) {
                    // Not `eprintln!`: the test harness captures that,
                    // in this thread too, and never shows it.
                    let _ = writeln!(
                        std::io::stderr(),
                        "engine::tests::{name} still runs after {BOUND:?}: an endless loop? \
                         Aborting the test binary."
                    );
                    std::process::abort();
                }
            }
        });
    });
    let id = NEXT.fetch_add(1, Relaxed);
    WATCHED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, (name, Instant::now()));
    Watch(id)
}

impl Drop for Watch {
    fn drop(&mut self) {
        WATCHED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.0);
    }
}

fn drain<E>(e: &mut Engine<E>) -> Vec<(Time, E)> {
    std::iter::from_fn(|| e.pop()).collect()
}

#[test]
fn empty_engine() {
    let _watch = watch("empty_engine");
    let mut e: Engine<u32> = Engine::new();
    assert!(e.is_empty());
    assert_eq!(e.len(), 0);
    assert_eq!(e.peek_time(), None);
    assert_eq!(e.pop(), None);
    assert_eq!(e.now(), 0);
    assert_eq!(e.popped(), 0);
}

#[test]
fn pops_in_time_order_and_advances_now() {
    let _watch = watch("pops_in_time_order_and_advances_now");
    let mut e = Engine::with_capacity(8);
    e.schedule_at(30, "c");
    e.schedule_at(10, "a");
    e.schedule_at(20, "b");
    assert_eq!(e.len(), 3);
    assert_eq!(e.peek_time(), Some(10));
    assert_eq!(e.pop(), Some((10, "a")));
    assert_eq!(e.now(), 10);
    e.schedule_in(5, "a2");
    assert_eq!(drain(&mut e), vec![(15, "a2"), (20, "b"), (30, "c")]);
    assert_eq!(e.now(), 30);
    assert_eq!(e.popped(), 4);
    assert!(e.is_empty());
}

#[test]
fn ties_in_scheduling_order() {
    let _watch = watch("ties_in_scheduling_order");
    let mut e = Engine::new();
    for i in 0..100u32 {
        // Interleave two instants so ties are not contiguous in insertion.
        e.schedule_at(if i % 2 == 0 { 7 } else { 3 }, i);
    }
    let got: Vec<u32> = drain(&mut e).into_iter().map(|(_, v)| v).collect();
    let want: Vec<u32> = (0..100)
        .filter(|i| i % 2 == 1)
        .chain((0..100).filter(|i| i % 2 == 0))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn events_scheduled_at_now_while_running_come_after_earlier_ties() {
    let _watch = watch("events_scheduled_at_now_while_running_come_after_earlier_ties");
    let mut e = Engine::new();
    e.schedule_at(5, 1);
    e.schedule_at(5, 2);
    assert_eq!(e.pop(), Some((5, 1)));
    e.schedule_in(0, 3);
    assert_eq!(drain(&mut e), vec![(5, 2), (5, 3)]);
}

#[test]
fn sparse_events_pop_directly_and_keep_order() {
    let _watch = watch("sparse_events_pop_directly_and_keep_order");
    // Each event alone in its bucket far above level 0 (the lone-entry
    // path), a cancelled lone one among them, then ties and a schedule at
    // `now` after the base has moved to a popped time.
    let mut e = Engine::new();
    e.schedule_at(70_000, 'a');
    let gone = e.schedule_at(5_000_000, 'x');
    e.schedule_at(9_000_000, 'b');
    e.schedule_at(300_000_000, 'c');
    assert!(e.cancel(gone));
    assert_eq!(e.pop(), Some((70_000, 'a')));
    assert_eq!(e.pop(), Some((9_000_000, 'b')));
    e.schedule_at(9_000_000, 'd'); // at now
    e.schedule_at(9_000_001, 'e');
    e.schedule_at(9_000_000, 'f'); // at now, after d
    assert_eq!(
        drain(&mut e),
        vec![
            (9_000_000, 'd'),
            (9_000_000, 'f'),
            (9_000_001, 'e'),
            (300_000_000, 'c')
        ]
    );
    assert_eq!(e.now(), 300_000_000);
}

#[test]
fn past_is_clamped_to_now() {
    let _watch = watch("past_is_clamped_to_now");
    let mut e = Engine::new();
    e.schedule_at(100, 'a');
    e.schedule_at(100, 'b');
    assert_eq!(e.pop(), Some((100, 'a')));
    e.schedule_at(3, 'c'); // in the past: fires at 100, after 'b'
    assert_eq!(e.peek_time(), Some(100));
    assert_eq!(drain(&mut e), vec![(100, 'b'), (100, 'c')]);
    assert_eq!(e.now(), 100);
}

#[test]
fn schedule_in_saturates() {
    let _watch = watch("schedule_in_saturates");
    let mut e = Engine::new();
    e.schedule_at(10, 0);
    e.pop();
    e.schedule_in(Time::MAX, 1);
    assert_eq!(e.pop(), Some((Time::MAX, 1)));
    e.schedule_in(1, 2);
    assert_eq!(e.pop(), Some((Time::MAX, 2)));
}

#[test]
fn cancelled_never_fires() {
    let _watch = watch("cancelled_never_fires");
    let mut e = Engine::new();
    let a = e.schedule_at(1, 'a');
    let b = e.schedule_at(2, 'b');
    let c = e.schedule_at(3, 'c');
    assert!(e.is_pending(b));
    assert!(e.cancel(b));
    assert!(!e.is_pending(b));
    assert_eq!(e.len(), 2);
    assert!(e.cancel(a)); // the next one due: peek must move on
    assert_eq!(e.peek_time(), Some(3));
    assert_eq!(drain(&mut e), vec![(3, 'c')]);
    assert!(!e.cancel(c), "cancel after fire is a no-op");
    assert_eq!(e.popped(), 1);
}

#[test]
fn double_cancel_is_noop() {
    let _watch = watch("double_cancel_is_noop");
    let mut e = Engine::new();
    let k = e.schedule_at(5, ());
    assert!(e.cancel(k));
    assert!(!e.cancel(k));
    assert!(e.is_empty());
    assert_eq!(e.peek_time(), None);
    assert_eq!(e.pop(), None);
}

#[test]
fn stale_key_does_not_cancel_slot_reuser() {
    let _watch = watch("stale_key_does_not_cancel_slot_reuser");
    let mut e = Engine::new();
    let old = e.schedule_at(5, "old");
    assert!(e.cancel(old));
    let new = e.schedule_at(6, "new"); // reuses the freed slot
    assert_eq!(e.slots_allocated(), 1);
    assert_ne!(old, new);
    assert!(!e.cancel(old));
    assert!(e.is_pending(new));
    assert_eq!(e.pop(), Some((6, "new")));

    // Same after firing.
    let fired = e.schedule_in(1, "x");
    assert_eq!(e.pop(), Some((7, "x")));
    let reuser = e.schedule_in(1, "y");
    assert!(!e.cancel(fired));
    assert_eq!(e.pop(), Some((8, "y")));
    assert!(!e.cancel(reuser));
}

#[test]
fn cancelled_payload_is_dropped_when_reached() {
    let _watch = watch("cancelled_payload_is_dropped_when_reached");
    use std::rc::Rc;
    let token = Rc::new(());
    let mut e = Engine::new();
    let k = e.schedule_at(10, Rc::clone(&token));
    e.schedule_at(1, Rc::clone(&token));
    e.post_at(20, Rc::clone(&token));
    assert_eq!(Rc::strong_count(&token), 4);
    assert!(e.cancel(k));
    assert!(!e.is_pending(k));
    // The payload rides in its entry until the entry is reached.
    assert_eq!(Rc::strong_count(&token), 4);
    let (t, x) = e.pop().expect("the event at 1");
    assert_eq!(t, 1);
    drop(x);
    assert_eq!(Rc::strong_count(&token), 3);
    let (t, x) = e.pop().expect("the posted event at 20");
    assert_eq!(t, 20);
    drop(x);
    // Passing the cancelled entry at 10 dropped its payload.
    assert_eq!(Rc::strong_count(&token), 1);
    assert_eq!(e.pop(), None);
}

#[test]
fn the_small_lists_insert_moves_payloads_without_losing_or_doubling_one() {
    let _watch = watch("the_small_lists_insert_moves_payloads_without_losing_or_doubling_one");
    use std::rc::Rc;
    // Payloads that know their own time: each insert moves the entries due
    // no later than it one place up; every payload must pop once, in
    // order, and be dropped once (the count of the token says how many
    // are alive).
    let token = Rc::new(());
    let mut e = Engine::new();
    let times = [5u64, 3, 9, 3, 1, 7, 7, 0, 12, 5, 2, 11];
    for (i, &t) in times.iter().enumerate() {
        e.post_at(t, (t, i, Rc::clone(&token)));
    }
    assert_eq!(Rc::strong_count(&token), times.len() + 1);
    let mut want: Vec<(u64, usize)> = times.iter().copied().zip(0..).collect();
    want.sort();
    for (i, &(t, n)) in want.iter().enumerate() {
        let (at, (time, seq, x)) = e.pop().expect("pending");
        assert_eq!((at, time, seq), (t, t, n));
        drop(x);
        assert_eq!(Rc::strong_count(&token), times.len() - i);
    }
    // Entries left in the list when the engine is dropped go with it.
    for t in [4u64, 2, 8, 2] {
        e.post_at(100 + t, (t, 0, Rc::clone(&token)));
    }
    assert_eq!(Rc::strong_count(&token), 5);
    drop(e);
    assert_eq!(Rc::strong_count(&token), 1);
}

#[test]
fn posted_events_interleave_with_scheduled_ones_in_order() {
    let _watch = watch("posted_events_interleave_with_scheduled_ones_in_order");
    let mut e = Engine::new();
    e.post_at(5, "p5");
    let k = e.schedule_at(5, "s5");
    e.post_at(5, "p5b");
    e.post_in(3, "p3");
    e.schedule_at(7, "s7");
    assert!(e.is_pending(k));
    assert_eq!(e.len(), 5);
    assert_eq!(e.peek_time(), Some(3));
    let order: Vec<_> = std::iter::from_fn(|| e.pop()).collect();
    assert_eq!(
        order,
        vec![(3, "p3"), (5, "p5"), (5, "s5"), (5, "p5b"), (7, "s7")]
    );
    assert!(!e.is_pending(k));
    // Posting takes no slot.
    assert_eq!(e.slots_allocated(), 2);
}

#[test]
fn far_future_cancels_do_not_grow_memory() {
    // Schedule far in the future and cancel, a million times, while a few
    // near events keep the clock moving: slots and heap stay bounded.
    let mut e = Engine::new();
    for i in 0..10u64 {
        e.schedule_at(i, 0u64);
    }
    for i in 0..1_000_000u64 {
        let k = e.schedule_in(1_000_000_000 + i, 1);
        assert!(e.cancel(k));
        // Checked as it goes: a queue that keeps every stale entry fails
        // here at once instead of slowing down for a million steps.
        assert!(
            e.heap_entries() <= 10 + COMPACT_MIN_STALE,
            "step {i}: heap entries {}",
            e.heap_entries()
        );
        if i % 1000 == 0 {
            let (_, v) = e.pop().expect("near events remain");
            assert_eq!(v, 0);
            e.schedule_in(1, 0);
        }
    }
    assert_eq!(e.len(), 10);
    assert!(e.slots_allocated() <= 11, "slots {}", e.slots_allocated());
    assert!(
        e.heap_entries() <= 10 + COMPACT_MIN_STALE,
        "heap entries {}",
        e.heap_entries()
    );
    assert!(drain(&mut e).iter().all(|&(_, v)| v == 0));
}

#[test]
fn bursts_passing_through_many_buckets_do_not_grow_memory() {
    // A burst of 10 000 events (a relay to a large channel) every 100 ms
    // for 40 s of virtual time: the clock passes through every level-1
    // bucket, and an emptied bucket must not keep a burst's worth of room
    // each (before the fix: room for about a million entries here).
    let mut e = Engine::new();
    let mut peak_after_first = 0;
    for burst in 0..400u64 {
        for i in 0..10_000u64 {
            e.schedule_in(i % 997, burst);
        }
        assert!(e.radix, "the burst is in the radix queue's buckets");
        while e.pop().is_some() {}
        e.schedule_in(100_000 - 1000, u64::MAX);
        assert_eq!(e.pop().map(|(_, v)| v), Some(u64::MAX));
        if burst == 0 {
            peak_after_first = e.bucket_capacity();
        }
        if burst % 100 == 99 {
            // Emptied buckets keep at most 64 entries of room each, and
            // beyond that twice the most ever pending (10 001) in all.
            assert!(
                e.bucket_capacity() <= BUCKETS * 64 + 2 * 10_001,
                "burst {burst}: room for {} entries (after the first: {peak_after_first})",
                e.bucket_capacity()
            );
        }
    }
}

#[test]
fn mass_cancel_then_drain() {
    let _watch = watch("mass_cancel_then_drain");
    let mut e = Engine::new();
    let keys: Vec<_> = (0..10_000u64).map(|i| e.schedule_at(i % 97, i)).collect();
    for (i, k) in keys.iter().enumerate() {
        if i % 3 != 0 {
            assert!(e.cancel(*k));
        }
    }
    let got = drain(&mut e);
    let mut want: Vec<(Time, u64)> = (0..10_000u64)
        .filter(|i| i % 3 == 0)
        .map(|i| (i % 97, i))
        .collect();
    want.sort(); // by time, then by payload == scheduling order
    assert_eq!(got, want);
}

/// Reference model: a plain vector, scanned for the minimum.
#[derive(Default)]
struct Naive {
    now: Time,
    seq: u64,
    popped: u64,
    /// (time, seq, payload)
    pending: Vec<(Time, u64, u32)>,
}

impl Naive {
    fn schedule_at(&mut self, at: Time, v: u32) -> u64 {
        let s = self.seq;
        self.seq += 1;
        self.pending.push((at.max(self.now), s, v));
        s
    }
    fn cancel(&mut self, seq: u64) -> bool {
        match self.pending.iter().position(|p| p.1 == seq) {
            Some(i) => {
                self.pending.remove(i);
                true
            }
            None => false,
        }
    }
    fn pop(&mut self) -> Option<(Time, u32)> {
        let i = (0..self.pending.len()).min_by_key(|&i| (self.pending[i].0, self.pending[i].1))?;
        let (t, _, v) = self.pending.remove(i);
        self.now = t;
        self.popped += 1;
        Some((t, v))
    }
    fn peek_time(&self) -> Option<Time> {
        self.pending.iter().map(|p| (p.0, p.1)).min().map(|p| p.0)
    }
    fn pop_due_by(&mut self, limit: Time) -> Option<(Time, u32)> {
        if self.peek_time().is_some_and(|t| t <= limit) {
            return self.pop();
        }
        self.now = self.now.max(limit);
        None
    }
}

#[derive(Debug, Clone)]
enum Op {
    At {
        back: bool,
        d: u64,
    },
    In(u64),
    /// `post_at` (no key): the same order as the others.
    Post {
        back: bool,
        d: u64,
    },
    Cancel(usize),
    Pop,
    /// Schedule this many events (past the small list's bound, into the
    /// radix queue and, once drained, back).
    Burst(Vec<u64>),
    /// Pop up to this many.
    Drain(usize),
    /// `pop_due_by(now + d)` (an event kept outside the queue, due then),
    /// this many times.
    PopDueBy {
        d: u64,
        n: usize,
    },
}

/// Delays: mostly tiny (many ties, level 0), some spanning several radix
/// levels, a few huge or saturating.
fn delay() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0u64..20,
        3 => 0u64..100_000,
        1 => 0u64..(1 << 40),
        1 => prop_oneof![Just(u64::MAX), Just(u64::MAX - 1), any::<u64>()],
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<bool>(), delay()).prop_map(|(back, d)| Op::At { back, d }),
        3 => delay().prop_map(Op::In),
        2 => (any::<bool>(), delay()).prop_map(|(back, d)| Op::Post { back, d }),
        2 => any::<usize>().prop_map(Op::Cancel),
        3 => Just(Op::Pop),
        1 => prop::collection::vec(delay(), 0..2 * SMALL_MAX).prop_map(Op::Burst),
        1 => (0..3 * SMALL_MAX).prop_map(Op::Drain),
        2 => (delay(), 1..2 * SMALL_MAX).prop_map(|(d, n)| Op::PopDueBy { d, n }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn matches_naive_model(ops in prop::collection::vec(op(), 0..400)) {
        let _watch = watch("matches_naive_model");
        let mut e = Engine::new();
        let mut m = Naive::default();
        // Every key ever issued, with the model's sequence number.
        let mut keys: Vec<(EventKey, u64)> = Vec::new();
        let mut next_payload = 0u32;
        for op in ops {
            match op {
                Op::At { back, d } => {
                    let at = if back { m.now.saturating_sub(d) } else { m.now.saturating_add(d) };
                    let k = e.schedule_at(at, next_payload);
                    keys.push((k, m.schedule_at(at, next_payload)));
                    next_payload += 1;
                }
                Op::In(d) => {
                    let k = e.schedule_in(d, next_payload);
                    keys.push((k, m.schedule_at(m.now.saturating_add(d), next_payload)));
                    next_payload += 1;
                }
                Op::Post { back, d } => {
                    let at = if back { m.now.saturating_sub(d) } else { m.now.saturating_add(d) };
                    e.post_at(at, next_payload);
                    m.schedule_at(at, next_payload);
                    next_payload += 1;
                }
                Op::Cancel(i) => {
                    if !keys.is_empty() {
                        let (k, s) = keys[i % keys.len()];
                        prop_assert_eq!(e.cancel(k), m.cancel(s));
                    }
                }
                Op::Pop => prop_assert_eq!(e.pop(), m.pop()),
                Op::Burst(ds) => {
                    // Every other one posted (as the simulator's deliveries).
                    for (i, d) in ds.into_iter().enumerate() {
                        let s = m.schedule_at(m.now.saturating_add(d), next_payload);
                        if i % 2 == 0 {
                            keys.push((e.schedule_in(d, next_payload), s));
                        } else {
                            e.post_in(d, next_payload);
                        }
                        next_payload += 1;
                    }
                }
                Op::Drain(n) => {
                    for _ in 0..n {
                        prop_assert_eq!(e.pop(), m.pop());
                    }
                }
                Op::PopDueBy { d, n } => {
                    let limit = m.now.saturating_add(d);
                    for _ in 0..n {
                        prop_assert_eq!(e.pop_due_by(limit), m.pop_due_by(limit));
                    }
                }
            }
            prop_assert_eq!(e.len(), m.pending.len());
            e.bucket_capacity(); // checks the kept room's count
            // A hint is only a hint, but never panics, and there is none
            // for an empty queue.
            for k in [0, 1, 7, 1000] {
                if e.hint(k).is_some() {
                    prop_assert!(e.heap_entries() > 0);
                }
            }
            prop_assert_eq!(e.is_empty(), m.pending.is_empty());
            prop_assert_eq!(e.peek_time(), m.peek_time());
            prop_assert_eq!(e.now(), m.now);
            prop_assert_eq!(e.popped(), m.popped);
            for &(k, s) in &keys {
                prop_assert_eq!(e.is_pending(k), m.pending.iter().any(|p| p.1 == s));
            }
        }
        while let Some(x) = m.pop() {
            prop_assert_eq!(e.pop(), Some(x));
        }
        prop_assert_eq!(e.pop(), None);
    }
}

#[test]
fn the_small_list_hands_over_to_the_radix_queue_and_back_in_order() {
    let mut e = Engine::new();
    let mut model = Vec::new();
    // Out of order, with ties: more than the small list holds.
    for i in 0..(SMALL_MAX as u64 + 10) {
        let t = (i * 7919) % 50;
        e.schedule_at(t, i);
        model.push((t, i));
        assert_eq!(e.radix, i as usize >= SMALL_MAX, "after {} events", i + 1);
    }
    // A cancelled one is left behind by the hand-over.
    let k = e.schedule_at(3, u64::MAX);
    assert!(e.cancel(k));
    model.sort(); // by time, then payload = scheduling order
    let popped: Vec<(Time, u64)> = std::iter::from_fn(|| e.pop()).collect();
    assert_eq!(popped, model);
    assert_eq!(e.heap_entries(), 0, "drained, the stale entry too");
    // The next event finds the radix queue empty and goes to the small
    // list: ties in scheduling order, the past clamped to now.
    let now = e.now();
    e.schedule_at(now + 5, 1);
    assert!(
        !e.radix,
        "an empty radix queue hands back to the small list"
    );
    e.schedule_at(now + 5, 2);
    e.schedule_at(0, 3);
    assert!(!e.radix);
    assert_eq!(drain(&mut e), [(now, 3), (now + 5, 1), (now + 5, 2)]);
}

#[test]
fn generation_wrap_retires_the_slot() {
    let _watch = watch("generation_wrap_retires_the_slot");
    let mut e = Engine::new();
    let k0 = e.schedule_at(1, 'a');
    assert!(e.cancel(k0));
    e.gens[0] = u32::MAX - 1; // as after 2^32 - 2 reuses
    let k1 = e.schedule_at(2, 'b');
    assert_eq!(k1.slot, 0);
    assert_eq!(e.pop(), Some((2, 'b')));
    // Slot 0 is retired: the next event gets a fresh slot and the old
    // keys stay inert.
    let k2 = e.schedule_at(3, 'c');
    assert_eq!(k2.slot, 1);
    assert!(!e.cancel(k1));
    assert!(!e.cancel(k0));
    assert!(!e.is_pending(k1));
    assert_eq!(e.pop(), Some((3, 'c')));
    // A stale entry in a retired slot is skipped.
    e.gens[1] = u32::MAX - 1;
    let k3 = e.schedule_at(5, 'd');
    e.schedule_at(6, 'e');
    assert!(e.cancel(k3));
    assert_eq!(e.peek_time(), Some(6));
    assert_eq!(e.pop(), Some((6, 'e')));
    assert_eq!(e.pop(), None);
}

/// Long randomised run against an ordered-map model, in phases that grow
/// the queue, cancel heavily (forcing compactions) and drain, with delays
/// spanning every radix level.
#[test]
fn long_run_matches_ordered_map_model() {
    use std::collections::BTreeMap;
    let mut rng = 0x1234_5678_9abc_def0_u64;
    let mut next = move || {
        // SplitMix64
        rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut e: Engine<u64> = Engine::new();
    let mut model: BTreeMap<(Time, u64), u64> = BTreeMap::new();
    let mut now: Time = 0;
    let mut keys: Vec<(EventKey, Time, u64)> = Vec::new();
    let mut seq = 0u64;
    let mut max_entries = 0usize;
    for phase in 0..12u64 {
        // (schedule, cancel, pop) weights out of 100
        let (ws, wc) = match phase % 4 {
            0 => (70, 5),
            1 => (40, 45),
            2 => (30, 10),
            _ => (5, 5),
        };
        for _ in 0..20_000 {
            let r = next() % 100;
            if r < ws {
                let d = match next() % 10 {
                    0..=4 => next() % 50,
                    5..=7 => next() % 1_000_000,
                    8 => next() % (1 << 45),
                    _ => next(),
                };
                let at = now.saturating_add(d);
                let k = e.schedule_at(at, seq);
                model.insert((at, seq), seq);
                keys.push((k, at, seq));
                seq += 1;
            } else if r < ws + wc {
                if !keys.is_empty() {
                    let i = (next() % keys.len() as u64) as usize;
                    let (k, at, s) = keys.swap_remove(i);
                    assert_eq!(e.cancel(k), model.remove(&(at, s)).is_some());
                }
            } else {
                let want = model.pop_first().map(|((t, _), v)| (t, v));
                assert_eq!(e.pop(), want);
                if let Some((t, _)) = want {
                    now = t;
                }
            }
            assert_eq!(e.len(), model.len());
            max_entries = max_entries.max(e.heap_entries());
            assert!(e.heap_entries() <= 2 * e.len() + COMPACT_MIN_STALE);
        }
        assert_eq!(e.peek_time(), model.keys().next().map(|k| k.0));
        assert_eq!(e.now(), now);
    }
    while let Some(((t, _), v)) = model.pop_first() {
        assert_eq!(e.pop(), Some((t, v)));
    }
    assert_eq!(e.pop(), None);
    assert!(max_entries > 0);
}

#[test]
fn debug_shows_time_pending_and_popped() {
    let _watch = watch("debug_shows_time_pending_and_popped");
    let mut e = Engine::new();
    e.schedule_at(5, 'a');
    e.schedule_at(9, 'b');
    e.schedule_at(12, 'c');
    assert_eq!(e.pop(), Some((5, 'a')));
    assert_eq!(
        format!("{e:?}"),
        "Engine { now: 5, pending: 2, popped: 1, .. }"
    );
}

/// `heap_entries` (the count that decides compaction) is exact on every
/// path: a level-0 pop, a lone entry delivered from a high level, a
/// refill, and a cancel (its entry stays until reached).
#[test]
fn stored_entries_are_counted_exactly() {
    let _watch = watch("stored_entries_are_counted_exactly");
    let mut e = Engine::new();
    for (t, v) in COUNTED {
        e.schedule_at(t, v);
    }
    count_through_every_path(&mut e);
    assert!(!e.radix, "five events stay in the small list");
}

/// The events of the counting tests: a tie at level 0, one alone in its
/// level-2 bucket, two in one level-2 bucket (a refill).
const COUNTED: [(Time, i32); 5] = [(3, 0), (3, 1), (70_000, 2), (5_000_000, 3), (5_000_001, 4)];

/// Pop the [`COUNTED`] events from `e`, with a cancel on the way,
/// checking the stored entries after every step; `e.radix` must not
/// change on the way.
fn count_through_every_path(e: &mut Engine<i32>) {
    let radix = e.radix;
    assert_eq!(e.heap_entries(), 5);
    assert_eq!(e.pop(), Some((3, 0)));
    assert_eq!(e.heap_entries(), 4);
    assert_eq!(e.pop(), Some((3, 1)));
    assert_eq!(e.heap_entries(), 3);
    assert_eq!(e.pop(), Some((70_000, 2))); // the lone-entry path
    assert_eq!(e.heap_entries(), 2);
    let k = e.schedule_at(6_000_000, 5);
    assert_eq!(e.radix, radix, "entries stored: the queue stays as it is");
    assert_eq!(e.heap_entries(), 3);
    assert!(e.cancel(k));
    assert_eq!((e.heap_entries(), e.len()), (3, 2));
    assert_eq!(e.pop(), Some((5_000_000, 3))); // refills, then level 0
    assert_eq!(e.heap_entries(), 2);
    assert_eq!(e.pop(), Some((5_000_001, 4)));
    assert_eq!(e.heap_entries(), 1); // the stale entry, not yet reached
    assert_eq!(e.pop(), None);
}

/// Stale entries are compacted away exactly when they outnumber the live
/// ones and number at least `COMPACT_MIN_STALE`.
#[test]
fn compaction_runs_exactly_at_its_threshold() {
    let _watch = watch("compaction_runs_exactly_at_its_threshold");
    let n = COMPACT_MIN_STALE as u64;
    // Stale outnumber live but are too few: kept.
    let mut e = Engine::new();
    let keys: Vec<_> = (0..n - 1 + 1000)
        .map(|i| e.schedule_at(100 + i, i))
        .collect();
    for k in &keys[..COMPACT_MIN_STALE - 1] {
        assert!(e.cancel(*k));
    }
    assert_eq!((e.heap_entries(), e.len()), (n as usize - 1 + 1000, 1000));
    assert!(e.cancel(keys[COMPACT_MIN_STALE - 1])); // the 1024th stale
    assert_eq!((e.heap_entries(), e.len()), (999, 999));
    let got: Vec<u64> = drain(&mut e).into_iter().map(|(_, v)| v).collect();
    assert_eq!(got, (n..n - 1 + 1000).collect::<Vec<_>>());

    // Enough stale entries, but no more than live ones: kept.
    let mut e = Engine::new();
    let keys: Vec<_> = (0..2 * n).map(|i| e.schedule_at(100 + i, i)).collect();
    for k in keys.iter().skip(1).step_by(2) {
        assert!(e.cancel(*k));
    }
    assert_eq!((e.heap_entries(), e.len()), (2 * n as usize, n as usize));
    assert!(e.cancel(keys[0])); // now one more stale than live
    assert_eq!(
        (e.heap_entries(), e.len()),
        (n as usize - 1, n as usize - 1)
    );
    let got: Vec<u64> = drain(&mut e).into_iter().map(|(_, v)| v).collect();
    assert_eq!(got, (2..2 * n).step_by(2).collect::<Vec<_>>());
}

/// `peek_time` walks past buckets, and whole words of the bitmap, that
/// hold only cancelled entries, in level 0 and above.
#[test]
fn peek_skips_buckets_and_words_of_cancelled_entries() {
    let _watch = watch("peek_skips_buckets_and_words_of_cancelled_entries");
    let mut e = Engine::new();
    let a = e.schedule_at(1, 'a'); // level 0, word 0
    let b = e.schedule_at(2, 'b'); // level 0, word 0
    let c = e.schedule_at(100, 'c'); // level 0, word 1
    e.schedule_at(200, 'd'); // level 0, word 3
    let far = e.schedule_at(1 << 20, 'x'); // level 2
    e.schedule_at(3 << 20, 'y'); // level 2, a later bucket
    assert!(e.cancel(a) && e.cancel(b));
    assert_eq!(e.peek_time(), Some(100));
    assert!(e.cancel(c));
    assert_eq!(e.peek_time(), Some(200));
    assert_eq!(e.pop(), Some((200, 'd')));
    assert!(e.cancel(far));
    assert_eq!(e.peek_time(), Some(3 << 20));
    assert_eq!(drain(&mut e), vec![(3 << 20, 'y')]);
}

#[test]
fn hint_names_the_coming_events_where_cheap() {
    let _watch = watch("hint_names_the_coming_events_where_cheap");
    let mut e = Engine::new();
    assert_eq!(e.hint(0), None);
    e.post_at(5, 'b');
    e.post_at(3, 'a');
    e.post_at(9, 'c');
    // Small list: in pop order.
    assert_eq!(
        (e.hint(0), e.hint(1), e.hint(2), e.hint(3)),
        (Some(&'a'), Some(&'b'), Some(&'c'), None)
    );
    assert_eq!(e.hint(usize::MAX), None, "no overflow");
    // Radix queue: the entries of the 1 µs buckets of the current window,
    // in order, across buckets.
    let mut e = Engine::new();
    for i in 0..(SMALL_MAX as u32 + 4) {
        e.post_at(100, i);
    }
    e.post_at(101, 1000);
    e.post_at(1_000_000, u32::MAX);
    for i in 0..(SMALL_MAX as u32 + 1) {
        e.post_at(2_000_000, 2000 + i);
    }
    assert!(e.radix);
    assert_eq!(e.pop(), Some((100, 0)));
    assert_eq!((e.hint(0), e.hint(2)), (Some(&1), Some(&3)));
    let rest = SMALL_MAX + 3; // the entries at 100 left
    assert_eq!(e.hint(rest - 1), Some(&(SMALL_MAX as u32 + 3)));
    assert_eq!(e.hint(rest), Some(&1000), "the next bucket's front");
    // Past every entry of level 0: the front of the first bucket above
    // it (not a level-0 bucket again).
    assert_eq!(e.hint(rest + 1), Some(&u32::MAX), "beyond level 0");
    assert_eq!(e.hint(rest + 9), Some(&u32::MAX));
    while e.peek_time() != Some(1_000_000) {
        e.pop();
    }
    // The far event is alone above level 0: the bucket refilled next
    // holds it (a bucket of more than SMALL_MAX entries gives no hint).
    assert_eq!(e.hint(0), Some(&u32::MAX));
    assert_eq!(e.hint(5), Some(&u32::MAX));
    assert_eq!(e.pop(), Some((1_000_000, u32::MAX)));
    assert_eq!(e.hint(0), None, "more than SMALL_MAX entries at 2 s");
    assert_eq!(e.pop(), Some((2_000_000, 2000)));
    assert_eq!(e.hint(0), Some(&2001));
    while e.pop().is_some() {}
    assert_eq!(e.hint(0), None);
    // A bucket of exactly SMALL_MAX entries above level 0 still gives one.
    let mut e = Engine::new();
    for i in 0..(SMALL_MAX as u32 + 1) {
        e.post_at(100, i);
    }
    for i in 0..SMALL_MAX as u32 {
        e.post_at(3_000_000, 3000 + i);
    }
    assert!(e.radix);
    for _ in 0..=SMALL_MAX {
        e.pop();
    }
    assert_eq!(e.hint(0), Some(&3000));
    assert_eq!(e.pop(), Some((3_000_000, 3000)));
}

/// An engine in radix mode holding `events` (scheduled in this order), as
/// after the small list overflowed: the radix queue's paths with a handful
/// of events. It stays in radix mode while it stores any entry.
fn radix_engine<E>(events: impl IntoIterator<Item = (Time, E)>) -> (Engine<E>, Vec<EventKey>) {
    let mut e = Engine::new();
    let keys = events
        .into_iter()
        .map(|(t, v)| e.schedule_at(t, v))
        .collect();
    e.hand_over_to_radix();
    assert!(e.radix);
    (e, keys)
}

/// [`stored_entries_are_counted_exactly`] in the radix queue: a level-0
/// pop, a lone entry delivered from a high level, two refills, a cancel
/// (its entry stays until reached), and the hand-back to the small list
/// once the last entry, a stale one, is reached.
#[test]
fn radix_stored_entries_are_counted_exactly() {
    let _watch = watch("radix_stored_entries_are_counted_exactly");
    let (mut e, _) = radix_engine(COUNTED);
    count_through_every_path(&mut e);
    assert!(e.radix, "the stale entry keeps the radix queue");
    // The stale entry is reached (and dropped) on the way to the next one.
    e.schedule_at(7_000_000, 6);
    assert!(e.radix);
    assert_eq!(e.heap_entries(), 2);
    assert_eq!(e.pop(), Some((7_000_000, 6)));
    assert_eq!(e.heap_entries(), 0);
    e.schedule_at(7_000_000, 7);
    assert!(
        !e.radix,
        "an empty radix queue hands back to the small list"
    );
    assert_eq!(e.heap_entries(), 1);
    assert_eq!(drain(&mut e), [(7_000_000, 7)]);
}

/// [`peek_skips_buckets_and_words_of_cancelled_entries`] in the radix
/// queue (base 0): level-0 buckets and whole words of the bitmap holding
/// only cancelled entries, then a high-level word of them.
#[test]
fn radix_peek_skips_buckets_and_words_of_cancelled_entries() {
    let _watch = watch("radix_peek_skips_buckets_and_words_of_cancelled_entries");
    let (mut e, k) = radix_engine([
        (1, 'a'),       // bucket 1, word 0
        (2, 'b'),       // bucket 2, word 0
        (100, 'c'),     // bucket 100, word 1
        (200, 'd'),     // bucket 200, word 3
        (1 << 20, 'x'), // level 2: bucket 528, word 8
        (3 << 20, 'y'), // level 2: bucket 560, word 8
        (1 << 28, 'z'), // level 3: bucket 784, word 12
    ]);
    assert_eq!(e.peek_time(), Some(1));
    assert!(e.cancel(k[0]) && e.cancel(k[1]));
    assert_eq!(e.peek_time(), Some(100));
    assert!(e.cancel(k[2]));
    assert_eq!(e.peek_time(), Some(200));
    assert_eq!(e.pop(), Some((200, 'd')));
    assert!(e.cancel(k[4]));
    assert_eq!(e.peek_time(), Some(3 << 20)); // the next bucket of word 8
    assert!(e.cancel(k[5]));
    assert_eq!(e.peek_time(), Some(1 << 28)); // the next word
    assert_eq!(drain(&mut e), [(1 << 28, 'z')]);
    assert_eq!(e.peek_time(), None);
}

/// In a bucket above level 0 the entries are in scheduling order, not in
/// time order: `peek_time` reports the earliest live one.
#[test]
fn radix_peek_finds_the_earliest_entry_of_a_high_bucket() {
    let _watch = watch("radix_peek_finds_the_earliest_entry_of_a_high_bucket");
    let (mut e, k) = radix_engine([(5_000_900, 'a'), (5_000_300, 'b'), (5_000_600, 'c')]);
    assert_eq!(e.peek_time(), Some(5_000_300));
    assert!(e.cancel(k[1]));
    assert_eq!(e.peek_time(), Some(5_000_600));
    assert_eq!(drain(&mut e), [(5_000_600, 'c'), (5_000_900, 'a')]);
}

/// A bucket emptied by compaction keeps its room, counted as kept (the
/// count `bucket_capacity` checks).
#[test]
fn compaction_counts_the_room_of_the_buckets_it_empties() {
    let _watch = watch("compaction_counts_the_room_of_the_buckets_it_empties");
    let (mut e, _) = radix_engine([(1 << 30, u32::MAX)]);
    // One level-2 bucket of COMPACT_MIN_STALE entries, all cancelled: the
    // last cancel compacts, and empties the bucket.
    let keys: Vec<_> = (0..COMPACT_MIN_STALE as u32)
        .map(|i| e.schedule_at(1 << 20, i))
        .collect();
    let b = locate(0, 1 << 20);
    assert!(b >= SLOTS && e.buckets[b].len() == COMPACT_MIN_STALE);
    let room = e.buckets[b].capacity() - KEEP_CAPACITY;
    for k in keys {
        assert!(e.cancel(k));
    }
    assert_eq!((e.heap_entries(), e.len()), (1, 1), "compacted");
    assert!(e.buckets[b].is_empty());
    assert_eq!(e.spare, room, "its room is kept, within the budget");
    e.bucket_capacity(); // and counted: every empty bucket's room
    assert_eq!(drain(&mut e), [(1 << 30, u32::MAX)]);
}

/// Emptied buckets keep their room up to exactly twice the most events
/// ever pending (beyond `SPARE_MIN`): a queue that held 16 000 events
/// keeps room for twice that.
#[test]
fn emptied_buckets_keep_room_up_to_twice_the_peak() {
    let _watch = watch("emptied_buckets_keep_room_up_to_twice_the_peak");
    // A few events far away, each alone in its bucket (no room kept).
    let far = |i: u64| (i + 2) << 24;
    let (mut e, _) = radix_engine((0..8).map(|i| (far(i), u64::MAX)));
    // Many events at one instant, in a level-2 bucket; a refill moves them
    // into one level-0 bucket, which grows to the same room.
    let n = 16_000;
    for i in 0..n {
        e.schedule_at(1 << 20, i);
    }
    let b = locate(0, 1 << 20);
    let room = e.buckets[b].capacity() - KEEP_CAPACITY;
    assert!(room >= n as usize && 2 * room > SPARE_MIN);
    // Bring the peak of pending events to exactly `room`: the two buckets'
    // room, `2 * room`, is then exactly the budget.
    for i in 8..(room - n as usize) as u64 {
        e.schedule_at(far(i), u64::MAX);
    }
    assert_eq!(e.len(), room);
    for i in 0..n {
        assert_eq!(e.pop(), Some((1 << 20, i)));
    }
    assert_eq!(e.peak, room);
    assert_eq!(
        e.spare,
        SPARE_PER_PENDING * room,
        "both emptied buckets keep their room: within the budget, not over it"
    );
    e.bucket_capacity(); // checks the count
    assert!(drain(&mut e).iter().all(|&(_, v)| v == u64::MAX));
}

/// `pop_due_by` in the radix queue pops what is due exactly at the limit,
/// whether it sits alone in a bucket above level 0 (delivered without a
/// refill) or with others (the bucket refilled first), and whether the
/// bucket starts at the limit or before it; and pops nothing due after.
#[test]
fn pop_due_by_pops_what_is_due_exactly_at_the_limit_from_every_level() {
    let _watch = watch("pop_due_by_pops_what_is_due_exactly_at_the_limit_from_every_level");
    // 256 and 65 536 start a bucket of level 1 and 2; 1000 and 70 000 lie
    // inside one.
    for t in [256u64, 1000, 65_536, 70_000, 1 << 24, (1 << 24) + 5] {
        for others in [0u64, 1, 3] {
            let mut events = vec![(t, 0u32)];
            // Others in the same bucket, due after `t`.
            events.extend((1..=others).map(|k| (t + k, k as u32)));
            let (mut e, _) = radix_engine(events);
            assert_eq!(e.pop_due_by(t - 1), None, "t = {t}, {others} others");
            assert_eq!(e.now(), t - 1);
            assert_eq!(e.pop_due_by(t), Some((t, 0)), "t = {t}, {others} others");
            assert_eq!(e.pop_due_by(t), None);
            assert_eq!(e.now(), t);
            for k in 1..=others {
                assert_eq!(e.pop(), Some((t + k, k as u32)));
            }
            assert_eq!(e.pop(), None);
        }
    }
}
