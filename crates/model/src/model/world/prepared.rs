//! A scenario prepared for simulation: distributions loaded, milliseconds
//! turned into microseconds, each agent group's [`Behaviour`] built once.
//! It also builds the actors ([`Prepared::new_agent`],
//! [`Prepared::new_workload`]) exactly as a simulated run does, so that
//! another driver (`herdsim live`) gets the same agents.

use crate::agent::{
    Agent, AgentNaming, Behaviour, Clock, Gate, Scheme, Squat, Workload, WorkloadParams,
};
use crate::carrier::{CarrierKind, Limit, Profile};
use crate::dist::{DataCache, Dist, DistError, DistSpec};
use crate::floor::Text;
use crate::floor::{ClaimGuard, PolicyKind};
use crate::model::dense::{AgentId, Dense, DenseBuilder, DestId};
use crate::names;
use crate::scenario::{Arrivals, Scenario, ScriptEvent, SweepPhase};
use std::path::Path;
use std::sync::Arc;

/// Scenario values converted once per sweep point: distributions prepared
/// (empirical CSVs loaded), milliseconds turned into microseconds.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub(super) groups: Vec<GroupParams>,
    /// Agent index -> group index.
    pub(super) agent_group: Vec<u16>,
    pub(super) ids: Vec<String>,
    /// The run's names as integers ([`Dense`]).
    pub(super) names: Dense,
    /// Agent index -> its [`AgentId`].
    pub(super) handles: Vec<AgentId>,
    /// [`AgentId`] -> agent index ([`NOT_AGENT`]: the operator, or a name
    /// a script uses).
    pub(super) index_of: Vec<u32>,
    pub(super) operator: AgentId,
    /// The workload's channel.
    pub(super) channel_dest: DestId,
    pub(super) base_us: u64,
    pub(super) jitter: Dist,
    pub(super) processing: Dist,
    pub(super) fifo: bool,
    pub(super) loss_p: f64,
    pub(super) ttl_ms: u64,
    pub(super) enabled: bool,
    pub(super) rate_limit_ms: u64,
    /// `None`: drawn per replication.
    pub(super) sweep_phase_ms: Option<u64>,
    pub(super) sweep_drift_us: u64,
    pub(super) sweep_every_ms: u64,
    pub(super) rate_limit_operator: bool,
    /// The server's floor-squatting defence.
    pub(super) claim_guard: ClaimGuard,
    pub(super) detect: Dist,
    pub(super) restart: Dist,
    pub(super) epoch_us: i64,
    pub(super) gap: Dist,
    pub(super) count: u64,
    pub(super) duration_us: Option<u64>,
    pub(super) channel: String,
    pub(super) mention_p: f64,
    pub(super) dm_p: f64,
    pub(super) script: Vec<ScriptEvent>,
    /// Operator posts expected in one run (for progress weighting only).
    pub(super) expected_posts: f64,
    /// Events one replication may process (`max_events`).
    pub(super) max_events: u64,
    /// Events that may be pending at once (the memory budget of one run).
    pub(super) max_pending: usize,
    /// The scheme every agent follows (`[schemes]`).
    pub(super) scheme: Scheme,
    /// Under `mentions`: the index of the default agent.
    pub(super) default_agent: Option<usize>,
    pub(super) cooldown_us: u64,
    /// The answering agents (indices `0..answering`); under `selector`
    /// the selector is one more actor, index `answering`.
    pub(super) answering: usize,
    /// Under `owner` and `selector`: the fallback (µs; 0: none).
    pub(super) fallback_us: u64,
    pub(super) max_fallbacks: u32,
    /// The loop breaker (0: off).
    pub(super) breaker_after: u32,
    /// How a claim travels (`[carrier]`).
    pub(super) carrier: CarrierKind,
    /// The platform's properties.
    pub(super) profile: Profile,
    /// The limit on each agent's messages (the platform's, or the
    /// scenario's `carrier.message_rate_per_s` / `message_burst`).
    pub(super) message_limit: Option<Limit>,
    /// Under `typing`: the timeout each agent sends (µs).
    pub(super) typing_timeout_us: u64,
    /// The platform keeps some messages from the bots (a quick test
    /// before [`super::World::hidden_from`] on every delivery).
    pub(super) platform_hides: bool,
}

/// One agent group: how its agents behave, their clock skew, their channels.
#[derive(Debug, Clone)]
pub(super) struct GroupParams {
    pub(super) behaviour: Arc<Behaviour>,
    pub(super) skew: Dist,
    pub(super) channels: Vec<String>,
    pub(super) channel_dests: Vec<DestId>,
}

/// [`Prepared::index_of`] of a name that is no simulated agent.
pub(super) const NOT_AGENT: u32 = u32::MAX;

pub(super) fn us(ms: f64) -> u64 {
    (ms * 1000.0).round() as u64
}

impl Prepared {
    /// Prepare a validated scenario; `base_dir` resolves empirical CSV paths.
    pub fn new(s: &Scenario, base_dir: &Path) -> Result<Prepared, DistError> {
        Prepared::with_cache(s, base_dir, &DataCache::default())
    }

    /// [`Prepared::new`], taking empirical data from `cache`: the points of
    /// a sweep share one parsed copy of each file.
    pub fn with_cache(
        s: &Scenario,
        base_dir: &Path,
        cache: &DataCache,
    ) -> Result<Prepared, DistError> {
        let prep = |d: &DistSpec| d.prepare_with(base_dir, cache);
        let mut groups = Vec::with_capacity(s.agents.len());
        let mut agent_group = Vec::new();
        for (gi, g) in s.agents.iter().enumerate() {
            let behaviour = Behaviour {
                ttl_ms: s.server.ttl_ms.round() as u64,
                recheck: g.recheck_on_expiry,
                max_rechecks: g.max_rechecks,
                respond_p: g.respond_p,
                reply_p: s.workload.reply_to_agent_p,
                max_depth: s.workload.max_depth,
                csma: prep(&g.csma)?,
                tick_us: us(g.csma_tick_ms),
                inference: prep(&g.inference)?,
                ignore_yield_p: g.ignore_yield_p,
                crash_p: g.crash_p,
                hang_p: g.hang_p,
                squat: g.squatter.then(|| Squat {
                    ahead: g.squat_ahead,
                    react: g.squat_react,
                    lead_ms: g.squat_lead_ms.round() as i64,
                }),
            };
            groups.push(GroupParams {
                behaviour: Arc::new(behaviour),
                skew: prep(&g.clock_skew)?,
                channels: g.channels.clone(),
                channel_dests: Vec::new(),
            });
            agent_group.extend(std::iter::repeat_n(gi as u16, g.count as usize));
        }
        let n = agent_group.len();
        let selector = s.schemes.scheme == Scheme::Selector;
        if selector {
            // The selector: one more actor, with a group of its own.
            let sel = &s.schemes.selector;
            let behaviour = Behaviour {
                ttl_ms: s.server.ttl_ms.round() as u64,
                recheck: false,
                max_rechecks: 0,
                respond_p: 0.0,
                reply_p: 0.0,
                max_depth: s.workload.max_depth,
                csma: prep(&DistSpec::Fixed { ms: 0.0 })?,
                tick_us: 0,
                inference: prep(&sel.inference)?,
                ignore_yield_p: 0.0,
                crash_p: sel.crash_p,
                hang_p: sel.hang_p,
                squat: None,
            };
            groups.push(GroupParams {
                behaviour: Arc::new(behaviour),
                skew: prep(&DistSpec::Fixed { ms: 0.0 })?,
                channels: vec![s.workload.channel.clone()],
                channel_dests: Vec::new(),
            });
            agent_group.push((groups.len() - 1) as u16);
        }
        let w = &s.workload;
        let gap = match (&w.gap, w.arrivals) {
            (Some(g), _) => g.clone(),
            (None, Arrivals::Poisson) => DistSpec::Exponential {
                mean_ms: w.mean_gap_ms,
            },
            (None, Arrivals::Fixed) => DistSpec::Fixed { ms: w.mean_gap_ms },
        };
        let mut ids: Vec<String> = (0..n).map(|i| names::agent_id(i, n)).collect();
        if selector {
            ids.push(SELECTOR.to_string());
        }
        let dense = dense_names(&ids, &groups, &w.channel, &s.script);
        // By its number, whatever its padding (validation checked it).
        let default_agent = names::parse_agent(&s.schemes.default_agent, n).map(|i| i as usize);
        let handles: Vec<AgentId> = ids.iter().map(|a| agent_of(&dense, a)).collect();
        let mut index_of = vec![NOT_AGENT; dense.agents()];
        for (i, h) in handles.iter().enumerate() {
            index_of[h.0 as usize] = i as u32;
        }
        for g in &mut groups {
            g.channel_dests = g.channels.iter().map(|c| dest_of(&dense, c)).collect();
        }
        // The server's settings at speed 1 (the policy is each run's own).
        let floor = s.floor_config(PolicyKind::Spec, 1.0);
        let mut p = Prepared {
            groups,
            operator: agent_of(&dense, super::OPERATOR),
            channel_dest: dest_of(&dense, &w.channel),
            names: dense,
            handles,
            index_of,
            ids,
            agent_group,
            base_us: us(s.network.base_ms),
            jitter: prep(&s.network.jitter)?,
            processing: prep(&s.server.processing)?,
            fifo: s.network.fifo,
            loss_p: s.network.loss_p,
            ttl_ms: floor.ttl_ms,
            enabled: floor.enabled,
            rate_limit_ms: floor.rate_limit_ms,
            sweep_phase_ms: match s.server.sweep_phase_ms {
                SweepPhase::Ms(_) => Some(floor.sweep_phase_ms),
                SweepPhase::Word(_) => None,
            },
            sweep_drift_us: floor.sweep_drift_us,
            sweep_every_ms: floor.sweep_every_ms,
            rate_limit_operator: floor.rate_limit_operator,
            // The agents' clocks read epoch + skew + virtual time.
            claim_guard: floor.claim_guard,
            detect: prep(&s.server.disconnect_detect)?,
            restart: prep(&s.server.restart)?,
            epoch_us: (s.epoch_ms as i64).saturating_mul(1000),
            gap: prep(&gap)?,
            count: w.count,
            duration_us: w.duration_ms.map(us),
            channel: w.channel.clone(),
            mention_p: w.mention_p,
            dm_p: w.dm_p,
            script: s.script.clone(),
            expected_posts: match w.duration_ms {
                Some(d) => d / w.mean_gap_ms.max(1e-9),
                None => w.count as f64,
            } + s.script.len() as f64,
            max_events: s.max_events,
            max_pending: usize::MAX,
            scheme: s.schemes.scheme,
            default_agent,
            cooldown_us: us(s.schemes.cooldown_ms),
            answering: n,
            fallback_us: match s.schemes.scheme {
                Scheme::Owner | Scheme::Selector => us(s.schemes.fallback_ms),
                Scheme::Open | Scheme::Mentions => 0,
            },
            max_fallbacks: s.schemes.max_fallbacks,
            breaker_after: s.schemes.breaker_after,
            carrier: s.carrier.kind,
            profile: s.carrier.platform.profile(),
            message_limit: message_limit(s),
            typing_timeout_us: us(s.carrier.typing_timeout_ms),
            platform_hides: false,
        };
        p.platform_hides = !p.profile.bots_see_bots || !p.claims_visible();
        Ok(p)
    }

    /// Cap the events pending at once (a replication that needs more
    /// stops with [`RunLimit::Pending`](super::RunLimit::Pending)); unbounded by default.
    pub fn set_max_pending(&mut self, n: usize) {
        // The event queue addresses at most u32::MAX pending events.
        self.max_pending = n.clamp(1, u32::MAX as usize - 1);
    }

    /// The policies a run under `policy` gives the server and the agents,
    /// by the carrier (docs/carriers.md): under `server` and `replica`
    /// the policy itself, unless the platform hides the claims from the
    /// other agents (replicas that see only their own claims arbitrate
    /// nothing: the server tracks nothing); under `reaction` and `typing`
    /// nobody arbitrates (the server tracks nothing) and the agents claim
    /// but never abort on a claim they see (the client rules of
    /// `server-time`, whose clients claim and abort only on a YIELD, which
    /// never comes); under `none` nobody claims.
    pub(super) fn carrier_policies(&self, policy: PolicyKind) -> (PolicyKind, PolicyKind) {
        match self.carrier {
            CarrierKind::Server => (policy, policy),
            CarrierKind::Replica if self.claims_visible() => (policy, policy),
            CarrierKind::Replica => (PolicyKind::None, policy),
            CarrierKind::Reaction | CarrierKind::Typing => {
                (PolicyKind::None, PolicyKind::ServerTime)
            }
            CarrierKind::None => (PolicyKind::None, PolicyKind::None),
        }
    }

    /// Whether the other agents see an agent's claim (its relay by the
    /// server): a floor server's always; room events and visible
    /// messages (`replica`) when bots see bots; reactions where bots see
    /// other bots' reactions; a typing indicator where bots see it.
    pub(super) fn claims_visible(&self) -> bool {
        match self.carrier {
            CarrierKind::Server | CarrierKind::None => true,
            CarrierKind::Replica => self.profile.bots_see_bots,
            CarrierKind::Reaction => self.profile.reactions_visible,
            CarrierKind::Typing => self.profile.typing.is_some(),
        }
    }

    /// The claim TTL (ms) of the server and of every agent.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Number of actors: the agents, and under `selector` the selector
    /// (the last one).
    pub fn agents(&self) -> usize {
        self.ids.len()
    }

    /// Number of answering agents (without the selector).
    pub fn answering_agents(&self) -> usize {
        self.answering
    }

    /// The first component stream of actor `i` (see [`stream`]): agent
    /// `i`'s, or the selector's own.
    pub(super) fn stream_of(&self, i: usize) -> u64 {
        if i < self.answering {
            agent_stream(i)
        } else {
            SELECTOR_STREAM
        }
    }

    /// A rough relative cost of one run, agents x expected posts (at least
    /// 1): what the progress bar weighs replications by, so that its ETA
    /// counts a 1000-agent point as the larger job it is. Not a result.
    pub fn expected_cost(&self) -> u64 {
        let c = self.agents() as f64 * self.expected_posts;
        if c.is_finite() && c >= 1.0 {
            c.min(1e15) as u64
        } else {
            1
        }
    }
    /// The wire ids of the agents, in index order.
    pub fn agent_ids(&self) -> &[String] {
        &self.ids
    }

    /// The channels agent `i` joins.
    pub fn channels(&self, i: usize) -> &[String] {
        &self.groups[usize::from(self.agent_group[i])].channels
    }

    /// The workload's channel (where the operator posts).
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The restart delay of a crashed agent.
    pub fn restart(&self) -> &Dist {
        &self.restart
    }

    /// Agent `i` as replication `seed` builds it: its own stream (component
    /// `16 + 4 i`), from which its clock skew is drawn first; its local
    /// clock is the scenario epoch plus that skew.
    pub fn new_agent(&self, i: usize, policy: PolicyKind, seed: u64) -> Agent {
        let id = self.ids[i].clone();
        let roster = &self.ids[..self.answering];
        self.agent_with(i, policy, seed, id, Text, roster, |skew_us| {
            Clock::Offset(self.epoch_us + skew_us)
        })
    }

    /// [`Prepared::new_agent`] naming everything as the simulator does
    /// ([`Dense`]): the same agent, the same draws.
    pub(super) fn new_sim_agent(&self, i: usize, policy: PolicyKind, seed: u64) -> Agent<Dense> {
        let (id, names) = (self.handles[i], self.names.clone());
        let roster = &self.handles[..self.answering];
        self.agent_with(i, policy, seed, id, names, roster, |skew_us| {
            Clock::Offset(self.epoch_us + skew_us)
        })
    }

    /// Agent `i` of replication `seed` as a live driver builds it: the same
    /// draws as [`Prepared::new_agent`], but its local clock is the real
    /// wall clock (`origin_us`: the Unix time, µs, of driver time 0) plus
    /// its skew, with scenario time running `speed` times faster.
    pub fn new_live_agent(
        &self,
        i: usize,
        policy: PolicyKind,
        seed: u64,
        origin_us: i64,
        speed: f64,
    ) -> Agent {
        let id = self.ids[i].clone();
        let roster = &self.ids[..self.answering];
        self.agent_with(i, policy, seed, id, Text, roster, |skew_us| Clock::Scaled {
            origin_us,
            skew_us,
            speed,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn agent_with<N: AgentNaming>(
        &self,
        i: usize,
        policy: PolicyKind,
        seed: u64,
        id: N::Agent,
        names: N,
        roster: &[N::Agent],
        clock: impl FnOnce(i64) -> Clock,
    ) -> Agent<N> {
        let g = &self.groups[usize::from(self.agent_group[i])];
        let mut rng = stream(seed, self.stream_of(i));
        let skew_us = g.skew.sample_signed_us(&mut rng);
        let mut agent =
            Agent::with_naming(id, names, policy, g.behaviour.clone(), rng, clock(skew_us));
        if self.scheme != Scheme::Open || self.cooldown_us > 0 || self.breaker_after > 0 {
            agent.set_gate(Gate {
                scheme: self.scheme,
                seat: i as u32,
                seats: self.answering as u32,
                default_agent: self.default_agent == Some(i),
                cooldown_us: self.cooldown_us,
                selector: i >= self.answering,
                fallback_us: self.fallback_us,
                max_fallbacks: self.max_fallbacks,
                breaker_after: self.breaker_after,
            });
        }
        if i >= self.answering {
            agent.make_selector(roster.to_vec());
        }
        agent
    }

    /// The operator's workload of replication `seed` (component stream 1).
    pub fn new_workload(&self, seed: u64) -> Workload {
        let params = WorkloadParams {
            gap: self.gap.clone(),
            count: self.count,
            duration_us: self.duration_us,
            channel: self.channel.clone(),
            dm_p: self.dm_p,
            mention_p: self.mention_p,
            agents: self.ids[..self.answering].to_vec(),
        };
        Workload::new(params, stream(seed, 1))
    }
}

/// The limit on each agent's messages: the platform's, with the
/// scenario's rate and burst over it (a rate of 0: none).
fn message_limit(s: &Scenario) -> Option<Limit> {
    let c = &s.carrier;
    let own = c.platform.profile().message_limit;
    let limit = match (own, c.message_rate_per_s, c.message_burst) {
        (_, Some(r), _) if r <= 0.0 => return None,
        (Some(l), r, b) => Limit {
            per_s: r.unwrap_or(l.per_s),
            burst: b.unwrap_or(l.burst),
        },
        (None, Some(r), b) => Limit {
            per_s: r,
            burst: b.unwrap_or(1),
        },
        (None, None, _) => return None,
    };
    Some(limit)
}

/// The names of a run: its agents, the operator and every name a script
/// uses; the groups' channels, the workload's channel and every scripted
/// destination; the scripted posts' labels (they are numbered first, in
/// script order: see `World::schedule_script`).
fn dense_names(
    ids: &[String],
    groups: &[GroupParams],
    channel: &str,
    script: &[ScriptEvent],
) -> Dense {
    let mut b = DenseBuilder::default();
    b.agent(super::OPERATOR).dest(channel);
    for a in ids {
        b.agent(a);
    }
    for c in groups.iter().flat_map(|g| &g.channels) {
        b.dest(c);
    }
    let posts = script.iter().filter_map(|e| e.post.as_ref());
    for (m, post) in posts.enumerate() {
        b.agent(&post.from).label(m as u32, &post.id);
        if let Some(to) = &post.to {
            b.dest(to);
        }
    }
    for e in script {
        if let Some(inf) = &e.infer {
            b.agent(&inf.agent);
        }
    }
    b.build()
}

/// The id of a name [`dense_names`] interned.
fn agent_of(names: &Dense, name: &str) -> AgentId {
    names.agent(name).unwrap_or(AgentId(u32::MAX))
}

/// The id of a destination [`dense_names`] interned.
fn dest_of(names: &Dense, text: &str) -> DestId {
    names.dest(text).unwrap_or(DestId(u32::MAX))
}

/// Component stream `stream` of replication `seed` ([`crate::dist::stream`]):
/// 1 the workload, 2 the server side (processing, disconnect detection,
/// restarts), 3 the sweep phase, `16 + 4 i` agent `i` and `+1`/`+2` its up-
/// and downlink.
pub(super) use crate::dist::stream;

/// The first component stream of agent `i` (see [`stream`]).
pub(super) fn agent_stream(i: usize) -> u64 {
    16 + 4 * i as u64
}

/// The selector's first component stream (`+1`/`+2` its links): far above
/// every agent's, so that adding the selector moves no other draw.
pub(super) const SELECTOR_STREAM: u64 = 1 << 40;

/// The selector's wire id.
pub const SELECTOR: &str = "selector";
