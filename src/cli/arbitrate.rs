//! `herdsim arbitrate`: replay timestamped server inputs (JSON Lines on
//! stdin) through the real arbitration server of a policy, writing one JSON
//! line per message the server sends (docs/arbitrate.md). The replay and
//! its line format are the library module [`crate::replay`]; this file
//! turns flags into its configuration and its summary into an exit status
//! (2 when a line could not be used).

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use super::CliError;
use crate::floor::{ClaimGuard, Config, DEFAULT_CLAIM_SKEW_MS, PolicyKind};
use crate::replay::replay_bounded;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Arbitration policy: none, spec, agentchat-0.36, tombstone, server-time.
    #[arg(long, default_value = "spec")]
    pub policy: PolicyKind,
    /// Claim TTL in ms. Default: the policy's environment variable
    /// (AGENTCHAT_RESPOND_TTL_MS, or AGENTCHAT_CLAIM_TTL_MS for
    /// agentchat-0.36), else 45000.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ttl_ms: Option<u64>,
    /// Floor-squatting defence: off or relayed (docs/protocol.md). Default
    /// off: the policy exactly as written, so a transcript that starts
    /// mid-session, or claims a message it never shows, replays as the
    /// policy decides; `relayed` replays it as `herdsim serve` decides.
    #[arg(long, value_name = "MODE", default_value = "off", value_parser = ["off", "relayed"])]
    pub claim_guard: String,
    /// agentchat-0.36: the MSG rate limit in ms (a MSG less than this after
    /// the sender's previous one is refused with RATE_LIMITED); 0 = off.
    #[arg(long, default_value_t = crate::floor::sim::AGENTCHAT_RATE_LIMIT_MS)]
    pub rate_limit_ms: u64,
    /// agentchat-0.36: server time (ms) of the first 5 s expiry sweep; the
    /// next run every 5000 ms (+ the drift) after it.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..5000))]
    pub sweep_phase_ms: u64,
    /// agentchat-0.36: how much later than 5000 ms each sweep comes, in
    /// microseconds (the real timer drifts by about 300-1100 us per sweep).
    #[arg(long, default_value_t = 0)]
    pub sweep_drift_us: u64,
    /// Print the server's counters as one JSON line on stderr at the end.
    #[arg(long)]
    pub stats: bool,
    /// Longest input line, in bytes; a longer one is reported (exit 2) and
    /// ends the replay.
    #[arg(long, default_value_t = crate::replay::MAX_LINE_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_line_bytes: u64,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let mut cfg = Config::from_env(args.policy).map_err(|e| CliError::bad(e.to_string()))?;
    if let Some(ttl) = args.ttl_ms {
        cfg.ttl_ms = ttl;
    }
    // clap takes only `off` and `relayed` (a transcript's times are not a
    // wall clock, so `clock` has nothing to compare).
    cfg.claim_guard = ClaimGuard::from_name(&args.claim_guard, DEFAULT_CLAIM_SKEW_MS)
        .map_err(|e| CliError::bad(e.to_string()))?;
    cfg.rate_limit_ms = args.rate_limit_ms;
    cfg.sweep_phase_ms = args.sweep_phase_ms;
    cfg.sweep_drift_us = args.sweep_drift_us;
    let stdin = io::stdin().lock();
    let mut out = BufWriter::new(io::stdout().lock());
    let mut err = io::stderr().lock();
    let summary = replay_bounded(cfg, stdin, &mut out, &mut err, args.max_line_bytes)?;
    out.flush()?;
    if args.stats {
        writeln!(err, "{}", summary.stats_line())?;
    }
    Ok(if summary.bad_lines > 0 {
        ExitCode::from(super::EXIT_BAD_INPUT)
    } else {
        ExitCode::SUCCESS
    })
}
