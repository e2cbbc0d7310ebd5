//! The server's configuration: [`Config`], the claim guard, the
//! environment variables and what the server refuses of them.

use super::*;

/// Server configuration. Start from [`Config::for_policy`] (or
/// [`Config::default`], `spec`'s) and set the fields to change: the struct
/// is `#[non_exhaustive]`, so a field added in a minor release breaks no
/// embedder.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The arbitration policy.
    pub policy: PolicyKind,
    /// Claim TTL in milliseconds (default 45000). [`NEVER`] (`u64::MAX`):
    /// claims never expire.
    pub ttl_ms: u64,
    /// `false` turns claim tracking off; messages are still relayed.
    pub enabled: bool,
    /// `agentchat-0.36` only: a MSG less than this many ms after the
    /// sender's previous one (that passed this check) is refused with
    /// `RATE_LIMITED` (default 1000, the server's `rateLimitMs`); 0 turns
    /// the limit off (the real server cannot: `options.rateLimitMs || 1000`).
    pub rate_limit_ms: u64,
    /// Sweep expiry (`agentchat-0.36`) only: sweep number k runs at server
    /// time `sweep_phase_ms + k x (5000 ms + sweep_drift_us)`, k = 0, 1, ...
    /// (the real server's `setInterval` starts with the server, at an
    /// arbitrary phase relative to anything else). Default 0.
    pub sweep_phase_ms: u64,
    /// Sweep expiry only: how much later than 5000 ms each sweep comes, in
    /// microseconds (the real timer drifts by about 300-1100 us per sweep
    /// under load). Default 0.
    pub sweep_drift_us: u64,
    /// Sweep expiry only: the sweep's period in ms (default
    /// [`AGENTCHAT_SWEEP_MS`], the real server's 5000; a driver that runs
    /// the server faster or slower than real time scales it). 0: claims
    /// expire exactly at their deadline.
    pub sweep_every_ms: u64,
    /// `agentchat-0.36` only: the operator's MSGs pass the rate limit too
    /// (the real server knows no operator: it is one connection like any
    /// other). Default false: the operator is exempt.
    pub rate_limit_operator: bool,
    /// The floor-squatting defence (see [`ClaimGuard`]). Default
    /// [`ClaimGuard::default_for`] the policy: [`ClaimGuard::Relayed`]
    /// (what `herdsim serve` runs), [`ClaimGuard::Off`] under
    /// `agentchat-0.36` (the real server has no such check). Set
    /// [`ClaimGuard::Off`] for a policy exactly as it is written.
    pub claim_guard: ClaimGuard,
    /// `agentchat-0.36` only: apply agentchat 0.36.19's flood limit to
    /// every agent's inputs (JOIN, LEAVE, MSG, RESPONDING_TO): the one that
    /// makes more than 60 in 10 s (10 before `Input::Identify`) is dropped
    /// and the agent disconnected ([`crate::sim::FrameWindow`]),
    /// counted in [`Stats::frame_closed`]. The operator is exempt. Default
    /// false (`arbitrate` and the library as before); the simulator sets
    /// it; `serve` applies the limit to the socket's frames instead.
    pub frame_limit: bool,
}

/// The floor-squatting defence: which claims the server refuses beyond
/// what the policy refuses. Applies to every agent's claim (not the
/// operator's), tracked or, with tracking off and under `none`, relayed as
/// a plain message (herdsim's clients skip a message they see claimed
/// under every policy). It comes after the policy's checks of the claim's
/// fields, membership and channel. A refused claim gets
/// an `ERROR` (`not_relayed` or `bad_started_at`; `INVALID_MSG` under
/// `agentchat-0.36`), changes no state and counts in
/// [`Stats::claims_refused`].
///
/// The server remembers the channel messages it relayed (the channel, the
/// id, the sender and the server time of the relay; a message relayed
/// again by its sender under the same id counts from its last relay) for
/// [`RELAY_MEMORY_MS`](crate::sim::RELAY_MEMORY_MS), each sender's last [`RELAY_MEMORY_PER_SENDER`](crate::sim::RELAY_MEMORY_PER_SENDER) at
/// most, [`RELAY_MEMORY_MAX`](crate::sim::RELAY_MEMORY_MAX) in all (when full, the sender with the most
/// remembered forgets first: see [`crate::sim::RelayMemory`]). An honest
/// agent learns of a message only from the server, so its claim never comes
/// before the relay.
///
/// A claim names (channel, id), not the message's sender, so while the
/// guard is on an id stands for one sender's message. A channel MSG whose
/// id has the form of the server's own (`s1`, `s2`, ...) is refused
/// (`id_taken`; `INVALID_MSG` under `agentchat-0.36`). A channel MSG whose
/// id the server remembers as the message of another sender still
/// connected (it has not disconnected since) in that channel is relayed
/// under the server's next id instead, and echoed to its sender (the one
/// MSG a sender is sent back, so it learns the id its message goes by):
/// a client that posts under the id another will use next, and claims it
/// in advance, holds a floor nobody else asks for, and cannot block the
/// other's message either. A MSG relayed under an id the guard does not
/// remember (a new message) drops any claim left on that id from an older
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimGuard {
    /// No check: every policy as it is written.
    Off,
    /// A claim for a message the server has not relayed in that channel
    /// (within the memory above) is refused. The default but under
    /// `agentchat-0.36` ([`ClaimGuard::default_for`]).
    Relayed,
    /// As [`ClaimGuard::Relayed`], and a claim whose `started_at` is more
    /// than `skew_ms` earlier than the claimed message's relay, read on the
    /// clients' wall clock (`epoch_ms` + server time in ms), is refused.
    Clock {
        /// Clock skew tolerated, ms.
        skew_ms: u64,
        /// The clients' wall-clock time (Unix ms) at server time 0.
        epoch_ms: i64,
    },
}

/// The default clock-skew tolerance of [`ClaimGuard::Clock`], ms (the
/// scenario key `server.claim_skew_ms`, `serve --claim-skew-ms`).
pub const DEFAULT_CLAIM_SKEW_MS: u64 = 1000;

impl ClaimGuard {
    /// The guard a [`Config`] gets unless told otherwise, in the library
    /// and in `herdsim serve` alike: [`ClaimGuard::Relayed`] (an honest
    /// agent never trips it, since it learns of a message only from the
    /// server; a squatter's claims for messages not yet sent are refused),
    /// except [`ClaimGuard::Off`] under `agentchat-0.36`, a faithful model
    /// of a real server that has no such check. The simulator's scenarios
    /// keep `server.claim_guard = "off"` unless they say otherwise: their
    /// agents are honest or are the squatters being measured.
    pub fn default_for(policy: PolicyKind) -> ClaimGuard {
        match policy {
            PolicyKind::Agentchat036 => ClaimGuard::Off,
            _ => ClaimGuard::Relayed,
        }
    }

    /// The guard a name gives (the scenario key's and the flags' words,
    /// [`ClaimGuard::name`]'s): `off`, `relayed`, or `clock` with
    /// `skew_ms` and an epoch of 0 (a server sets its clock's epoch when it
    /// starts; a caller whose server time is Unix ms keeps 0). The one
    /// reading of those names for `herdsim serve`, `herdsim arbitrate` and
    /// the Python face.
    pub fn from_name(name: &str, skew_ms: u64) -> Result<ClaimGuard, ConfigError> {
        match name {
            "off" => Ok(ClaimGuard::Off),
            "relayed" => Ok(ClaimGuard::Relayed),
            "clock" => Ok(ClaimGuard::Clock {
                skew_ms,
                epoch_ms: 0,
            }),
            other => Err(ConfigError::BadClaimGuard {
                value: crate::wire::clip(other),
            }),
        }
    }

    /// The name used by the scenario key and the flags: `off`, `relayed`,
    /// `clock`.
    pub fn name(self) -> &'static str {
        match self {
            ClaimGuard::Off => "off",
            ClaimGuard::Relayed => "relayed",
            ClaimGuard::Clock { .. } => "clock",
        }
    }
}

/// A TTL that never expires (what `agentchat-0.36` does with a TTL
/// variable that is not a number).
pub const NEVER: u64 = u64::MAX;

impl Default for Config {
    /// Policy `spec`, TTL 45000 ms, tracking on, the claim guard
    /// [`ClaimGuard::Relayed`], rate limit 1000 ms (the operator exempt), a
    /// sweep every 5000 ms from phase 0, no drift: [`Config::for_policy`]
    /// of `spec`.
    fn default() -> Self {
        Config::for_policy(PolicyKind::Spec)
    }
}

impl Config {
    /// The defaults for `policy`: as [`Config::default`], with the policy's
    /// own claim guard ([`ClaimGuard::default_for`]).
    pub fn for_policy(policy: PolicyKind) -> Config {
        Config {
            policy,
            ttl_ms: DEFAULT_TTL_MS,
            enabled: true,
            rate_limit_ms: AGENTCHAT_RATE_LIMIT_MS,
            sweep_phase_ms: 0,
            sweep_drift_us: 0,
            sweep_every_ms: AGENTCHAT_SWEEP_MS,
            rate_limit_operator: false,
            claim_guard: ClaimGuard::default_for(policy),
            frame_limit: false,
        }
    }
}

/// `agentchat-0.36`'s reading of its TTL variable: JavaScript's
/// `parseInt(value || '45000', 10)` (`CLAIM_TTL_MS`, `lib/floor-control.ts`):
/// leading whitespace and a sign, then the leading digits; anything after
/// them is ignored (`"30s"` is 30, `"1e3"` is 1). A negative number counts
/// as 0 (a claim is expired as soon as it is granted, and removed at the
/// next sweep); no digits at all (`"soon"`) gives NaN on the server, whose
/// claims then never expire: [`NEVER`]. An empty value is the default.
pub fn agentchat_ttl(raw: &str) -> u64 {
    let t = raw.trim_start();
    if t.is_empty() {
        return DEFAULT_TTL_MS;
    }
    let (neg, rest) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let digits: &str = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return NEVER;
    }
    if neg {
        return 0;
    }
    // Beyond u64: far beyond any run (and beyond JavaScript's exact integers).
    digits.parse::<u64>().unwrap_or(NEVER - 1)
}

impl Config {
    /// The configuration of `policy` from variables read through `get`:
    /// the TTL from `AGENTCHAT_RESPOND_TTL_MS`, a positive integer of ms,
    /// default 45000 (`agentchat-0.36` reads `AGENTCHAT_CLAIM_TTL_MS`
    /// instead, leniently as the real server does: see [`agentchat_ttl`];
    /// no value is an error there); `AGENTCHAT_RESPOND_ENABLED`: `true`/`false` (also `1`/`0`,
    /// `yes`/`no`, `on`/`off`, any case), default true. Surrounding
    /// whitespace is ignored and an empty value counts as unset. Any other
    /// value is an error naming the variable and the value.
    pub fn from_vars(
        policy: PolicyKind,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let ttl_var = policy.rules().ttl_var;
        let mut cfg = Config::for_policy(policy);
        if let Some(raw) = get(ttl_var)
            && policy == PolicyKind::Agentchat036
        {
            cfg.ttl_ms = agentchat_ttl(&raw);
        } else if let Some(raw) = get(ttl_var) {
            let v = raw.trim();
            if !v.is_empty() {
                cfg.ttl_ms = match v.parse::<u64>() {
                    Ok(t) if t > 0 => t,
                    _ => {
                        return Err(ConfigError::BadTtl {
                            var: ttl_var,
                            value: clip(&raw),
                        });
                    }
                };
            }
        }
        if let Some(raw) = get(ENABLED_VAR) {
            let v = raw.trim();
            if !v.is_empty() {
                cfg.enabled = match v.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "on" => true,
                    "false" | "0" | "no" | "off" => false,
                    _ => {
                        return Err(ConfigError::BadEnabled {
                            var: ENABLED_VAR,
                            value: clip(&raw),
                        });
                    }
                };
            }
        }
        Ok(cfg)
    }

    /// [`Config::from_vars`] on the process environment (the only place
    /// this module reads it, and only when called). A value that is not
    /// valid Unicode is an error.
    pub fn from_env(policy: PolicyKind) -> Result<Config, ConfigError> {
        Config::from_vars(policy, |k| match std::env::var(k) {
            Ok(v) => Some(v),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(s)) => Some(s.to_string_lossy().into_owned()),
        })
    }
}

/// A [`Config`] the server refuses: which setting, and why (the text
/// names the variable and the value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The TTL variable is not a positive integer number of ms.
    #[error("{var}=`{value}` is invalid: expected a positive integer number of milliseconds")]
    BadTtl {
        /// The variable (`AGENTCHAT_RESPOND_TTL_MS`).
        var: &'static str,
        /// Its value (clipped).
        value: String,
    },
    /// A claim guard named with none of [`ClaimGuard::from_name`]'s words.
    #[error("claim guard `{value}`: expected off, relayed or clock")]
    BadClaimGuard {
        /// The name (clipped).
        value: String,
    },
    /// The enabled variable is not true or false.
    #[error("{var}=`{value}` is invalid: expected true or false")]
    BadEnabled {
        /// The variable (`AGENTCHAT_RESPOND_ENABLED`).
        var: &'static str,
        /// Its value (clipped).
        value: String,
    },
}
