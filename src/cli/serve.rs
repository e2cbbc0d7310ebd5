//! `herdsim serve`: flags only; the server is [`crate::serve`] (docs/serve.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::CliError;
use crate::floor::DEFAULT_CLAIM_SKEW_MS;
use crate::floor::PolicyKind;
use crate::serve::{self, Command, Limits};

/// Largest time flag, ms (about 31.7 years).
const MAX_MS: u64 = 1_000_000_000_000;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to listen on (loopback by default; a non-loopback address
    /// exposes the server to the network).
    #[arg(long, default_value = serve::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Arbitration policy: none, spec, agentchat-0.36, tombstone, server-time.
    #[arg(long, default_value = "spec")]
    pub policy: PolicyKind,
    /// Claim TTL in ms. Default: the policy's environment variable
    /// (AGENTCHAT_RESPOND_TTL_MS, or AGENTCHAT_CLAIM_TTL_MS for
    /// agentchat-0.36), else 45000.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ttl_ms: Option<u64>,
    /// Write every input the server handled to FILE, one JSON line each, in
    /// `herdsim arbitrate`'s input format (replay it with `arbitrate`).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// The IDENTIFY name that makes a connection the operator.
    #[arg(long, default_value = "operator", value_name = "NAME")]
    pub operator_name: String,
    /// Largest message a client may send, in bytes; a larger one gets
    /// ERROR FRAME_TOO_LARGE and the connection is closed (code 1009).
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(64..=(1 << 30)), value_name = "BYTES")]
    pub max_frame_bytes: u64,
    /// Open connections at most; more are closed before the handshake.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000), value_name = "N")]
    pub max_connections: u64,
    /// Frames per second a connection may send, sustained (0: no limit).
    #[arg(long, default_value_t = Limits::default().rate_per_sec, value_name = "N")]
    pub rate_limit: u32,
    /// Burst size of the rate limit, in frames.
    #[arg(long, default_value_t = Limits::default().burst, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub rate_burst: u32,
    /// Bytes per second a connection may send, sustained (0: no limit);
    /// over it the connection is not read until it is back under.
    #[arg(long, default_value_t = Limits::default().byte_rate, value_name = "BYTES")]
    pub byte_rate_limit: u64,
    /// Burst size of the byte-rate limit, in bytes (at least
    /// --max-frame-bytes).
    #[arg(long, default_value_t = Limits::default().byte_burst, value_parser = clap::value_parser!(u64).range(1..), value_name = "BYTES")]
    pub byte_burst: u64,
    /// Bytes queued for one connection that does not read; over it the
    /// connection is dropped as too slow (at least --max-frame-bytes + 65536).
    #[arg(long, default_value_t = Limits::default().max_queued_bytes as u64, value_parser = clap::value_parser!(u64).range(1..=(1 << 40)), value_name = "BYTES")]
    pub max_queued_bytes: u64,
    /// Messages queued for one connection that does not read; over it the
    /// connection is dropped as too slow.
    #[arg(long, default_value_t = Limits::default().send_queue as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000), value_name = "N")]
    pub max_queued_messages: u64,
    /// Time one write to a client may take before the connection is dropped.
    #[arg(long, default_value_t = ms(Limits::default().write_timeout), value_parser = clap::value_parser!(u64).range(1..=MAX_MS), value_name = "MS")]
    pub write_timeout_ms: u64,
    /// Time from accepting a connection to its WELCOME; past it, closed.
    #[arg(long, default_value_t = ms(Limits::default().identify_timeout), value_parser = clap::value_parser!(u64).range(1..=MAX_MS), value_name = "MS")]
    pub identify_timeout_ms: u64,
    /// Time an identified connection may send nothing (no frame, ping or
    /// pong); it is pinged halfway and closed at the end.
    #[arg(long, default_value_t = ms(Limits::default().idle_timeout), value_parser = clap::value_parser!(u64).range(2..=MAX_MS), value_name = "MS")]
    pub idle_timeout_ms: u64,
    /// Longest channel name, in bytes (under every policy).
    #[arg(long, default_value_t = Limits::default().max_channel_bytes as u64, value_parser = clap::value_parser!(u64).range(2..=(1 << 20)), value_name = "BYTES")]
    pub max_channel_bytes: u64,
    /// Longest message id (msg_id, id, in_reply_to) and @ target, in bytes.
    #[arg(long, default_value_t = Limits::default().max_id_bytes as u64, value_parser = clap::value_parser!(u64).range(1..=(1 << 20)), value_name = "BYTES")]
    pub max_id_bytes: u64,
    /// Channels one connection may be a member of at once.
    #[arg(long, default_value_t = Limits::default().max_channels_per_conn as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000), value_name = "N")]
    pub max_channels_per_connection: u64,
    /// Live claims one connection may hold at once.
    #[arg(long, default_value_t = Limits::default().max_claims_per_conn as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000), value_name = "N")]
    pub max_claims_per_connection: u64,
    /// Channels that may exist at once.
    #[arg(long, default_value_t = Limits::default().max_channels as u64, value_parser = clap::value_parser!(u64).range(1..=10_000_000), value_name = "N")]
    pub max_channels: u64,
    /// Ceiling on the memory clients make the whole server hold, in MiB.
    #[arg(long, default_value_t = (Limits::default().max_memory_bytes >> 20) as u64, value_parser = clap::value_parser!(u64).range(1..=(1 << 20)), value_name = "MIB")]
    pub max_memory_mb: u64,
    /// Largest --log file, in bytes; logging stops before passing it.
    #[arg(long, default_value_t = Limits::default().log_max_bytes, value_parser = clap::value_parser!(u64).range(1..), value_name = "BYTES")]
    pub log_max_bytes: u64,
    /// Floor-squatting defence: off, relayed or clock (docs/protocol.md).
    /// Default: relayed, but off under agentchat-0.36 (the real server's).
    #[arg(long, value_name = "MODE", value_parser = ["off", "relayed", "clock"])]
    pub claim_guard: Option<String>,
    /// --claim-guard clock: the clock skew tolerated, in ms.
    #[arg(long, default_value_t = DEFAULT_CLAIM_SKEW_MS, value_parser = clap::value_parser!(u64).range(0..=MAX_MS), value_name = "MS")]
    pub claim_skew_ms: u64,
    /// Serve wss:// (TLS): the server's certificate chain, PEM, its own
    /// certificate first. Needs --tls-key. Default: plain ws://.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Print nothing on stderr but errors.
    #[arg(long)]
    pub quiet: bool,
}

fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

pub fn run(a: Args) -> Result<ExitCode, CliError> {
    let limits = Limits {
        max_frame_bytes: size(a.max_frame_bytes),
        max_connections: size(a.max_connections),
        rate_per_sec: a.rate_limit,
        burst: a.rate_burst,
        byte_rate: a.byte_rate_limit,
        byte_burst: a.byte_burst,
        send_queue: size(a.max_queued_messages),
        max_queued_bytes: size(a.max_queued_bytes),
        write_timeout: Duration::from_millis(a.write_timeout_ms),
        identify_timeout: Duration::from_millis(a.identify_timeout_ms),
        idle_timeout: Duration::from_millis(a.idle_timeout_ms),
        max_channel_bytes: size(a.max_channel_bytes),
        max_id_bytes: size(a.max_id_bytes),
        max_channels_per_conn: size(a.max_channels_per_connection),
        max_claims_per_conn: size(a.max_claims_per_connection),
        max_channels: size(a.max_channels),
        max_memory_bytes: size(a.max_memory_mb.saturating_mul(1 << 20)),
        log_max_bytes: a.log_max_bytes,
        ..Limits::default()
    };
    Command {
        listen: a.listen,
        policy: a.policy,
        ttl_ms: a.ttl_ms,
        log: a.log,
        operator_name: a.operator_name,
        limits,
        claim_guard: a.claim_guard,
        claim_skew_ms: a.claim_skew_ms,
        tls_cert: a.tls_cert,
        tls_key: a.tls_key,
        quiet: a.quiet,
    }
    .run()
    .map(|_| ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_defaults_are_the_library_defaults() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct T {
            #[command(flatten)]
            a: Args,
        }
        let a = T::try_parse_from(["t"]).map(|t| t.a);
        let d = Limits::default();
        assert!(matches!(a, Ok(ref a)
            if (a.max_frame_bytes, a.max_connections) == (d.max_frame_bytes as u64, d.max_connections as u64)
                && (a.rate_limit, a.rate_burst, a.byte_rate_limit, a.byte_burst) == (d.rate_per_sec, d.burst, d.byte_rate, d.byte_burst)
                && (a.max_queued_bytes, a.max_queued_messages) == (d.max_queued_bytes as u64, d.send_queue as u64)
                && (a.write_timeout_ms, a.identify_timeout_ms, a.idle_timeout_ms) == (ms(d.write_timeout), ms(d.identify_timeout), ms(d.idle_timeout))
                && (a.max_channel_bytes, a.max_id_bytes) == (d.max_channel_bytes as u64, d.max_id_bytes as u64)
                && (a.max_channels_per_connection, a.max_claims_per_connection, a.max_channels) == (d.max_channels_per_conn as u64, d.max_claims_per_conn as u64, d.max_channels as u64)
                && (a.max_memory_mb << 20, a.log_max_bytes) == (d.max_memory_bytes as u64, d.log_max_bytes)
                && a.listen.to_string() == serve::DEFAULT_LISTEN));
    }
}
