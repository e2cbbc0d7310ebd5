//! Memory accounting: what clients make the server hold, per connection
//! and for the whole server, so that a connection that holds too much can
//! be dropped before the process runs out of memory.
//!
//! Two meters count the same bytes from two sides:
//! - the server's [`Meter`]: every outgoing payload once (a relay to N
//!   members shares one payload) plus every received frame not yet
//!   handled by the hub (its parsed size). The whole-server ceiling
//!   (`Limits::max_memory_bytes`) is checked against it.
//! - a connection's [`Usage`]: the payloads queued for it, each in full
//!   (its share), plus its own received frames in flight. The per-connection
//!   queue bound (`Limits::max_queued_bytes`) is checked against the queued
//!   part; the ceiling drops the connection whose usage is largest.
//!
//! Each count is released by a guard's `Drop` (a [`Payload`], a [`Queued`]
//! item, an [`Inbound`] frame), so nothing is forgotten on any path.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::Value;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// The server's count of bytes held for clients.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    bytes: AtomicUsize,
}

impl Meter {
    pub fn get(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn add(&self, n: usize) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    fn sub(&self, n: usize) {
        self.bytes.fetch_sub(n, Ordering::Relaxed);
    }
}

/// One identified connection's count, and the hub's way to drop it.
#[derive(Debug, Default)]
pub(crate) struct Usage {
    /// Bytes queued for sending (each message in full).
    queued: AtomicUsize,
    /// Bytes of received frames not yet handled by the hub.
    inbound: AtomicUsize,
    /// Set by the hub when it drops the connection.
    dropped: AtomicBool,
    /// Wakes the connection's task when `dropped` is set.
    kill: Notify,
}

impl Usage {
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Queued plus in-flight bytes: what shedding this connection frees
    /// at most.
    pub fn total(&self) -> usize {
        self.queued() + self.inbound.load(Ordering::Relaxed)
    }

    /// The hub dropped this connection: wake its task, which closes it
    /// at once (whatever is still queued is discarded).
    pub fn drop_connection(&self) {
        self.dropped.store(true, Ordering::Relaxed);
        self.kill.notify_one();
    }

    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Resolves once the hub dropped this connection.
    pub async fn killed(&self) {
        if self.is_dropped() {
            return;
        }
        self.kill.notified().await;
    }
}

/// One encoded outgoing message, shared by its recipients; counted in the
/// server's meter while it lives.
#[derive(Debug)]
pub(crate) struct Payload {
    pub text: Utf8Bytes,
    meter: Arc<Meter>,
}

impl Payload {
    pub fn new(text: String, meter: &Arc<Meter>) -> Arc<Payload> {
        let text = Utf8Bytes::from(text);
        meter.add(text.len());
        Arc::new(Payload {
            text,
            meter: Arc::clone(meter),
        })
    }

    pub fn len(&self) -> usize {
        self.text.len()
    }
}

impl Drop for Payload {
    fn drop(&mut self) {
        self.meter.sub(self.text.len());
    }
}

/// A payload in one connection's queue: counted in its usage until it is
/// written (or discarded).
#[derive(Debug)]
pub(crate) struct Queued {
    pub payload: Arc<Payload>,
    usage: Arc<Usage>,
}

impl Queued {
    pub fn new(payload: Arc<Payload>, usage: &Arc<Usage>) -> Queued {
        usage.queued.fetch_add(payload.len(), Ordering::Relaxed);
        Queued {
            payload,
            usage: Arc::clone(usage),
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.usage
            .queued
            .fetch_sub(self.payload.len(), Ordering::Relaxed);
    }
}

/// A received frame on its way to the hub: counted in the server's meter
/// and its connection's usage, and holding its share of the connection's
/// in-flight budget, until the hub has handled it.
#[derive(Debug)]
pub(crate) struct Inbound {
    bytes: usize,
    meter: Arc<Meter>,
    usage: Arc<Usage>,
    _permit: OwnedSemaphorePermit,
}

impl Inbound {
    pub fn new(
        bytes: usize,
        meter: &Arc<Meter>,
        usage: &Arc<Usage>,
        permit: OwnedSemaphorePermit,
    ) -> Inbound {
        meter.add(bytes);
        usage.inbound.fetch_add(bytes, Ordering::Relaxed);
        Inbound {
            bytes,
            meter: Arc::clone(meter),
            usage: Arc::clone(usage),
            _permit: permit,
        }
    }
}

impl Drop for Inbound {
    fn drop(&mut self) {
        self.meter.sub(self.bytes);
        self.usage.inbound.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// An estimate of the heap a parsed JSON value holds, in bytes: a node per
/// value, the strings' bytes, and a map entry's overhead. A 1 MiB frame of
/// `[0,0,...]` holds about 16 MiB this way, which is what is counted.
pub(crate) fn value_bytes(v: &Value) -> usize {
    const NODE: usize = std::mem::size_of::<Value>();
    // A BTreeMap entry: key String header plus node overhead, roughly.
    const ENTRY: usize = 48;
    NODE + match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(value_bytes).sum::<usize>(),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| ENTRY + k.len() + value_bytes(v))
            .sum::<usize>(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn guards_release_what_they_count() {
        let meter = Arc::new(Meter::default());
        let usage = Arc::new(Usage::default());
        let p = Payload::new("hello".into(), &meter);
        assert_eq!(meter.get(), 5);
        let q1 = Queued::new(Arc::clone(&p), &usage);
        let q2 = Queued::new(Arc::clone(&p), &usage);
        assert_eq!((meter.get(), usage.queued()), (5, 10));
        drop(p);
        drop(q1);
        assert_eq!((meter.get(), usage.queued()), (5, 5));
        drop(q2);
        assert_eq!((meter.get(), usage.queued()), (0, 0));
        let sem = Arc::new(tokio::sync::Semaphore::new(100));
        let permit = sem.clone().try_acquire_many_owned(40);
        assert!(permit.is_ok());
        if let Ok(permit) = permit {
            let i = Inbound::new(40, &meter, &usage, permit);
            assert_eq!(
                (meter.get(), usage.total(), sem.available_permits()),
                (40, 40, 60)
            );
            drop(i);
        }
        assert_eq!(
            (meter.get(), usage.total(), sem.available_permits()),
            (0, 0, 100)
        );
    }

    #[test]
    fn value_bytes_grows_with_the_nodes() {
        let small = value_bytes(&json!({"type": "MSG"}));
        let array = value_bytes(&Value::Array(vec![json!(0); 1000]));
        assert!(small > 32 && small < 200, "{small}");
        assert!(array >= 1000 * 32, "{array}");
    }
}
