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
/// The server's frames as `live` reads them: `herdsim_model::agentchat`
/// (in the model crate, so that `calibrate` reads a recording the same way).
pub use crate::agentchat as wire;

use crate::dist::DataCache;
use crate::floor::PolicyKind;
use crate::metrics::RunResult;
use crate::scenario::{Loaded, Scenario, ScenarioError};
use crate::sweep::{Job, Row};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

pub use driver::Outcome;

/// Why a live run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiveError {
    /// Bad input (exit 2).
    #[error("{0}")]
    BadInput(String),
    /// Anything else: the server, the network (exit 1).
    #[error("{0}")]
    Failure(String),
}

/// The one taxonomy's error: the same message and exit status.
impl From<LiveError> for crate::error::Error {
    fn from(e: LiveError) -> Self {
        match e {
            LiveError::BadInput(m) => crate::error::Error::Input(m),
            LiveError::Failure(m) => crate::error::Error::Failure(anyhow::Error::msg(m)),
        }
    }
}

impl From<ScenarioError> for LiveError {
    fn from(e: ScenarioError) -> Self {
        LiveError::BadInput(e.to_string())
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
        .map(|r| crate::sweep::rep_seed(master, 0, r))
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
