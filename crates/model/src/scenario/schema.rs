//! The scenario schema: every knob of docs/model.md, with its default.
//!
//! Unknown keys are errors (`deny_unknown_fields` everywhere). Durations are
//! milliseconds (floats allowed); distributions are tagged tables, see
//! [`DistSpec`]. Every key is documented in `scenarios/README.md`.

use crate::agent::Scheme;
use crate::carrier::{CarrierKind, Platform};
use crate::dist::DistSpec;
use crate::floor::PolicyKind;
use serde::{Deserialize, Serialize};

/// One scenario, fully resolved (defaults filled in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name of the scenario; results go to `<out>/<name>/`.
    #[serde(default = "default_name")]
    pub name: String,
    /// What question this scenario answers (free text).
    #[serde(default)]
    pub description: String,
    /// Master seed. Replication seeds derive from (seed, point, rep). Any
    /// u64; above i64::MAX (which a TOML integer cannot hold) it is written
    /// as a quoted string.
    #[serde(
        default = "default_seed",
        deserialize_with = "de::seed",
        serialize_with = "de::ser_seed"
    )]
    pub seed: u64,
    /// Replications per sweep point and policy.
    #[serde(default = "default_reps", deserialize_with = "de::whole_u32")]
    pub reps: u32,
    /// Policies run side by side, by name.
    #[serde(default = "default_policies")]
    pub policies: Vec<String>,
    /// Unix milliseconds at virtual time 0 (what `started_at` counts from).
    #[serde(default = "default_epoch_ms", deserialize_with = "de::epoch_ms")]
    pub epoch_ms: u64,
    /// Events one replication may process; a run that needs more stops
    /// with an error naming this key. Written only when not the default.
    #[serde(
        default = "default_max_events",
        deserialize_with = "de::max_events",
        skip_serializing_if = "is_default_max_events"
    )]
    pub max_events: u64,
    #[serde(default)]
    pub server: ServerSpec,
    #[serde(default)]
    pub network: NetworkSpec,
    #[serde(default = "default_agents")]
    pub agents: Vec<AgentGroup>,
    #[serde(default)]
    pub workload: WorkloadSpec,
    /// Schemes (`[schemes]`, docs/schemes.md): which agents may answer a
    /// channel message before the floor policy arbitrates, and a
    /// cooldown. Written only when not the default (`open`, no cooldown).
    #[serde(default, skip_serializing_if = "is_default")]
    pub schemes: SchemesSpec,
    /// How a claim travels and the platform it travels on (`[carrier]`,
    /// docs/carriers.md). Written only when not the default (a floor
    /// server that is the room).
    #[serde(default, skip_serializing_if = "is_default")]
    pub carrier: CarrierSpec,
    /// Scripted events (`[[script]]`), replayed exactly, besides (or
    /// instead of, with `workload.count = 0`) the random workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub script: Vec<ScriptEvent>,
    /// The `[sweep]` table: dotted key -> list of values or a range. The
    /// loader takes it out; a resolved point never has one.
    #[serde(default, skip_serializing)]
    pub sweep: Option<toml::Table>,
}

/// The `[carrier]` table (docs/carriers.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CarrierSpec {
    /// `server`, `replica`, `reaction`, `typing` or `none`.
    #[serde(default)]
    pub kind: CarrierKind,
    /// `agentchat`, `matrix`, `slack`, `discord` or `telegram`.
    #[serde(default)]
    pub platform: Platform,
    /// The platform's limit on each agent's messages, a second (0: none,
    /// as an admin's exemption gives; unset: the platform's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_rate_per_s: Option<f64>,
    /// Sends allowed at once before that rate applies (unset: the
    /// platform's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_burst: Option<u32>,
    /// Under `typing` on Matrix: the timeout each agent sends with its
    /// indicator, ms (Synapse's default when none is sent: 30000; it caps
    /// it at 120000).
    #[serde(
        default = "default_typing_timeout_ms",
        skip_serializing_if = "is_default_typing_timeout_ms"
    )]
    pub typing_timeout_ms: f64,
}

impl Default for CarrierSpec {
    fn default() -> CarrierSpec {
        CarrierSpec {
            kind: CarrierKind::default(),
            platform: Platform::default(),
            message_rate_per_s: None,
            message_burst: None,
            typing_timeout_ms: default_typing_timeout_ms(),
        }
    }
}

fn default_typing_timeout_ms() -> f64 {
    30_000.0
}
fn is_default_typing_timeout_ms(v: &f64) -> bool {
    *v == default_typing_timeout_ms()
}

/// The `[schemes]` table (docs/schemes.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemesSpec {
    /// `open` (every agent decides by `respond_p`), `owner`, `mentions`
    /// or `selector`.
    #[serde(default)]
    pub scheme: Scheme,
    /// Under `mentions`: the agent (`agent-003`) that answers the operator
    /// posts that @mention nobody; empty: nobody does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub default_agent: String,
    /// After an agent answers, it ignores channel messages this long (ms).
    #[serde(default)]
    pub cooldown_ms: f64,
    /// Under `owner` and `selector`: the fallback timeout (ms; 0: no
    /// fallback). Ignored under `open` and `mentions`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fallback_ms: f64,
    /// At most this many fallbacks per question.
    #[serde(
        default = "default_max_fallbacks",
        skip_serializing_if = "is_default_max_fallbacks"
    )]
    pub max_fallbacks: u32,
    /// The loop breaker: after this many agents' messages in the channel
    /// since the last operator post, an agent answers no agent's message
    /// until the next operator post (0: off).
    #[serde(default, skip_serializing_if = "is_default")]
    pub breaker_after: u32,
    /// Under `selector`: the selector's model call.
    #[serde(default, skip_serializing_if = "is_default")]
    pub selector: SelectorSpec,
}

impl Default for SchemesSpec {
    fn default() -> SchemesSpec {
        SchemesSpec {
            scheme: Scheme::default(),
            default_agent: String::new(),
            cooldown_ms: 0.0,
            fallback_ms: 0.0,
            max_fallbacks: default_max_fallbacks(),
            breaker_after: 0,
            selector: SelectorSpec::default(),
        }
    }
}

/// The `[schemes.selector]` table: the selector's model call and its
/// faults (docs/schemes.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectorSpec {
    /// How long one selection takes (a short call: lognormal p50 1.5 s,
    /// p99 6 s by default).
    #[serde(default = "default_selector_inference")]
    pub inference: DistSpec,
    /// Probability that the selector's process crashes during a selection.
    #[serde(default)]
    pub crash_p: f64,
    /// Probability that a selection hangs (never ends).
    #[serde(default)]
    pub hang_p: f64,
}

impl Default for SelectorSpec {
    fn default() -> SelectorSpec {
        SelectorSpec {
            inference: default_selector_inference(),
            crash_p: 0.0,
            hang_p: 0.0,
        }
    }
}

fn default_max_fallbacks() -> u32 {
    1
}
fn is_default_max_fallbacks(v: &u32) -> bool {
    *v == default_max_fallbacks()
}
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}
fn default_selector_inference() -> DistSpec {
    DistSpec::Lognormal {
        p50_ms: 1_500.0,
        p99_ms: 6_000.0,
    }
}

/// The server: claim TTL, tracking switch, processing time, disconnects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Claim TTL in ms (`AGENTCHAT_RESPOND_TTL_MS`).
    #[serde(default = "default_ttl_ms")]
    pub ttl_ms: f64,
    /// `AGENTCHAT_RESPOND_ENABLED`: false turns claim tracking off.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Server processing time per inbound message.
    #[serde(default = "zero_dist")]
    pub processing: DistSpec,
    /// Time from an agent crash until the server sees the disconnect.
    #[serde(default = "default_disconnect_detect")]
    pub disconnect_detect: DistSpec,
    /// Time from the server seeing a crash until the agent is back (it rejoins its channels).
    #[serde(default = "zero_dist")]
    pub restart: DistSpec,
    /// `agentchat-0.36` only: the MSG rate limit per agent in ms (0: off).
    #[serde(default = "default_rate_limit_ms")]
    pub rate_limit_ms: f64,
    /// `agentchat-0.36` only: server time of the first 5 s expiry sweep,
    /// in ms in [0, 5000), or `"random"`: drawn per replication.
    #[serde(default)]
    pub sweep_phase_ms: SweepPhase,
    /// `agentchat-0.36` only: how much later than 5000 ms each sweep comes.
    #[serde(default)]
    pub sweep_drift_ms: f64,
    /// `agentchat-0.36` only: the period of the expiry sweep in ms (the
    /// real server's 5000).
    #[serde(
        default = "default_sweep_every_ms",
        skip_serializing_if = "is_default_sweep_every_ms"
    )]
    pub sweep_every_ms: f64,
    /// `agentchat-0.36` only: the operator is one connection like any
    /// other and its posts pass the rate limit too (as on the real server).
    #[serde(default, skip_serializing_if = "is_false")]
    pub rate_limit_operator: bool,
    /// The floor-squatting defence: `off`, `relayed` (a claim for a
    /// message the server has not relayed in that channel is refused) or
    /// `clock` (also one dated more than `claim_skew_ms` before the
    /// message reached the server). Written only when not the default.
    #[serde(default, skip_serializing_if = "is_default")]
    pub claim_guard: ClaimGuardSpec,
    /// `claim_guard = "clock"`: the clock skew tolerated, ms. Written only
    /// when not the default.
    #[serde(
        default = "default_claim_skew_ms",
        skip_serializing_if = "is_default_claim_skew_ms"
    )]
    pub claim_skew_ms: f64,
}

/// The floor-squatting defence of the server (`server.claim_guard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClaimGuardSpec {
    #[default]
    Off,
    Relayed,
    Clock,
}

/// The phase of the `agentchat-0.36` expiry sweep: a number of ms, or the
/// word `"random"` (the default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SweepPhase {
    Ms(f64),
    Word(String),
}

impl Default for SweepPhase {
    fn default() -> Self {
        SweepPhase::Word("random".into())
    }
}

/// Links between each agent and the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Fixed part of the one-way delay, both directions.
    #[serde(default = "default_base_ms")]
    pub base_ms: f64,
    /// Random part of the one-way delay, drawn per message.
    #[serde(default = "default_jitter")]
    pub jitter: DistSpec,
    /// FIFO links (a WebSocket over TCP): never deliver before an earlier send.
    #[serde(default = "default_true")]
    pub fifo: bool,
    /// Probability that a message on an agent link is lost (both directions).
    #[serde(default)]
    pub loss_p: f64,
}

/// A group of identical agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentGroup {
    /// Label for traces and docs.
    #[serde(default = "default_group_name")]
    pub name: String,
    /// Number of agents in the group.
    #[serde(default = "default_count", deserialize_with = "de::whole_u32")]
    pub count: u32,
    /// Probability that an agent wants to answer a channel message.
    #[serde(default = "default_respond_p")]
    pub respond_p: f64,
    /// CSMA delay before deciding.
    #[serde(default = "default_csma")]
    pub csma: DistSpec,
    /// Timer quantization: the timer fires at the first multiple of this at
    /// or after its due time (0 = exact).
    #[serde(default)]
    pub csma_tick_ms: f64,
    /// Inference duration.
    #[serde(default = "default_inference")]
    pub inference: DistSpec,
    /// Clock offset, drawn once per agent (signed).
    #[serde(default = "default_skew")]
    pub clock_skew: DistSpec,
    /// Probability, per (agent, message) at inference start, of ignoring
    /// YIELD and relayed claims.
    #[serde(default)]
    pub ignore_yield_p: f64,
    /// Probability that an inference crashes the agent (at a uniform point of it).
    #[serde(default)]
    pub crash_p: f64,
    /// Probability that an inference hangs forever (no disconnect).
    #[serde(default)]
    pub hang_p: f64,
    /// After skipping because of a claim, re-decide once the claim is
    /// believed expired (seen + TTL) if no response was seen.
    #[serde(default)]
    pub recheck_on_expiry: bool,
    /// At most this many rechecks per message.
    #[serde(default = "default_max_rechecks", deserialize_with = "de::whole_u32")]
    pub max_rechecks: u32,
    /// Channels the group's agents are members of.
    #[serde(default = "default_channels")]
    pub channels: Vec<String>,
    /// A fault: the group's agents are floor squatters. They never answer;
    /// on every channel message they see they claim it at once (if
    /// `squat_react`) and pre-claim the next `squat_ahead` message ids,
    /// dating each claim `squat_lead_ms` before their clock. Written only
    /// when true.
    #[serde(default, skip_serializing_if = "is_default")]
    pub squatter: bool,
    /// Squatters: whether they claim each message they see at once.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub squat_react: bool,
    /// Squatters: how many of the next message ids they pre-claim.
    #[serde(
        default = "default_squat_ahead",
        deserialize_with = "de::whole_u32",
        skip_serializing_if = "is_default_squat_ahead"
    )]
    pub squat_ahead: u32,
    /// Squatters: how much earlier than their clock they date a claim, ms
    /// (`started_at` is at least 1).
    #[serde(
        default = "default_squat_lead_ms",
        skip_serializing_if = "is_default_squat_lead_ms"
    )]
    pub squat_lead_ms: f64,
}

/// How operator messages arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponential gaps with mean `mean_gap_ms`.
    Poisson,
    /// Every `mean_gap_ms` exactly.
    Fixed,
}

/// The operator's workload and agent-to-agent cascades.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    #[serde(default = "default_arrivals")]
    pub arrivals: Arrivals,
    /// Mean (or fixed) gap between operator messages.
    #[serde(default = "default_mean_gap_ms")]
    pub mean_gap_ms: f64,
    /// The gaps as a distribution (measured gaps: `empirical`); replaces
    /// `arrivals`, and `mean_gap_ms` must then be its mean. Written only
    /// when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<DistSpec>,
    /// Number of operator messages (ignored when `duration_ms` is set).
    #[serde(default = "default_msg_count", deserialize_with = "de::msg_count")]
    pub count: u64,
    /// Post messages until this virtual time instead of a count.
    #[serde(default)]
    pub duration_ms: Option<f64>,
    /// Channel the operator posts to.
    #[serde(default = "default_channel")]
    pub channel: String,
    /// Share of operator messages that @mention one agent (uniformly chosen).
    #[serde(default)]
    pub mention_p: f64,
    /// Share of operator messages that are a DM to one agent.
    #[serde(default)]
    pub dm_p: f64,
    /// Probability that an agent wants to answer another agent's reply.
    #[serde(default)]
    pub reply_to_agent_p: f64,
    /// Replies to replies go at most this many hops from the operator's post.
    #[serde(default = "default_max_depth", deserialize_with = "de::whole_u32")]
    pub max_depth: u32,
}

/// One scripted event: at `at_ms` of virtual time, exactly one of `post`,
/// `infer` or `disconnect`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptEvent {
    /// Virtual time of the event, ms.
    pub at_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post: Option<ScriptPost>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infer: Option<ScriptInfer>,
    /// An agent id: its connection drops now (as a crash the server sees at
    /// once); it rejoins after `server.restart`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disconnect: Option<String>,
}

/// A scripted post: reaches the server at `at_ms` (from the operator) or is
/// sent then by an agent over its uplink.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptPost {
    /// Message id on the wire, referred to by `infer.msg` (like `m<n>` ids
    /// of random posts, but any id of letters, digits, `-`, `_`, `.`).
    pub id: String,
    /// `operator` or an agent id.
    #[serde(default = "default_operator")]
    pub from: String,
    /// A channel (default: `workload.channel`) or `@agent-id` for a DM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default)]
    pub content: String,
}

/// A scripted inference: `agent` starts inference on message `msg` at
/// `at_ms`, claiming with `started_at`, whatever it has seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptInfer {
    pub agent: String,
    /// The `id` of a scripted post.
    pub msg: String,
    /// Unix ms the agent reports (default: its own clock at `at_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    /// Inference duration, ms.
    pub duration_ms: f64,
    /// The agent ignores YIELD and relayed claims for this inference.
    #[serde(default)]
    pub ignore_yield: bool,
}

fn default_operator() -> String {
    "operator".into()
}

impl Default for ServerSpec {
    fn default() -> Self {
        ServerSpec {
            ttl_ms: default_ttl_ms(),
            enabled: true,
            processing: zero_dist(),
            disconnect_detect: default_disconnect_detect(),
            restart: zero_dist(),
            rate_limit_ms: default_rate_limit_ms(),
            sweep_phase_ms: SweepPhase::default(),
            sweep_drift_ms: 0.0,
            sweep_every_ms: default_sweep_every_ms(),
            rate_limit_operator: false,
            claim_guard: ClaimGuardSpec::Off,
            claim_skew_ms: default_claim_skew_ms(),
        }
    }
}

impl Default for NetworkSpec {
    fn default() -> Self {
        NetworkSpec {
            base_ms: default_base_ms(),
            jitter: default_jitter(),
            fifo: true,
            loss_p: 0.0,
        }
    }
}

impl Default for AgentGroup {
    fn default() -> Self {
        AgentGroup {
            name: default_group_name(),
            count: default_count(),
            respond_p: default_respond_p(),
            csma: default_csma(),
            csma_tick_ms: 0.0,
            inference: default_inference(),
            clock_skew: default_skew(),
            ignore_yield_p: 0.0,
            crash_p: 0.0,
            hang_p: 0.0,
            recheck_on_expiry: false,
            max_rechecks: default_max_rechecks(),
            channels: default_channels(),
            squatter: false,
            squat_react: true,
            squat_ahead: default_squat_ahead(),
            squat_lead_ms: default_squat_lead_ms(),
        }
    }
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            arrivals: default_arrivals(),
            mean_gap_ms: default_mean_gap_ms(),
            gap: None,
            count: default_msg_count(),
            duration_ms: None,
            channel: default_channel(),
            mention_p: 0.0,
            dm_p: 0.0,
            reply_to_agent_p: 0.0,
            max_depth: default_max_depth(),
        }
    }
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            name: default_name(),
            description: String::new(),
            seed: default_seed(),
            reps: default_reps(),
            policies: default_policies(),
            epoch_ms: default_epoch_ms(),
            max_events: default_max_events(),
            server: ServerSpec::default(),
            network: NetworkSpec::default(),
            agents: default_agents(),
            workload: WorkloadSpec::default(),
            schemes: SchemesSpec::default(),
            carrier: CarrierSpec::default(),
            script: Vec::new(),
            sweep: None,
        }
    }
}

impl Scenario {
    /// The policies, parsed. Call after [`super::validate`].
    pub fn policy_kinds(&self) -> Vec<PolicyKind> {
        self.policies
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// Check the script: one action per event, known agents and messages,
    /// unique ids. The error is (dotted key, message).
    pub fn check_script(&self) -> Result<(), (String, String)> {
        let mut ids: Vec<&str> = Vec::new();
        for (i, e) in self.script.iter().enumerate() {
            let k = |f: &str| format!("script.{i}.{f}");
            super::validate::time(&k("at_ms"), e.at_ms)?;
            let actions = usize::from(e.post.is_some())
                + usize::from(e.infer.is_some())
                + usize::from(e.disconnect.is_some());
            if actions != 1 {
                return Err((
                    format!("script.{i}"),
                    "needs exactly one of `post`, `infer`, `disconnect`".into(),
                ));
            }
            if let Some(p) = &e.post {
                self.check_script_post(i, p, &mut ids)?;
            }
            if let Some(inf) = &e.infer {
                self.check_script_infer(i, e, inf)?;
            }
            if let Some(a) = &e.disconnect
                && !self.is_agent_id(a)
            {
                return Err((
                    k("disconnect"),
                    format!("`{a}` is not an agent of this scenario"),
                ));
            }
        }
        Ok(())
    }

    /// Whether `id` names an agent of this scenario: it parses to an index
    /// and is spelled exactly as that agent's id (zero padding included).
    fn is_agent_id(&self, id: &str) -> bool {
        use crate::names::{agent_id, parse_agent};
        let n = self.agent_count() as usize;
        parse_agent(id, n).is_some_and(|i| agent_id(i as usize, n) == id)
    }

    /// The `post` of script event `i`: a well-formed id that is not a
    /// generated one and not used before (`ids`, to which it is added), a
    /// known sender, and a channel or agent DM as target.
    fn check_script_post<'a>(
        &self,
        i: usize,
        p: &'a ScriptPost,
        ids: &mut Vec<&'a str>,
    ) -> Result<(), (String, String)> {
        let k = |f: &str| format!("script.{i}.{f}");
        let ok = !p.id.is_empty()
            && p.id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !ok {
            return Err((
                k("post.id"),
                format!(
                    "`{}` is not a message id (letters, digits, `-`, `_`, `.`)",
                    p.id
                ),
            ));
        }
        if crate::names::parse_msg(&p.id).is_some() {
            return Err((
                k("post.id"),
                format!(
                    "`{}` looks like a generated id (m<number>); pick another",
                    p.id
                ),
            ));
        }
        if ids.contains(&p.id.as_str()) {
            return Err((k("post.id"), format!("`{}` is used twice", p.id)));
        }
        ids.push(&p.id);
        if p.from != "operator" && !self.is_agent_id(&p.from) {
            return Err((
                k("post.from"),
                format!(
                    "`{}` is neither `operator` nor an agent of this scenario",
                    p.from
                ),
            ));
        }
        if let Some(to) = &p.to {
            let dm = to.strip_prefix('@').is_some_and(|a| self.is_agent_id(a));
            let channel = crate::floor::address::is_channel_name(to);
            if !dm && !channel {
                return Err((
                    k("post.to"),
                    format!("`{to}` is neither a channel nor `@` and an agent id"),
                ));
            }
        }
        Ok(())
    }

    /// The `infer` of script event `e` (number `i`): a known agent, a post
    /// listed earlier and not later in time, a valid duration.
    fn check_script_infer(
        &self,
        i: usize,
        e: &ScriptEvent,
        inf: &ScriptInfer,
    ) -> Result<(), (String, String)> {
        let k = |f: &str| format!("script.{i}.{f}");
        if !self.is_agent_id(&inf.agent) {
            return Err((
                k("infer.agent"),
                format!("`{}` is not an agent of this scenario", inf.agent),
            ));
        }
        let post = self.script[..i]
            .iter()
            .find(|o| o.post.as_ref().is_some_and(|p| p.id == inf.msg));
        match post {
            None => {
                return Err((
                    k("infer.msg"),
                    format!(
                        "`{}` is not the id of a post listed earlier in the script",
                        inf.msg
                    ),
                ));
            }
            Some(p) if p.at_ms > e.at_ms => {
                return Err((
                    k("at_ms"),
                    format!(
                        "{} is before the post `{}` at {}",
                        e.at_ms, inf.msg, p.at_ms
                    ),
                ));
            }
            Some(_) => {}
        }
        super::validate::duration(&k("infer.duration_ms"), inf.duration_ms)?;
        Ok(())
    }

    /// Total number of agents over all groups.
    pub fn agent_count(&self) -> u64 {
        self.agents.iter().map(|g| u64::from(g.count)).sum()
    }
}

fn default_name() -> String {
    "default".into()
}
fn default_seed() -> u64 {
    1
}
fn default_reps() -> u32 {
    20
}
fn default_policies() -> Vec<String> {
    vec!["spec".into()]
}
fn default_epoch_ms() -> u64 {
    1_700_000_000_000
}
fn default_max_events() -> u64 {
    crate::limits::DEFAULT_MAX_EVENTS
}
fn is_default_max_events(v: &u64) -> bool {
    *v == default_max_events()
}
fn default_ttl_ms() -> f64 {
    45_000.0
}
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
fn default_claim_skew_ms() -> f64 {
    crate::floor::DEFAULT_CLAIM_SKEW_MS as f64
}
fn is_default_claim_skew_ms(v: &f64) -> bool {
    *v == default_claim_skew_ms()
}
fn default_squat_ahead() -> u32 {
    3
}
fn is_default_squat_ahead(v: &u32) -> bool {
    *v == default_squat_ahead()
}
fn default_squat_lead_ms() -> f64 {
    MAX_SQUAT_LEAD_MS
}
fn is_default_squat_lead_ms(v: &f64) -> bool {
    *v == MAX_SQUAT_LEAD_MS
}
/// The default (and largest) `squat_lead_ms`: as early as a duration goes.
pub const MAX_SQUAT_LEAD_MS: f64 = crate::limits::MAX_DURATION_MS;
fn default_rate_limit_ms() -> f64 {
    1000.0
}
fn default_sweep_every_ms() -> f64 {
    crate::floor::sim::AGENTCHAT_SWEEP_MS as f64
}
fn is_default_sweep_every_ms(v: &f64) -> bool {
    *v == default_sweep_every_ms()
}
fn is_false(v: &bool) -> bool {
    !*v
}
fn default_true() -> bool {
    true
}
fn is_true(v: &bool) -> bool {
    *v
}
fn zero_dist() -> DistSpec {
    DistSpec::Fixed { ms: 0.0 }
}
fn default_disconnect_detect() -> DistSpec {
    DistSpec::Fixed { ms: 5_000.0 }
}
fn default_base_ms() -> f64 {
    40.0
}
fn default_jitter() -> DistSpec {
    DistSpec::Exponential { mean_ms: 10.0 }
}
fn default_agents() -> Vec<AgentGroup> {
    vec![AgentGroup::default()]
}
fn default_group_name() -> String {
    "agents".into()
}
fn default_count() -> u32 {
    5
}
fn default_respond_p() -> f64 {
    0.6
}
fn default_csma() -> DistSpec {
    DistSpec::Uniform {
        min_ms: 2_000.0,
        max_ms: 8_000.0,
    }
}
fn default_inference() -> DistSpec {
    DistSpec::Lognormal {
        p50_ms: 4_000.0,
        p99_ms: 20_000.0,
    }
}
fn default_skew() -> DistSpec {
    DistSpec::Normal {
        mean_ms: 0.0,
        sd_ms: 50.0,
    }
}
fn default_max_rechecks() -> u32 {
    1
}
fn default_channels() -> Vec<String> {
    vec![default_channel()]
}
fn default_channel() -> String {
    "#general".into()
}
fn default_arrivals() -> Arrivals {
    Arrivals::Poisson
}
fn default_mean_gap_ms() -> f64 {
    60_000.0
}
fn default_msg_count() -> u64 {
    1_000
}
fn default_max_depth() -> u32 {
    3
}

/// Deserializers of whole numbers that name their range in user words
/// (and keep values a TOML integer cannot hold out of the resolved tree).
mod de {
    use crate::limits::{MAX_EPOCH_MS, MAX_MAX_EVENTS, MAX_MESSAGES};
    use serde::de::{self, Deserializer, Unexpected, Visitor};
    use serde::ser::Serializer;
    use std::fmt;

    struct Whole {
        min: u64,
        max: u64,
        /// Accept a quoted string of digits (the seed above i64::MAX).
        strings: bool,
    }

    impl Whole {
        fn check<E: de::Error>(&self, v: u64, unexp: Unexpected<'_>) -> Result<u64, E> {
            if v < self.min || v > self.max {
                return Err(E::invalid_value(unexp, self));
            }
            Ok(v)
        }
    }

    impl<'de> Visitor<'de> for Whole {
        type Value = u64;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a whole number from {} to {}", self.min, self.max)?;
            if self.strings {
                write!(f, " (above 9223372036854775807 in quotes)")?;
            }
            Ok(())
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            self.check(v, Unexpected::Unsigned(v))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            match u64::try_from(v) {
                Ok(u) => self.check(u, Unexpected::Signed(v)),
                Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
            }
        }

        fn visit_u128<E: de::Error>(self, v: u128) -> Result<u64, E> {
            match u64::try_from(v) {
                Ok(u) => self.visit_u64(u),
                Err(_) => Err(E::invalid_value(
                    Unexpected::Other("a larger number"),
                    &self,
                )),
            }
        }

        fn visit_i128<E: de::Error>(self, v: i128) -> Result<u64, E> {
            match u64::try_from(v) {
                Ok(u) => self.visit_u64(u),
                Err(_) => Err(E::invalid_value(
                    Unexpected::Other("a number out of range"),
                    &self,
                )),
            }
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
            let digits = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
            let parsed = v.parse::<u64>().ok().filter(|_| digits);
            match parsed {
                Some(u) if self.strings => self.check(u, Unexpected::Str(v)),
                // A number too large for TOML (`--set count=99999999999999999999`).
                _ if digits && parsed.is_none_or(|u| u > self.max) => Err(E::invalid_value(
                    Unexpected::Other(&format!("integer `{v}`")),
                    &self,
                )),
                _ => Err(E::invalid_type(Unexpected::Str(v), &self)),
            }
        }
    }

    fn whole<'de, D: Deserializer<'de>>(d: D, w: Whole) -> Result<u64, D::Error> {
        d.deserialize_any(w)
    }

    pub fn seed<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        whole(
            d,
            Whole {
                min: 0,
                max: u64::MAX,
                strings: true,
            },
        )
    }

    /// The seed as a TOML integer, or a quoted string above i64::MAX.
    pub fn ser_seed<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        match i64::try_from(*v) {
            Ok(i) => s.serialize_i64(i),
            Err(_) => s.serialize_str(&v.to_string()),
        }
    }

    pub fn whole_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let w = Whole {
            min: 0,
            max: u64::from(u32::MAX),
            strings: false,
        };
        // In range by the check.
        whole(d, w).map(|v| v as u32)
    }

    pub fn epoch_ms<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let w = Whole {
            min: 0,
            max: MAX_EPOCH_MS,
            strings: false,
        };
        whole(d, w)
    }

    pub fn msg_count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let w = Whole {
            min: 0,
            max: MAX_MESSAGES,
            strings: false,
        };
        whole(d, w)
    }

    pub fn max_events<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let w = Whole {
            min: 1,
            max: MAX_MAX_EVENTS,
            strings: false,
        };
        whole(d, w)
    }
}
