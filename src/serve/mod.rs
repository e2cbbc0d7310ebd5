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
//!   input with the server time, writes it to the `--log`, hands it to the
//!   floor through [`events::apply`] (the code path `herdsim arbitrate`
//!   replays), routes the floor's sends, and runs the floor's timers when
//!   [`crate::floor::Server::poll_timeout`] says;
//! - [`events`]: the input line format shared with `herdsim arbitrate`.
//!
//! Use: [`bind`] a listener (port 0 for an ephemeral one), read
//! [`Bound::local_addr`], then [`Bound::run`] until a shutdown future
//! resolves.

pub mod events;
pub mod identity;

mod conn;
mod foreground;
mod hub;

pub use foreground::run_foreground;

use std::fs::File;
use std::future::Future;
use std::io::{self, BufWriter};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::floor;

/// The address `herdsim serve` listens on by default (agentchat's port, on
/// loopback only).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:6667";

/// Per-connection limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest WebSocket message (and frame) a client may send, in bytes.
    /// A larger one gets `ERROR FRAME_TOO_LARGE` and the connection is
    /// closed (close code 1009). Default 1 MiB.
    pub max_frame_bytes: usize,
    /// Open connections at most; one more is closed at once, before the
    /// WebSocket handshake. Default 1024.
    pub max_connections: usize,
    /// Frames a connection may send per second, sustained (a token bucket
    /// of `burst` tokens refilled at this rate); a frame over the limit gets
    /// `ERROR RATE_LIMITED` and is dropped, the connection lives on. 0
    /// turns the limit off. Default 100.
    pub rate_per_sec: u32,
    /// The bucket size of the rate limit. Default 200.
    pub burst: u32,
    /// Messages queued for a connection that does not read; one more and
    /// the connection is dropped as too slow. Default 4096.
    pub send_queue: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 1 << 20,
            max_connections: 1024,
            rate_per_sec: 100,
            burst: 200,
            send_queue: 4096,
        }
    }
}

/// Everything `serve` needs.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    /// Policy, TTL, tracking on/off: the floor's configuration.
    pub floor: floor::Config,
    pub limits: Limits,
    /// Write every input the floor handled to this file (arbitrate format).
    pub log: Option<PathBuf>,
    /// The IDENTIFY name that makes a connection the operator (who never
    /// claims and is never yielded). Default `operator`.
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
    /// Connections closed at once because `max_connections` were open.
    pub refused: u64,
}

/// State shared by the accept loop and the connection tasks (read only).
#[derive(Debug)]
pub(crate) struct Shared {
    pub limits: Limits,
    pub operator_name: String,
    pub server_name: String,
    pub policy_name: &'static str,
    /// Time zero of the server clock.
    pub start: Instant,
    /// TLS in front of the WebSocket handshake (`wss://`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
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
            start: Instant::now(),
            tls: opts.tls.clone(),
        });
        let (events_tx, events_rx) = mpsc::channel::<hub::Event>(1024);
        let hub = hub::Hub::new(floor::Server::new(opts.floor.clone()), shared.clone(), log);
        let hub_task = tokio::spawn(hub.run(events_rx));
        let (stop_tx, stop_rx) = watch::channel(false);
        let permits = Arc::new(Semaphore::new(opts.limits.max_connections));
        let mut connections = 0u64;
        let mut refused = 0u64;
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
                    let Ok(permit) = permits.clone().try_acquire_owned() else {
                        refused += 1;
                        drop(stream);
                        continue;
                    };
                    connections += 1;
                    next_conn += 1;
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(conn::run(
                        stream,
                        next_conn,
                        shared.clone(),
                        events_tx.clone(),
                        stop_rx.clone(),
                        permit,
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
        let mut report = Report {
            connections,
            refused,
            ..Report::default()
        };
        report.stats = outcome.stats;
        report.inputs = outcome.inputs;
        match (outcome.log_error, opts.log) {
            (Some(source), Some(path)) => Err(ServeError::LogWrite { path, source }),
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
