//! `herdsim serve`: flags only; the server is [`crate::serve`] (docs/serve.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use super::CliError;
use crate::floor::{Config, PolicyKind};
use crate::serve::{self, Limits, Options, ServeError};

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
    /// Frames per second a connection may send, sustained (0: no limit);
    /// over it a frame gets ERROR RATE_LIMITED and is dropped.
    #[arg(long, default_value_t = Limits::default().rate_per_sec, value_name = "N")]
    pub rate_limit: u32,
    /// Burst size of the rate limit, in frames.
    #[arg(long, default_value_t = Limits::default().burst, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub rate_burst: u32,
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

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let mut floor = Config::from_env(args.policy).map_err(|e| CliError::bad(e.to_string()))?;
    if let Some(ttl) = args.ttl_ms {
        floor.ttl_ms = ttl;
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            Some(crate::tls::server_config(cert, key).map_err(|e| CliError::bad(e.to_string()))?)
        }
        (None, None) => None,
        _ => return Err(CliError::bad("--tls-cert and --tls-key go together")),
    };
    let opts = Options {
        listen: args.listen,
        tls,
        floor,
        limits: Limits {
            max_frame_bytes: usize::try_from(args.max_frame_bytes).unwrap_or(usize::MAX),
            max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
            rate_per_sec: args.rate_limit,
            burst: args.rate_burst,
            ..Limits::default()
        },
        log: args.log,
        operator_name: args.operator_name,
        ..Options::default()
    };
    match serve::run_foreground(opts, args.quiet) {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e @ ServeError::Log { .. }) => Err(CliError::bad(e.to_string())),
        Err(e) => Err(CliError::Failure(e.into())),
    }
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
        let t = T::try_parse_from(["t"]);
        let a = t.map(|t| t.a);
        let d = Limits::default();
        assert!(matches!(a, Ok(ref a)
            if a.max_frame_bytes == d.max_frame_bytes as u64
                && a.max_connections == d.max_connections as u64
                && a.rate_limit == d.rate_per_sec
                && a.rate_burst == d.burst
                && a.listen.to_string() == serve::DEFAULT_LISTEN));
    }
}
