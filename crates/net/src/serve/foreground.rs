//! `herdsim serve` in the foreground: a runtime of its own, the server
//! bound and run until SIGINT/SIGTERM, one line on stderr when it listens
//! and one when it stops.

use super::{Options, Report, ServeError, bind, shutdown_signal};
use crate::term::note;

/// Serve `opts` until a signal, then return what the server did. Unless
/// `quiet`, say where it listens (warning when that is not loopback) and,
/// at the end, what it did.
pub fn run_foreground(opts: Options, quiet: bool) -> Result<Report, ServeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| ServeError::Internal(format!("cannot start the runtime: {e}")))?;
    let report = rt.block_on(async move {
        let bound = bind(opts.clone()).await?;
        let addr = bound.local_addr();
        let scheme = if opts.tls.is_some() { "wss" } else { "ws" };
        if !quiet && !addr.ip().is_loopback() {
            let tls = if opts.tls.is_some() { "TLS" } else { "no TLS" };
            note(format_args!(
                "herdsim serve: warning: {addr} is not a loopback address; anyone who can reach it can connect ({tls}, no authentication but the agentchat keys)"
            ));
        }
        if !quiet {
            note(format_args!(
                "herdsim serve: listening on {scheme}://{addr} (policy {}, TTL {} ms, claim guard {}); Ctrl-C to stop",
                opts.floor.policy.name(),
                opts.floor.ttl_ms,
                opts.floor.claim_guard.name()
            ));
        }
        bound.run(shutdown_signal()).await
    })?;
    if !quiet {
        let s = &report.stats;
        note(format_args!(
            "herdsim serve: stopped; {} connections ({} refused, {} evicted before identifying, {} dropped as too slow, {} shed at the memory ceiling), {} inputs (and {} refused before the floor: channel and claim limits, claim guard), {} claims, {} yields, {} expired",
            report.connections,
            report.refused,
            report.evicted,
            report.slow,
            report.shed,
            report.inputs,
            report.refused_inputs,
            s.claims_received,
            s.yields,
            s.expired
        ));
    }
    Ok(report)
}
