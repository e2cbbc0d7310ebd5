//! `herdsim serve` as a command: the values of its flags turned into
//! [`Options`] (the policy's environment, the claim guard, TLS) and the
//! server run in the foreground until a signal.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{Limits, Options, Report, ServeError, run_foreground};
use crate::error::Error;
use crate::floor::{ClaimGuard, Config, PolicyKind};

/// What `herdsim serve`'s flags ask for (docs/serve.md, "Flags").
#[derive(Debug, Clone)]
pub struct Command {
    pub listen: SocketAddr,
    pub policy: PolicyKind,
    /// `--ttl-ms`; `None`: the policy's variable, else 45000.
    pub ttl_ms: Option<u64>,
    pub log: Option<PathBuf>,
    pub operator_name: String,
    pub limits: Limits,
    /// `--claim-guard`: `off`, `relayed` or `clock`; `None`:
    /// [`default_claim_guard`].
    pub claim_guard: Option<String>,
    pub claim_skew_ms: u64,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Print nothing on stderr but errors.
    pub quiet: bool,
}

/// The claim guard `herdsim serve` uses when --claim-guard is not given:
/// the library's own default ([`ClaimGuard::default_for`]), `relayed`,
/// except `off` under `agentchat-0.36` (a faithful model of the real
/// server, which has no such check).
pub fn default_claim_guard(policy: PolicyKind) -> &'static str {
    ClaimGuard::default_for(policy).name()
}

impl Command {
    /// The server's options: the floor's configuration from the policy's
    /// environment variables and the flags, the TLS files read and checked.
    /// Bad input (a variable, a TLS file) is [`Error::Input`].
    pub fn options(&self) -> Result<Options, Error> {
        let mut floor = Config::from_env(self.policy).map_err(|e| Error::bad(e.to_string()))?;
        if let Some(ttl) = self.ttl_ms {
            floor.ttl_ms = ttl;
        }
        let guard = self
            .claim_guard
            .as_deref()
            .unwrap_or(default_claim_guard(self.policy));
        // The epoch (0 here) is set to the server's clock when it starts.
        floor.claim_guard = ClaimGuard::from_name(guard, self.claim_skew_ms).map_err(|_| {
            Error::bad(format!(
                "--claim-guard {guard}: expected off, relayed or clock"
            ))
        })?;
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                Some(crate::tls::server_config(cert, key).map_err(|e| Error::bad(e.to_string()))?)
            }
            (None, None) => None,
            _ => return Err(Error::bad("--tls-cert and --tls-key go together")),
        };
        Ok(Options {
            listen: self.listen,
            tls,
            floor,
            limits: self.limits.clone(),
            log: self.log.clone(),
            operator_name: self.operator_name.clone(),
            ..Options::default()
        })
    }

    /// Serve until SIGINT or SIGTERM ([`run_foreground`]). A `--log` that
    /// cannot be created and limits that do not fit are bad input.
    pub fn run(&self) -> Result<Report, Error> {
        match run_foreground(self.options()?, self.quiet) {
            Ok(report) => Ok(report),
            Err(e @ (ServeError::Log { .. } | ServeError::Limits(_))) => {
                Err(Error::bad(e.to_string()))
            }
            Err(e) => Err(Error::from(anyhow::Error::from(e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(policy: PolicyKind, guard: Option<&str>) -> Command {
        Command {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            policy,
            ttl_ms: Some(1234),
            log: None,
            operator_name: "op".into(),
            limits: Limits::default(),
            claim_guard: guard.map(String::from),
            claim_skew_ms: 7,
            tls_cert: None,
            tls_key: None,
            quiet: true,
        }
    }

    #[test]
    fn options_follow_the_flags_and_the_policy_default_guard() {
        let o = command(PolicyKind::Spec, None).options();
        assert!(
            matches!(&o, Ok(o) if o.floor.claim_guard == ClaimGuard::Relayed
            && o.floor.ttl_ms == 1234 && o.operator_name == "op")
        );
        let o = command(PolicyKind::Agentchat036, None).options();
        assert!(matches!(&o, Ok(o) if o.floor.claim_guard == ClaimGuard::Off));
        let o = command(PolicyKind::Agentchat036, Some("clock")).options();
        assert!(matches!(&o, Ok(o) if o.floor.claim_guard
            == ClaimGuard::Clock { skew_ms: 7, epoch_ms: 0 }));
        assert!(matches!(
            command(PolicyKind::Spec, Some("x")).options(),
            Err(Error::Input(_))
        ));
        let mut c = command(PolicyKind::Spec, None);
        c.tls_cert = Some("cert.pem".into());
        assert!(matches!(c.options(), Err(Error::Input(m)) if m.contains("go together")));
    }
}
