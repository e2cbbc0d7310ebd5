//! `serve`: a live WebSocket chat server that speaks the chat subset of the
//! public agentchat protocol and makes every arbitration decision with
//! [`crate::floor::Server`] (docs/serve.md).
//!
//! This is live code, outside the simulator: its clock is the monotonic
//! milliseconds since the server started, and nothing here is
//! deterministic. The layout keeps the adaptation to the floor thin:
//!
//! - [`identity`]: agentchat names, Ed25519 keys, the challenge;
//! - `conn`: one task per connection: TLS (with `tls`), the WebSocket, the frame-size and
//!   rate limits, IDENTIFY / VERIFY_IDENTITY / PING, which it answers
//!   itself; every other frame goes to the hub;
//! - `hub`: the one task that owns the `floor::Server`: it stamps each
//!   input with the server time, writes it to the `--log` and hands it to
//!   the floor, both through [`crate::replay::events`] (the line format
//!   and the code path `herdsim arbitrate` replays), routes the floor's
//!   sends, and runs the floor's timers when
//!   [`crate::floor::Server::poll_timeout`] says.
//!
//! Use: [`bind`] a listener (port 0 for an ephemeral one), read
//! [`Bound::local_addr`], then [`Bound::run`] until a shutdown future
//! resolves.

pub mod identity;

mod budget;
mod command;
mod conn;
mod foreground;
mod hub;

pub use command::{Command, default_claim_guard};
pub use foreground::run_foreground;

use std::collections::BTreeMap;
use std::fs::File;
use std::future::Future;
use std::io::{self, BufWriter};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::floor;

/// The address `herdsim serve` listens on by default (agentchat's port, on
/// loopback only).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:6667";

/// Limits: every resource a client can make the server hold is bounded in
/// bytes and in time (docs/serve.md, "Limits and what a hostile client can
/// do"). Each has a flag of `herdsim serve`; the defaults are the flags'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest WebSocket message (and frame) a client may send, in bytes.
    /// A larger one gets `ERROR FRAME_TOO_LARGE` and the connection is
    /// closed (close code 1009). Default 1 MiB.
    pub max_frame_bytes: usize,
    /// Open connections at most. When they are all open, a new connection
    /// closes the oldest one that has not identified yet to take its
    /// place; if every one has identified, the new one is closed at once,
    /// before the WebSocket handshake. Default 1024.
    pub max_connections: usize,
    /// Frames a connection may send per second, sustained (a token bucket
    /// of `burst` tokens refilled at this rate); a text or binary frame
    /// over the limit gets `ERROR RATE_LIMITED` and is dropped, the
    /// connection lives on; a ping or pong over it is not read until a
    /// token is back (its pong waits). 0 turns the limit off. Default 100.
    pub rate_per_sec: u32,
    /// The bucket size of the rate limit. Default 200.
    pub burst: u32,
    /// Bytes a connection may send per second, sustained (frames of every
    /// kind, counted by payload): a token bucket of `byte_burst` bytes.
    /// Over it, the connection is not read until the bucket is back above
    /// zero, so TCP slows the client down; nothing is dropped. 0 turns the
    /// limit off. Default 1 MiB/s.
    pub byte_rate: u64,
    /// The bucket size of the byte-rate limit, in bytes; at least
    /// `max_frame_bytes`. Default 2 MiB.
    pub byte_burst: u64,
    /// Messages queued for a connection that does not read; one more and
    /// the connection is dropped as too slow. Default 4096.
    pub send_queue: usize,
    /// Bytes queued for one connection (messages not yet written to its
    /// socket); one more message over it and the connection is dropped as
    /// too slow. At least `max_frame_bytes` + 64 KiB. Default 4 MiB.
    pub max_queued_bytes: usize,
    /// Time one write to a client may take (a client that does not read
    /// stalls writes once the socket buffers are full); past it the
    /// connection is dropped. Default 10 s.
    pub write_timeout: Duration,
    /// Time from accepting a connection to its WELCOME (IDENTIFY, and the
    /// CHALLENGE answered for a keyed identity); past it the connection is
    /// closed. Default 60 s.
    pub identify_timeout: Duration,
    /// Time an identified connection may send nothing at all (no frame,
    /// ping or pong); halfway the server pings it (a live client's
    /// WebSocket answers), at the end it is closed. Default 10 min.
    pub idle_timeout: Duration,
    /// Longest channel name (`channel`, or a `#` target in `to`), in bytes,
    /// under every policy. Default 32 (agentchat's: `#` and 31).
    pub max_channel_bytes: usize,
    /// Longest message id (`msg_id`, `id`, `in_reply_to`) and `@` target,
    /// in bytes. Default 128.
    pub max_id_bytes: usize,
    /// Channels one connection may be a member of at once. Default 256.
    pub max_channels_per_conn: usize,
    /// Live claims one connection may hold at once. Default 256.
    pub max_claims_per_conn: usize,
    /// Channels that may exist at once (under `agentchat-0.36` a joined
    /// channel exists for ever). Default 10 000.
    pub max_channels: usize,
    /// The whole server's ceiling on the memory clients make it hold:
    /// messages queued for sending (a payload shared by many recipients
    /// counted once) and received frames waiting for the hub (their parsed
    /// size). Over it, the connection holding the most is dropped, then
    /// the next, until under. Default 512 MiB.
    pub max_memory_bytes: usize,
    /// Largest `--log` file; the input that would make it larger is not
    /// written and logging stops there (stderr says so at once and
    /// `herdsim serve` exits 1 at the end). Default 1 GiB.
    pub log_max_bytes: u64,
    /// Under `agentchat-0.36`: close a connection that sends more than 60
    /// text or binary frames in 10 s (10 before it identifies) with close
    /// code 1008, as agentchat 0.36.19 does; its claims are released like
    /// on any disconnect. Default true; `herdsim live` turns it off (its
    /// agents' frame rate scales with its speed).
    pub agentchat_flood_close: bool,
}

/// Room for the envelope of a relayed message beyond its client frame.
pub const ENVELOPE_BYTES: usize = 64 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 1 << 20,
            max_connections: 1024,
            rate_per_sec: 100,
            burst: 200,
            byte_rate: 1 << 20,
            byte_burst: 2 << 20,
            send_queue: 4096,
            max_queued_bytes: 4 << 20,
            write_timeout: Duration::from_secs(10),
            identify_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(600),
            max_channel_bytes: 32,
            max_id_bytes: 128,
            max_channels_per_conn: 256,
            max_claims_per_conn: 256,
            max_channels: 10_000,
            max_memory_bytes: 512 << 20,
            log_max_bytes: 1 << 30,
            agentchat_flood_close: true,
        }
    }
}

impl Limits {
    /// Check that the limits fit together; the error names the flag.
    pub fn check(&self) -> Result<(), String> {
        let frame = self.max_frame_bytes;
        if self.max_queued_bytes < frame.saturating_add(ENVELOPE_BYTES) {
            return Err(format!(
                "--max-queued-bytes {} must be at least --max-frame-bytes + 65536 = {} (one relayed frame must fit)",
                self.max_queued_bytes,
                frame.saturating_add(ENVELOPE_BYTES)
            ));
        }
        if self.byte_rate > 0 && self.byte_burst < frame as u64 {
            return Err(format!(
                "--byte-burst {} must be at least --max-frame-bytes {frame} (a largest frame must pass)",
                self.byte_burst
            ));
        }
        for (flag, d) in [
            ("--write-timeout-ms", self.write_timeout),
            ("--identify-timeout-ms", self.identify_timeout),
            ("--idle-timeout-ms", self.idle_timeout),
        ] {
            if d.is_zero() {
                return Err(format!("{flag} must be positive"));
            }
        }
        if self.max_memory_bytes < frame.saturating_add(ENVELOPE_BYTES) {
            return Err(format!(
                "--max-memory-mb ({} bytes) must be at least --max-frame-bytes + 65536 = {} (one relayed frame must fit)",
                self.max_memory_bytes,
                frame.saturating_add(ENVELOPE_BYTES)
            ));
        }
        Ok(())
    }
}

/// Everything `serve` needs.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    /// Policy, TTL, tracking on/off, claim guard: the floor's
    /// configuration. A [`floor::ClaimGuard::Clock`] gets the server's Unix
    /// clock at start as its `epoch_ms` (server time 0), whatever is given.
    pub floor: floor::Config,
    pub limits: Limits,
    /// Write every input the floor handled to this file (arbitrate format).
    pub log: Option<PathBuf>,
    /// The IDENTIFY name that makes a connection the operator (whose claim
    /// takes the floor, and who is never yielded). Default `operator`.
    pub operator_name: String,
    /// The `server` field of WELCOME. Default `herdsim`.
    pub server_name: String,
    /// Serve `wss://`: every connection starts with a TLS handshake with
    /// this configuration (see [`crate::tls::server_config`]). Default
    /// None: plain `ws://`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            listen: SocketAddr::from(([127, 0, 0, 1], 6667)),
            floor: floor::Config::default(),
            limits: Limits::default(),
            log: None,
            operator_name: "operator".into(),
            server_name: "herdsim".into(),
            tls: None,
        }
    }
}

/// Why the server could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The `--log` file could not be created.
    #[error("--log {path}: {source}")]
    Log { path: PathBuf, source: io::Error },
    /// Writing the `--log` file failed while running (logging stopped there).
    #[error("--log {path}: write failed: {source}")]
    LogWrite { path: PathBuf, source: io::Error },
    /// The limits do not fit together (the message names the flag).
    #[error("{0}")]
    Limits(String),
    /// `--log` reached `Limits::log_max_bytes`; the inputs after `at_ms`
    /// are not in it.
    #[error(
        "--log {path}: stopped at its limit of {limit} bytes (--log-max-bytes) at server time {at_ms} ms; inputs after that are not in it"
    )]
    LogFull {
        path: PathBuf,
        limit: u64,
        at_ms: u64,
    },
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    /// A task of the server failed.
    #[error("internal error: {0}")]
    Internal(String),
}

/// What a finished run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The floor's counters at the end.
    pub stats: floor::Stats,
    /// Inputs handed to the floor (= lines written to `--log`).
    pub inputs: u64,
    /// WebSocket connections accepted (handshake done or not).
    pub connections: u64,
    /// Connections closed at once because `max_connections` were open
    /// and all had identified.
    pub refused: u64,
    /// Connections that had not identified, closed to admit a new one.
    pub evicted: u64,
    /// Connections dropped because they did not read (queue full).
    pub slow: u64,
    /// Connections dropped by the whole-server memory ceiling.
    pub shed: u64,
    /// Client frames refused by the per-connection bounds on channels and
    /// claims or by the claim guard, before the floor (not logged).
    pub refused_inputs: u64,
}

/// State shared by the accept loop and the connection tasks (read only).
#[derive(Debug)]
pub(crate) struct Shared {
    pub limits: Limits,
    pub operator_name: String,
    pub server_name: String,
    pub policy_name: &'static str,
    /// `agentchat-0.36`: close a connection over agentchat 0.36.19's flood
    /// limit (60 frames in 10 s, 10 before identifying) with 1008.
    pub flood_close: bool,
    /// Time zero of the server clock.
    pub start: Instant,
    /// TLS in front of the WebSocket handshake (`wss://`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// What clients make the server hold (see [`budget`]).
    pub meter: Arc<budget::Meter>,
    /// Connections that have not identified yet, oldest first: the
    /// candidates for eviction when the server is full.
    pub waiting: Mutex<BTreeMap<hub::ConnId, Arc<conn::Admission>>>,
}

impl Shared {
    /// `conn` identified or ended: no longer a candidate for eviction.
    pub fn unregister(&self, conn: hub::ConnId) {
        if let Ok(mut w) = self.waiting.lock() {
            w.remove(&conn);
        }
    }

    /// Close the oldest connection that has not identified and free its
    /// place; `false` when there is none.
    fn evict_oldest(&self) -> bool {
        let oldest = match self.waiting.lock() {
            Ok(mut w) => w.pop_first(),
            Err(_) => None,
        };
        match oldest {
            Some((_, a)) => {
                a.evict();
                true
            }
            None => false,
        }
    }
}

/// A bound, not yet running server.
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    addr: SocketAddr,
    opts: Options,
    log: Option<BufWriter<File>>,
}

/// Open the `--log` file (if any) and bind the listener. Port 0 binds an
/// ephemeral port: see [`Bound::local_addr`].
pub async fn bind(opts: Options) -> Result<Bound, ServeError> {
    opts.limits.check().map_err(ServeError::Limits)?;
    let log = match &opts.log {
        // A regular file, or a stream written through; never a FIFO nobody
        // reads (it would block here) nor a link or a device (files.rs).
        Some(path) => Some(BufWriter::new(
            crate::files::create_in_place(path).map_err(|source| ServeError::Log {
                path: path.clone(),
                source,
            })?,
        )),
        None => None,
    };
    let listener = TcpListener::bind(opts.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: opts.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: opts.listen,
        source,
    })?;
    Ok(Bound {
        listener,
        addr,
        opts,
        log,
    })
}

impl Bound {
    /// The address actually bound (the ephemeral port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve until `shutdown` resolves, then close every connection (close
    /// code 1001), let the hub handle what is left, flush the log and
    /// return. Must run inside a tokio runtime with the time and I/O
    /// drivers enabled.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<Report, ServeError> {
        let Bound {
            listener,
            addr: _,
            opts,
            log,
        } = self;
        let shared = Arc::new(Shared {
            limits: opts.limits.clone(),
            operator_name: opts.operator_name.clone(),
            server_name: opts.server_name.clone(),
            policy_name: opts.floor.policy.name(),
            flood_close: opts.floor.policy == floor::PolicyKind::Agentchat036
                && opts.limits.agentchat_flood_close,
            start: Instant::now(),
            tls: opts.tls.clone(),
            meter: Arc::new(budget::Meter::default()),
            waiting: Mutex::new(BTreeMap::new()),
        });
        let (events_tx, events_rx) = mpsc::channel::<hub::Event>(1024);
        let mut floor_cfg = opts.floor.clone();
        // The flood limit counts the socket's frames here (conn), not the
        // floor's inputs.
        floor_cfg.frame_limit = false;
        if let floor::ClaimGuard::Clock { epoch_ms, .. } = &mut floor_cfg.claim_guard {
            // Server time 0 on the clients' (Unix) clock.
            *epoch_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        }
        let hub = hub::Hub::new(floor::Server::new(floor_cfg), shared.clone(), log);
        let hub_task = tokio::spawn(hub.run(events_rx));
        let (stop_tx, stop_rx) = watch::channel(false);
        let permits = Arc::new(Semaphore::new(opts.limits.max_connections));
        let mut connections = 0u64;
        let mut refused = 0u64;
        let mut evicted = 0u64;
        let mut next_conn: u64 = 0;
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => {
                    let (stream, _peer) = match accepted {
                        Ok(a) => a,
                        Err(_) => {
                            // Out of descriptors or a connection reset before
                            // accept: wait a little rather than spin.
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                            continue;
                        }
                    };
                    // Full: the oldest connection that has not
                    // identified makes room, if there is one.
                    let mut permit = permits.clone().try_acquire_owned();
                    if permit.is_err() && shared.evict_oldest() {
                        evicted += 1;
                        permit = permits.clone().try_acquire_owned();
                    }
                    let Ok(permit) = permit else {
                        refused += 1;
                        drop(stream);
                        continue;
                    };
                    connections += 1;
                    next_conn += 1;
                    let _ = stream.set_nodelay(true);
                    let admission = conn::Admission::new(permit);
                    if let Ok(mut w) = shared.waiting.lock() {
                        w.insert(next_conn, Arc::clone(&admission));
                    }
                    tokio::spawn(conn::run(
                        stream,
                        next_conn,
                        shared.clone(),
                        events_tx.clone(),
                        stop_rx.clone(),
                        admission,
                    ));
                }
            }
        }
        drop(listener);
        let _ = stop_tx.send(true);
        // The hub ends when every connection task has ended (each holds a
        // sender); they end promptly once told to stop.
        drop(events_tx);
        let outcome = hub_task
            .await
            .map_err(|e| ServeError::Internal(format!("hub task: {e}")))?;
        let report = Report {
            stats: outcome.stats,
            inputs: outcome.inputs,
            connections,
            refused,
            evicted,
            slow: outcome.slow,
            shed: outcome.shed,
            refused_inputs: outcome.refused_inputs,
        };
        match (outcome.log_stop, opts.log) {
            (Some(hub::LogStop::Error(source)), Some(path)) => {
                Err(ServeError::LogWrite { path, source })
            }
            (Some(hub::LogStop::Full { at_ms }), Some(path)) => Err(ServeError::LogFull {
                path,
                limit: opts.limits.log_max_bytes,
                at_ms,
            }),
            _ => Ok(report),
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or, on Unix, SIGTERM. A signal that cannot
/// be listened to never resolves (rather than stopping the server at once).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    () = ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => ctrl_c().await,
        }
    }
    #[cfg(not(unix))]
    ctrl_c().await;
}

async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}
