//! `live`: the scenario's agents against a real WebSocket chat server, in
//! real (scaled) time, and the metrics measured from what happened
//! (docs/live.md).
//!
//! - `conn`: the agentchat client handshake and the connection tasks;
//! - `driver`: one replication: connections, timers, the operator;
//! - [`observe`]: what was observed, and the metrics from it;
//! - [`compare`]: live versus simulated, side by side with a test per metric.
//!
//! Live code: real time and sockets, never on the simulator's path, and
//! nothing here is deterministic except the draws (the same seed gives the
//! agents the same decisions, the timing of the network does not repeat).

pub mod compare;
pub(crate) mod conn;
mod demo;
pub mod driver;
pub mod keys;
pub mod ledger;
pub mod observe;
pub mod session;
/// The server's frames as `live` reads them: the floor's agentchat dialect
/// (`herdsim_floor::dialect`), which `calibrate` and an embedding agent read
/// a recording or a real server with too.
pub use crate::floor::dialect as wire;

use crate::carrier::CarrierKind;
use crate::dist::DataCache;
use crate::floor::PolicyKind;
use crate::metrics::RunResult;
use crate::metrics::{Job, Row};
use crate::scenario::{Loaded, Scenario, ScenarioError};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

pub use driver::Outcome;

/// The operator's IDENTIFY name (here, not in `driver`, so that `observe`
/// needs nothing of the driver that imports it).
pub const OPERATOR: &str = "operator";

/// Why a connection to the server did not open (`live`'s agents,
/// `observe`): in words a user can act on (how to trust a private CA, the
/// limit a server went over), with the WebSocket error as the source where
/// there is one. A failure (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// Connecting (TCP, TLS, the WebSocket upgrade), a read or a send
    /// failed.
    #[error("{message}")]
    Ws {
        /// What failed, naming the server.
        message: String,
        /// What the WebSocket layer said.
        source: tokio_tungstenite::tungstenite::Error,
    },
    /// The server did not complete the handshake as the protocol says (an
    /// ERROR, a CHALLENGE to a key-less IDENTIFY, too much before WELCOME,
    /// no WELCOME/JOINED in time), or the TLS set-up failed.
    #[error("{0}")]
    Handshake(String),
}

impl From<String> for ConnError {
    fn from(m: String) -> Self {
        ConnError::Handshake(m)
    }
}

/// Why a live run failed: bad input (exit 2) or a failure (exit 1), by
/// variant ([`LiveError::is_bad_input`]).
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// Bad input: a flag, a key file, a path (exit 2).
    #[error("{0}")]
    BadInput(String),
    /// A scenario that does not load, validate or run live (exit 2).
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A file or folder of the results that could not be written (exit 1).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The async runtime or the I/O thread did not start (exit 1).
    #[error("cannot start {what}: {source}")]
    Start {
        /// `the async runtime`, `the I/O thread`.
        what: &'static str,
        /// What the system said.
        source: std::io::Error,
    },
    /// The embedded server failed (exit 1).
    #[error("embedded server: {0}")]
    Embedded(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// A result that could not be encoded (CSV, JSON) (exit 1); shown as
    /// its outermost message (the causes stay in the `anyhow::Error`).
    #[error("{0}")]
    Encode(anyhow::Error),
    /// A connection that did not open (exit 1).
    #[error(transparent)]
    Connection(#[from] ConnError),
    /// The server or the network (a connection lost, nothing measured, the
    /// deadline), in words (exit 1).
    #[error("{0}")]
    Failure(String),
    /// `--compare` failed after the live run: the live results are kept
    /// (the exit status of the cause).
    #[error("--compare: {source} (the live results are kept in {}, their table is above)", dir.display())]
    Compare {
        /// The results folder.
        dir: PathBuf,
        /// Why the comparison failed.
        source: Box<LiveError>,
    },
}

impl LiveError {
    /// Bad input (exit 2), from the variant.
    pub fn is_bad_input(&self) -> bool {
        match self {
            LiveError::BadInput(_) | LiveError::Scenario(_) => true,
            LiveError::Compare { source, .. } => source.is_bad_input(),
            LiveError::Io { .. }
            | LiveError::Start { .. }
            | LiveError::Embedded(_)
            | LiveError::Encode(_)
            | LiveError::Connection(_)
            | LiveError::Failure(_) => false,
        }
    }
}

/// The one taxonomy's error, by kind: the same message and exit status.
impl From<LiveError> for crate::error::Error {
    fn from(e: LiveError) -> Self {
        use crate::error::Error;
        match e {
            LiveError::BadInput(m) => Error::Input(m),
            LiveError::Scenario(s) => Error::Scenario(s),
            e if e.is_bad_input() => Error::Input(e.to_string()),
            e => Error::Other(Box::new(e)),
        }
    }
}

/// Everything one live replication needs.
#[derive(Debug, Clone)]
pub struct Setup {
    pub scenario: Scenario,
    pub base_dir: PathBuf,
    pub cache: DataCache,
    pub policy: PolicyKind,
    /// Scenario time runs `speed` times faster than real time.
    pub speed: f64,
    /// The replication's seed.
    pub seed: u64,
    /// The server; None: an embedded `serve` on an ephemeral loopback port.
    pub url: Option<String>,
    /// The TLS client configuration for a `wss://` URL (trusted roots);
    /// None: Mozilla's roots (see [`crate::tls::client_config`]).
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// Ed25519 identities (keyed IDENTIFY), derived from this secret;
    /// None: names only.
    pub keys: Option<keys::Secret>,
    /// A replication that has not ended after this much real time fails.
    pub deadline: std::time::Duration,
    /// Record a trace.
    pub trace: bool,
    /// The embedded server's `--log`.
    pub server_log: Option<PathBuf>,
}

pub use crate::limits::{MAX_SPEED, MIN_SPEED};

/// Check that a scenario can run live. Scripted events and link loss
/// cannot (the link is real; a script drives agents by hand): refused with
/// the key named. Returns notes on what is ignored (the modelled network,
/// server processing and disconnect detection: all real here).
pub fn check_scenario(loaded: &Loaded, s: &Scenario) -> Result<Vec<String>, ScenarioError> {
    if loaded.point_count() > 1 {
        let key = loaded
            .sweep
            .first()
            .map_or("sweep".to_string(), |a| format!("sweep.{}", a.key));
        return Err(loaded.error_at(
            &key,
            "live runs one point: remove the sweep, or fix its keys with --set".into(),
        ));
    }
    if !s.script.is_empty() {
        return Err(loaded.error_at(
            "script",
            "live cannot run scripted events (they place agents' inferences by hand); \
             remove the [[script]] entries"
                .into(),
        ));
    }
    // The agents speak the floor's wire: to a floor server, or to a bridge
    // that carries it on a room whose members arbitrate themselves (the
    // replica: python/examples/matrix_bridge.py, docs/matrix.md).
    if !matches!(s.carrier.kind, CarrierKind::Server | CarrierKind::Replica) {
        return Err(loaded.error_at(
            "carrier.kind",
            format!(
                "live runs its agents on a floor server (agentchat or herdsim serve) or a \
                 bridge to a room of replicas (`server` or `replica`), not `{}`",
                s.carrier.kind.name()
            ),
        ));
    }
    if s.network.loss_p > 0.0 {
        return Err(loaded.error_at(
            "network.loss_p",
            "live cannot drop messages on a real link; set network.loss_p = 0".into(),
        ));
    }
    Ok(vec![
        "network.base_ms, network.jitter, network.fifo, server.processing and \
         server.disconnect_detect are not used: the link and the server are real"
            .to_string(),
    ])
}

/// The seeds of a live plan: replication `r` runs with the seed the
/// simulator gives replication `r` of point 0.
pub fn seeds(master: u64, reps: u32) -> Vec<u64> {
    (0..reps)
        .map(|r| crate::dist::rep_seed(master, 0, r))
        .collect()
}

/// Run `reps` live replications one after another; stops early (keeping
/// what was measured) when `stop` is set. `progress(rep, posts made)`.
pub fn run_reps(
    base: &Setup,
    master: u64,
    reps: u32,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u32, u64),
) -> Result<Vec<(Row, Outcome)>, LiveError> {
    let mut out = Vec::new();
    for (rep, seed) in seeds(master, reps).into_iter().enumerate() {
        let rep = rep as u32;
        let setup = Setup {
            seed,
            trace: base.trace && rep == 0,
            server_log: if rep == 0 {
                base.server_log.clone()
            } else {
                None
            },
            ..base.clone()
        };
        let o = driver::run_rep(&setup, stop, &mut |n| progress(rep, n))?;
        let row = Row {
            job: Job {
                point: 0,
                policy: base.policy,
                rep,
                seed,
            },
            result: o.result.clone(),
        };
        let stopped = o.interrupted;
        out.push((row, o));
        if stopped {
            break;
        }
    }
    Ok(out)
}

/// A run's result as the simulator reports it.
pub fn results(rows: &[(Row, Outcome)]) -> Vec<RunResult> {
    rows.iter().map(|(r, _)| r.result.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn the_exit_status_comes_from_the_kind_and_the_text_stays() {
        let scenario = ScenarioError {
            file: "s.toml".into(),
            key: Some("network.loss_p".into()),
            pos: None,
            message: "live cannot drop messages".into(),
        };
        let shown = scenario.to_string();
        let e = Error::from(LiveError::from(scenario));
        assert!(matches!(e, Error::Scenario(_)));
        assert_eq!((e.exit_code(), e.to_string()), (2, shown));
        let io = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let written = LiveError::Io {
            path: "out/live.csv".into(),
            source: io(),
        };
        assert!(
            std::error::Error::source(&written).is_some(),
            "the io error is kept"
        );
        let e = Error::from(written);
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (1, format!("out/live.csv: {}", io()))
        );
        // --compare after the live run: the cause's status, the message
        // that says the live results are kept.
        let kept = |source: LiveError| LiveError::Compare {
            dir: "out".into(),
            source: Box::new(source),
        };
        let e = Error::from(kept(LiveError::BadInput("--set x: unknown key".into())));
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--compare: --set x: unknown key (the live results are kept in out, their table \
             is above)"
        );
        let e = Error::from(kept(LiveError::Failure("no delay".into())));
        assert_eq!(e.exit_code(), 1);
        let refused = LiveError::from(ConnError::Handshake("ws://h: refused".into()));
        let e = Error::from(refused);
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (1, "ws://h: refused".into())
        );
        let start = LiveError::Start {
            what: "the I/O thread",
            source: io(),
        };
        assert_eq!(
            Error::from(start).to_string(),
            format!("cannot start the I/O thread: {}", io())
        );
    }

    #[test]
    fn live_seeds_its_replications_as_a_sweep_does() {
        assert_eq!(
            seeds(7, 3),
            (0..3)
                .map(|r| crate::sweep::rep_seed(7, 0, r))
                .collect::<Vec<_>>()
        );
    }
}
