//! Every estimate calibrate makes from a member's view, with its interval
//! and the samples behind it (docs/observe.md, "The estimators").
//!
//! Times: the view is in the log's clock; every duration here is converted
//! to scenario time (times `speed`) after the links are removed. A claim's
//! start (its `started_at` less its agent's offset, or its arrival) is the
//! true start plus about one one-way delay L; the question reaches an
//! agent L after the server has it. So the wait an agent drew is
//! start - question - 2L, and its inference answer - start (the answer's
//! own uplink cancels the start's).

use super::read::{Clock, Log};
use super::stats::{self, LogNormal};
use super::view::{Announce, View};
use super::window::{self, Opp, Set};
use crate::floor::PolicyKind;
use std::collections::BTreeMap;

/// agentchat 0.36's expiry sweep period, ms of the server's time: an
/// expired claim keeps blocking until the sweep after its deadline.
pub const SWEEP_MS: f64 = 5000.0;

/// Significance level of the goodness-of-fit and grouping tests.
pub const ALPHA: f64 = 0.01;

/// Fewest samples a goodness-of-fit test or an empirical distribution needs.
pub const MIN_SAMPLES: usize = 8;

/// What calibrate was told.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Scenario time per unit of the log's time (`--speed`).
    pub speed: f64,
    /// One-way link delay between the agents and the server, log ms
    /// (`--link-ms`); None: half the observer's shortest round trip, else 0.
    pub link_ms: Option<f64>,
    /// The server's claim TTL, log ms (`--ttl-ms`).
    pub ttl_ms: f64,
    /// The agents' CSMA window when known (`--csma-ms`), log ms.
    pub csma_ms: Option<(f64, f64)>,
    /// The server's policy (`--policy`); None: read from the wire.
    pub policy: Option<PolicyKind>,
    /// Seed of the Monte Carlo tests.
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            speed: 1.0,
            link_ms: None,
            ttl_ms: 45_000.0,
            csma_ms: None,
            policy: None,
            seed: 1,
        }
    }
}

/// How the arrivals of questions are modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalModel {
    Poisson,
    Fixed,
    Empirical,
}

/// The arrival process of questions.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrivals {
    pub questions: usize,
    /// Gaps between consecutive questions, scenario ms, in time order.
    pub gaps: Vec<f64>,
    pub mean_gap: f64,
    pub mean_gap_ci: (f64, f64),
    /// Questions per hour, and its interval.
    pub rate_per_h: f64,
    pub rate_ci: (f64, f64),
    /// Coefficient of variation of the gaps (1 for Poisson, 0 for fixed).
    pub cv: f64,
    /// Lilliefors: D and the Monte Carlo p-value.
    pub ks_d: f64,
    pub ks_p: f64,
    pub model: ArrivalModel,
}

/// How a distribution is written into the scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    Uniform {
        min: f64,
        max: f64,
    },
    Lognormal {
        p50: f64,
        p99: f64,
    },
    Fixed {
        ms: f64,
    },
    /// The values as an empirical CSV (the parametric fit was rejected).
    Empirical {
        values: Vec<f64>,
    },
}

/// The inference time of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct Inference {
    /// Answer minus start, scenario ms (claims answered by their claimant).
    pub observed: Vec<f64>,
    /// Still running when the log ended: known to exceed these.
    pub censored: Vec<f64>,
    pub fit: Option<LogNormal>,
    pub p50_ci: (f64, f64),
    pub p99_ci: (f64, f64),
    /// Lilliefors on the logs of the observed values.
    pub ks_d: f64,
    pub ks_p: f64,
    pub written: Written,
}

/// The wait before starting and respond_p of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub opps: Vec<Opp>,
    pub fit: Option<window::Fit>,
    /// The waits members saw (claims), scenario ms, sorted.
    pub visible: Vec<f64>,
    /// KS of the first claims' probability-integral transforms under the
    /// fitted windows (see [`FirstClaims`]); under `none`, of the answers'
    /// (uncensored) times. Standard critical values with fitted
    /// parameters: conservative.
    pub ks_d: f64,
    pub ks_p: f64,
    pub written: Written,
}

/// The first claim of every complete question, against the distribution
/// the fitted windows give it. Each claim members see is the earliest of
/// the wanting agents' waits or close behind it, never a draw from the
/// window itself: the waits seen are a biased sample of the window, and a
/// test of them against it rejects a true uniform. The first claim's wait
/// has a closed form, P(T1 <= t | a claim) = (1 - prod_a (1 - p_a F_a(t))) /
/// (1 - prod_a (1 - p_a)) over the agents present for the question, and
/// under agentchat the first claim is the one granted: always seen.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FirstClaims {
    /// First-claim waits, scenario ms, sorted.
    pub waits: Vec<f64>,
    /// The fitted distribution of the first claim's wait, averaged over
    /// the questions: (ms, share at or below).
    pub cdf: Vec<(f64, f64)>,
    pub ks_d: f64,
    pub ks_p: f64,
}

/// One group of agents that behave alike.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub agents: Vec<usize>,
    pub wait: Wait,
    /// respond_p and its interval (the window fit's, or under `none` the
    /// share of opportunities answered).
    pub respond_p: f64,
    pub respond_ci: (f64, f64),
    pub inference: Inference,
    /// Questions this group's agent claimed first and nobody answered
    /// (complete questions), of those it claimed first: hangs or crashes.
    pub hangs: u64,
    pub held: u64,
}

/// What one agent did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentStats {
    pub opps: u64,
    pub claims: u64,
    pub answers: u64,
    pub first_claims: u64,
    pub inference: Vec<f64>,
}

/// The outcome members saw, over the complete questions someone wanted.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub wanted: u64,
    pub duplicated: u64,
    pub unanswered: u64,
    pub dup_ci: (f64, f64),
    pub unans_ci: (f64, f64),
    /// Times to first answer, scenario ms, sorted.
    pub ttfr: Vec<f64>,
    pub p50: f64,
    pub p50_ci: (f64, f64),
    pub p95: f64,
    pub p95_ci: (f64, f64),
    /// Questions left open at the end of the log (not in these figures).
    pub open: u64,
    /// Questions nobody claimed or answered.
    pub ignored: u64,
}

/// The agents' clocks relative to each other.
#[derive(Debug, Clone, PartialEq)]
pub struct Skew {
    pub sd: f64,
    pub ci: (f64, f64),
    /// Agent offsets behind it.
    pub n: usize,
}

/// A whole calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub settings: Settings,
    pub policy: PolicyKind,
    /// Where the policy came from.
    pub policy_from_wire: bool,
    /// Nobody claimed on the wire (an export, policy `none`): an answer's
    /// time is all there is, and nothing is said of claims.
    pub no_claims: bool,
    /// One-way link, log ms, and where it came from.
    pub link_ms: f64,
    pub link_source: &'static str,
    /// The link's jitter (mean of the exponential part), log ms.
    pub jitter_ms: f64,
    pub arrivals: Option<Arrivals>,
    pub groups: Vec<Group>,
    pub agents: Vec<AgentStats>,
    pub skew: Option<Skew>,
    pub outcome: Outcome,
    pub mention_p: f64,
    pub mention_ci: (f64, f64),
    /// The first claims against the fitted windows (empty under `none`).
    pub first_claims: FirstClaims,
    /// Lines for the report: what was censored, what is biased, what was
    /// not estimated.
    pub notes: Vec<String>,
}

/// Calibrate from a view of `log`.
pub fn calibrate(log: &Log, view: &mut View, settings: &Settings) -> Calibration {
    view.choose_starts(log.clock == Clock::Server);
    let mut notes = Vec::new();
    let (link_ms, link_source, jitter_ms) = match settings.link_ms {
        Some(l) => (l, "--link-ms", 0.0),
        None if !log.rtt_ms.is_empty() => {
            let min = log.rtt_ms.iter().copied().fold(f64::INFINITY, f64::min);
            let mean = log.rtt_ms.iter().sum::<f64>() / log.rtt_ms.len() as f64;
            (
                min / 2.0,
                "half the observer's shortest round trip",
                (mean - min) / 2.0,
            )
        }
        None => {
            notes.push(
                "the link delay is taken as 0 (no round trips in the log; give --link-ms): the \
                 fitted waits include the two one-way delays"
                    .to_string(),
            );
            (0.0, "assumed (no round trips measured)", 0.0)
        }
    };
    let (policy, policy_from_wire) = match settings.policy {
        Some(p) => (p, false),
        None => (
            match view.announce {
                Announce::Granted => PolicyKind::Agentchat036,
                Announce::Relayed => PolicyKind::Spec,
                Announce::Nothing => PolicyKind::None,
            },
            true,
        ),
    };
    if view.mixed_announce {
        notes.push(
            "the log holds both relayed claims and FLOOR_CLAIMED grants: read as the more frequent"
                .to_string(),
        );
    }
    let speed = settings.speed;
    let l = link_ms;
    let ttl = settings.ttl_ms;
    let no_claims = view.announce == Announce::Nothing;
    // Opportunities and per-agent figures.
    let n = view.agents.len();
    let mut opps: Vec<Vec<Opp>> = vec![Vec::new(); n];
    let mut agents = vec![AgentStats::default(); n];
    let mut censored_inf: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut first_holder: Vec<(usize, bool)> = Vec::new();
    // Per complete question with a claim: the first claim's wait and the
    // agents that had the opportunity.
    let mut firsts: Vec<(f64, Vec<usize>)> = Vec::new();
    for q in &view.questions {
        if q.mention {
            continue;
        }
        // The wait of a claim, scenario ms.
        let wait_of =
            |c: &super::view::Claim| ((view.start_of(c) - q.t - 2.0 * l) * speed).max(0.0);
        let first_answer = || {
            q.answers
                .iter()
                .map(|a| (a.t - q.t) * speed)
                .fold(f64::INFINITY, f64::min)
        };
        if !q.open
            && let Some(first) = q
                .claims
                .iter()
                .min_by(|a, b| view.start_of(a).total_cmp(&view.start_of(b)))
        {
            first_holder.push((first.agent, q.answers.is_empty()));
        }
        // Each agent's earliest claim and first answer on this question,
        // in one pass over them (not one per agent).
        let mut own_of: BTreeMap<usize, &super::view::Claim> = BTreeMap::new();
        for c in &q.claims {
            own_of
                .entry(c.agent)
                .and_modify(|o| {
                    if view.start_of(c).total_cmp(&view.start_of(o)).is_lt() {
                        *o = c;
                    }
                })
                .or_insert(c);
        }
        let mut answer_of: BTreeMap<usize, &super::view::Answer> = BTreeMap::new();
        for x in &q.answers {
            answer_of.entry(x.agent).or_insert(x);
        }
        // The blocked set of an agent that neither claimed nor answered:
        // every claim and the first answer; one set that all such agents
        // share.
        let mut idle: Option<Set> = None;
        let mut present = Vec::new();
        for a in 0..n {
            let own = own_of.get(&a).copied();
            let answered = answer_of.get(&a).copied();
            let acted = own.is_some() || answered.is_some();
            if !acted && !view.is_present(a, q.t) {
                continue;
            }
            if let (Some(c), Some(ans)) = (own, answered) {
                agents[a]
                    .inference
                    .push(((ans.t - view.start_of(c)) * speed).max(0.0));
            } else if let (Some(c), None, true) = (own, answered, q.open) {
                censored_inf[a].push(((view.end_t - view.start_of(c)) * speed).max(0.0));
            }
            if q.open {
                continue;
            }
            agents[a].opps += 1;
            present.push(a);
            agents[a].claims += u64::from(own.is_some());
            agents[a].answers += u64::from(answered.is_some());
            if no_claims {
                // Under `none` the answer is the only event: its time from
                // the question is the wait and the inference together.
                match answered {
                    Some(x) => opps[a].push(Opp::Claimed {
                        w: ((x.t - q.t - 2.0 * l) * speed).max(0.0),
                    }),
                    None => opps[a].push(Opp::NotClaimed {
                        blocked: Set::default(),
                    }),
                }
                continue;
            }
            match (own, answered) {
                (Some(c), _) => opps[a].push(Opp::Claimed { w: wait_of(c) }),
                (None, Some(_)) => opps[a].push(Opp::Wanted),
                (None, None) => {
                    // The blocked set from the others' claims (all of
                    // them: this agent made none) and the first answer.
                    let blocked = idle.get_or_insert_with(|| {
                        let mut parts = Vec::with_capacity(q.claims.len() + 1);
                        for c in &q.claims {
                            let w = wait_of(c);
                            let (lo, hi) = if c.granted {
                                // A later start is denied unseen until the
                                // claim is known, then the claim blocks
                                // until it is gone: agentchat removes an
                                // expired claim only at its next sweep
                                // (every SWEEP_MS; its phase is not on the
                                // wire, so up to a whole period after the
                                // deadline).
                                (w, w + (2.0 * l + ttl + SWEEP_MS) * speed)
                            } else {
                                (w + 2.0 * l * speed, w + (2.0 * l + ttl) * speed)
                            };
                            parts.push((lo, hi));
                        }
                        let fa = first_answer();
                        if fa.is_finite() {
                            parts.push((fa, f64::INFINITY));
                        }
                        Set::union(parts)
                    });
                    opps[a].push(Opp::NotClaimed {
                        blocked: blocked.clone(),
                    });
                }
            }
        }
        if !q.open && !no_claims {
            let t1 = q.claims.iter().map(wait_of).fold(f64::INFINITY, f64::min);
            if t1.is_finite() && !present.is_empty() {
                firsts.push((t1, present));
            }
        }
    }
    for (a, _) in &first_holder {
        agents[*a].first_claims += 1;
    }
    // Groups: agents that behave alike, by greedy merging.
    let members = group(&agents, settings.seed);
    let mut groups = Vec::new();
    for g in members {
        let gopps: Vec<Opp> = g.iter().flat_map(|&a| opps[a].iter().cloned()).collect();
        let obs: Vec<f64> = g
            .iter()
            .flat_map(|&a| agents[a].inference.iter().copied())
            .collect();
        let cen: Vec<f64> = g
            .iter()
            .flat_map(|&a| censored_inf[a].iter().copied())
            .collect();
        let hangs = first_holder
            .iter()
            .filter(|(a, h)| g.contains(a) && *h)
            .count() as u64;
        let held = first_holder.iter().filter(|(a, _)| g.contains(a)).count() as u64;
        let label = format!("group-{}", groups.len());
        let (wait, respond_p, respond_ci, inference) = if no_claims {
            let x = gopps
                .iter()
                .filter(|o| matches!(o, Opp::Claimed { .. }))
                .count();
            let p = if gopps.is_empty() {
                0.0
            } else {
                x as f64 / gopps.len() as f64
            };
            let ci = stats::wilson(x as u64, gopps.len() as u64);
            // The answer time is all inference (csma 0): see the notes.
            let resp: Vec<f64> = gopps
                .iter()
                .filter_map(|o| match o {
                    Opp::Claimed { w, .. } => Some(*w),
                    _ => None,
                })
                .collect();
            let inf = inference_of(resp, cen, settings.seed, &label);
            let wait = Wait {
                opps: gopps,
                fit: None,
                visible: Vec::new(),
                ks_d: f64::NAN,
                ks_p: f64::NAN,
                written: Written::Fixed { ms: 0.0 },
            };
            (wait, p, ci, inf)
        } else {
            let pinned = settings.csma_ms.map(|(a, b)| (a * speed, b * speed));
            let wait = wait_of_group(gopps, pinned);
            let (p, ci) = wait
                .fit
                .as_ref()
                .map_or((0.0, (0.0, 1.0)), |f| (f.p, f.p_ci));
            let inf = inference_of(obs, cen, settings.seed, &label);
            (wait, p, ci, inf)
        };
        groups.push(Group {
            agents: g,
            wait,
            respond_p,
            respond_ci,
            inference,
            hangs,
            held,
        });
    }
    let first_claims = first_claims_of(&firsts, &groups, n);
    if !no_claims {
        for g in &mut groups {
            g.wait.ks_d = first_claims.ks_d;
            g.wait.ks_p = first_claims.ks_p;
        }
        if first_claims.ks_p < ALPHA {
            notes.push(format!(
                "the first claims do not follow the fitted uniform windows (KS p = {:.3}): the \
                 agents' wait is not uniform, or not alike within a group; the scenario keeps the \
                 uniform fit, since the waits seen are the earliest of several and cannot stand \
                 in for the window, and the predicted TTFR may be off",
                first_claims.ks_p
            ));
        }
    }
    let arrivals = arrivals_of(view, speed, settings.seed);
    let skew = skew_of(view, speed);
    let outcome = outcome_of(view, speed);
    let asked = view.questions.len();
    let mentions = view.questions.iter().filter(|q| q.mention).count();
    let mention_p = if asked == 0 {
        0.0
    } else {
        mentions as f64 / asked as f64
    };
    notes.extend(censoring_notes(view, policy, no_claims, settings, &groups));
    Calibration {
        settings: settings.clone(),
        policy,
        policy_from_wire,
        no_claims,
        link_ms,
        link_source,
        jitter_ms,
        arrivals,
        groups,
        agents,
        skew,
        outcome,
        mention_p,
        mention_ci: stats::wilson(mentions as u64, asked as u64),
        first_claims,
        notes,
    }
}

/// The first claims against the fitted windows ([`FirstClaims`]).
fn first_claims_of(firsts: &[(f64, Vec<usize>)], groups: &[Group], n: usize) -> FirstClaims {
    // Each agent's (p, min, max), where its group has a fitted window.
    let mut model: Vec<Option<(f64, f64, f64)>> = vec![None; n];
    for g in groups {
        if let Some(f) = &g.wait.fit {
            for &a in &g.agents {
                model[a] = Some((f.p, f.min, f.max));
            }
        }
    }
    first_claims_under(firsts, &model)
}

/// The first claims against each agent's (p, min, max) in `model`.
fn first_claims_under(
    firsts: &[(f64, Vec<usize>)],
    model: &[Option<(f64, f64, f64)>],
) -> FirstClaims {
    let survive = |t: f64, present: &[usize]| -> (f64, f64) {
        let (mut s, mut s0) = (1.0, 1.0);
        for &a in present {
            if let Some((p, lo, hi)) = model[a] {
                let w = (hi - lo).max(window::MIN_WIDTH);
                s *= 1.0 - p * ((t - lo) / w).clamp(0.0, 1.0);
                s0 *= 1.0 - p;
            }
        }
        (s, s0)
    };
    let cdf_at = |t: f64, present: &[usize]| -> f64 {
        let (s, s0) = survive(t, present);
        if s0 >= 1.0 {
            f64::NAN
        } else {
            ((1.0 - s) / (1.0 - s0)).clamp(0.0, 1.0)
        }
    };
    let mut u: Vec<f64> = firsts
        .iter()
        .map(|(t, present)| cdf_at(*t, present))
        .filter(|x| x.is_finite())
        .collect();
    u.sort_by(f64::total_cmp);
    let mut waits: Vec<f64> = firsts.iter().map(|f| f.0).collect();
    waits.sort_by(f64::total_cmp);
    let (mut ks_d, mut ks_p) = (f64::NAN, f64::NAN);
    if u.len() >= MIN_SAMPLES {
        ks_d = stats::ks_distance(&u, |x| x);
        ks_p = stats::kolmogorov_p(ks_d, u.len() as f64);
    }
    let hi = model
        .iter()
        .flatten()
        .map(|m| m.2)
        .fold(waits.last().copied().unwrap_or(0.0), f64::max)
        * 1.05;
    let cdf = if firsts.is_empty() || hi <= 0.0 {
        Vec::new()
    } else {
        (0..=300)
            .map(|i| {
                let x = hi * i as f64 / 300.0;
                let vals: Vec<f64> = firsts
                    .iter()
                    .map(|(_, present)| cdf_at(x, present))
                    .filter(|v| v.is_finite())
                    .collect();
                let m = if vals.is_empty() {
                    f64::NAN
                } else {
                    vals.iter().sum::<f64>() / vals.len() as f64
                };
                (x, m)
            })
            .collect()
    };
    FirstClaims {
        waits,
        cdf,
        ks_d,
        ks_p,
    }
}

/// Greedy grouping: agents in order; each joins the first group it does
/// not differ from (its claims per opportunity by a two-proportion test,
/// its inference times by a two-sample KS test when both sides have
/// MIN_SAMPLES), else starts a new one. The level is ALPHA split over the
/// tests (Bonferroni), so identical agents are split with probability
/// below ALPHA.
fn group(agents: &[AgentStats], _seed: u64) -> Vec<Vec<usize>> {
    let n = agents.len();
    let tests = (2 * n.saturating_sub(1) * n.max(1) / 2).max(1) as f64;
    let level = ALPHA / tests;
    let mut groups: Vec<Vec<usize>> = Vec::new();
    // Per group, kept as it grows: (acted, opportunities) and the
    // members' inference times, so that an agent is tested against a
    // group without going over its members again.
    let mut totals: Vec<(u64, u64)> = Vec::new();
    let mut theirs: Vec<Vec<f64>> = Vec::new();
    let acted = |s: &AgentStats| s.claims + s.answers.saturating_sub(s.claims);
    for (a, me) in agents.iter().enumerate() {
        let mine = acted(me);
        let fits = |i: &usize| -> bool {
            let (x, m) = totals[*i];
            let (_, p) = crate::metrics::stats::two_proportion(
                mine as f64,
                me.opps as f64,
                x as f64,
                m as f64,
            );
            if p.is_finite() && p < level {
                return false;
            }
            let theirs = &theirs[*i];
            if me.inference.len() >= MIN_SAMPLES && theirs.len() >= MIN_SAMPLES {
                let (_, p) = stats::ks_two_sample(&me.inference, theirs);
                if p.is_finite() && p < level {
                    return false;
                }
            }
            true
        };
        let i = match (0..groups.len()).find(fits) {
            Some(i) => i,
            None => {
                groups.push(Vec::new());
                totals.push((0, 0));
                theirs.push(Vec::new());
                groups.len() - 1
            }
        };
        groups[i].push(a);
        totals[i].0 += mine;
        totals[i].1 += me.opps;
        theirs[i].extend(me.inference.iter().copied());
    }
    groups
}

fn wait_of_group(opps: Vec<Opp>, pinned: Option<(f64, f64)>) -> Wait {
    let mut visible: Vec<f64> = opps
        .iter()
        .filter_map(|o| match o {
            Opp::Claimed { w, .. } => Some(*w),
            _ => None,
        })
        .collect();
    visible.sort_by(f64::total_cmp);
    let fit = window::fit(&opps, pinned);
    // The test of the window is the first claims' (calibrate sets it): a
    // claim's wait is not a draw from the window (it is the earliest of
    // several), so a rejection is not read as a shape, and the window
    // stays uniform.
    let (ks_d, ks_p) = (f64::NAN, f64::NAN);
    let written = match &fit {
        None => Written::Fixed { ms: 0.0 },
        Some(f) => Written::Uniform {
            min: f.min,
            max: f.max,
        },
    };
    Wait {
        opps,
        fit,
        visible,
        ks_d,
        ks_p,
        written,
    }
}

/// Fit the inference times; intervals of p50 and p99 from the fit's
/// asymptotic normal distribution (delta method on (mu, sigma), sandwich
/// covariance: [`stats::lognormal_quantile_ci`]), over the samples
/// observed and censored alike.
fn inference_of(mut observed: Vec<f64>, censored: Vec<f64>, seed: u64, label: &str) -> Inference {
    observed.sort_by(f64::total_cmp);
    let ys: Vec<f64> = observed.iter().map(|&x| stats::log_ms(x)).collect();
    let cs: Vec<f64> = censored.iter().map(|&x| stats::log_ms(x)).collect();
    let fit = stats::lognormal_fit_logs(&ys, &cs);
    let (mut ks_d, mut ks_p) = (f64::NAN, f64::NAN);
    let (mut p50_ci, mut p99_ci) = ((f64::NAN, f64::NAN), (f64::NAN, f64::NAN));
    if let Some(f) = fit {
        p50_ci = stats::lognormal_quantile_ci(&ys, &cs, f, 0.5);
        p99_ci = stats::lognormal_quantile_ci(&ys, &cs, f, 0.99);
        if observed.len() >= MIN_SAMPLES {
            // The observed values' logs (log_ms is x.max(1e-3).ln()).
            let (d, p) = stats::lilliefors_normal(
                &ys,
                &mut stats::rng(seed, &format!("{label}/lilliefors")),
            );
            ks_d = d;
            ks_p = p;
        }
    }
    let written = match fit {
        _ if ks_p < ALPHA && observed.len() >= MIN_SAMPLES => Written::Empirical {
            values: observed.clone(),
        },
        Some(f) if f.sigma > 0.0 => Written::Lognormal {
            p50: f.quantile(0.5),
            p99: f.quantile(0.99),
        },
        Some(f) => Written::Fixed {
            ms: f.quantile(0.5),
        },
        None => match observed.first() {
            Some(&x) => Written::Fixed { ms: x },
            None => Written::Fixed { ms: 0.0 },
        },
    };
    Inference {
        observed,
        censored,
        fit,
        p50_ci,
        p99_ci,
        ks_d,
        ks_p,
        written,
    }
}

/// The gaps between questions: Poisson if Lilliefors' test does not reject
/// exponential gaps, fixed if their spread is under 10% of their mean, else
/// the gaps themselves.
fn arrivals_of(view: &View, speed: f64, seed: u64) -> Option<Arrivals> {
    let mut ts: Vec<f64> = view.questions.iter().map(|q| q.t).collect();
    ts.sort_by(f64::total_cmp);
    if ts.len() < 3 {
        return None;
    }
    let gaps: Vec<f64> = ts.windows(2).map(|w| (w[1] - w[0]) * speed).collect();
    let k = gaps.len();
    let sum: f64 = gaps.iter().sum();
    let (mean, sd) = stats::mean_sd(&gaps);
    let cv = if mean > 0.0 { sd / mean } else { f64::NAN };
    let (ks_d, ks_p) = stats::lilliefors_exp(&gaps, &mut stats::rng(seed, "arrivals"));
    let model = if ks_p >= ALPHA {
        ArrivalModel::Poisson
    } else if cv < 0.1 {
        ArrivalModel::Fixed
    } else {
        ArrivalModel::Empirical
    };
    let ci = match model {
        ArrivalModel::Poisson => stats::exp_mean_ci(sum, k),
        // A mean of positive gaps: its interval stays above 0.
        _ => stats::floor_mean_ci(mean, sd, k, 0.0),
    };
    let per_h = |g: f64| if g > 0.0 { 3.6e6 / g } else { f64::INFINITY };
    Some(Arrivals {
        questions: ts.len(),
        gaps,
        mean_gap: mean,
        mean_gap_ci: ci,
        rate_per_h: per_h(mean),
        rate_ci: (per_h(ci.1), per_h(ci.0)),
        cv,
        ks_d,
        ks_p,
        model,
    })
}

/// The sd of the agents' clock offsets about each other (scenario ms):
/// offsets of the k-th piece of every agent's clock taken together, each
/// about its median (herdsim's agents set their clocks anew in each
/// replication); None under two steady clocks or pieces that do not line
/// up.
fn skew_of(view: &View, speed: f64) -> Option<Skew> {
    let clocks: Vec<_> = view
        .clocks
        .iter()
        .flatten()
        .filter(|c| c.steady && c.use_stamp)
        .collect();
    if clocks.len() < 2 {
        return None;
    }
    let pieces = clocks[0].pieces.len();
    if clocks.iter().any(|c| c.pieces.len() != pieces) {
        return None;
    }
    let mut dev = Vec::new();
    for k in 0..pieces {
        let mut th: Vec<f64> = clocks.iter().map(|c| c.pieces[k].1).collect();
        th.sort_by(f64::total_cmp);
        let med = stats::quantile(&th, 0.5);
        dev.extend(th.iter().map(|x| (x - med) * speed));
    }
    let dof = dev.len().saturating_sub(pieces);
    if dof < 1 {
        return None;
    }
    let sd = (dev.iter().map(|x| x * x).sum::<f64>() / dof as f64).sqrt();
    Some(Skew {
        sd,
        ci: stats::sd_ci(sd, dof + 1),
        n: dev.len(),
    })
}

/// What members saw of the outcome, over complete questions someone
/// wanted (claimed or answered).
fn outcome_of(view: &View, speed: f64) -> Outcome {
    let complete: Vec<_> = view.questions.iter().filter(|q| !q.open).collect();
    let wanted: Vec<_> = complete.iter().filter(|q| q.wanted()).collect();
    let w = wanted.len() as u64;
    // Two distinct agents answered (one agent's several messages are one
    // answer).
    let duplicated = wanted.iter().filter(|q| q.duplicated()).count() as u64;
    let unanswered = wanted.iter().filter(|q| q.answers.is_empty()).count() as u64;
    let mut ttfr: Vec<f64> = wanted
        .iter()
        .filter_map(|q| q.ttfr())
        .map(|t| t * speed)
        .collect();
    ttfr.sort_by(f64::total_cmp);
    Outcome {
        wanted: w,
        duplicated,
        unanswered,
        dup_ci: stats::wilson(duplicated, w),
        unans_ci: stats::wilson(unanswered, w),
        p50: stats::quantile(&ttfr, 0.5),
        p50_ci: stats::quantile_ci(&ttfr, 0.5),
        p95: stats::quantile(&ttfr, 0.95),
        p95_ci: stats::quantile_ci(&ttfr, 0.95),
        ttfr,
        open: (view.questions.len() - complete.len()) as u64,
        ignored: (complete.len() - wanted.len()) as u64,
    }
}

/// What the member could not see, and what that does to the estimates.
fn censoring_notes(
    view: &View,
    policy: PolicyKind,
    no_claims: bool,
    settings: &Settings,
    groups: &[Group],
) -> Vec<String> {
    let mut n = Vec::new();
    if no_claims {
        n.push(
            "no claims on the wire (policy none): an answer's time is the wait and the inference \
             together, which a member cannot separate; the scenario puts it all in `inference` \
             with no CSMA wait, and respond_p is the share of agents that answered (biased low \
             if agents skip a question once they see an answer)"
                .into(),
        );
    } else if policy == PolicyKind::Agentchat036 {
        n.push(
            "only granted claims are announced (FLOOR_CLAIMED): a claim that lost the race is \
             never seen, so its wait and inference are unknown; the wait fit counts such an \
             agent among those that waited past the winner's start"
                .into(),
        );
    } else {
        n.push(
            "every claim is relayed, denied ones too; agents that saw a claim before their wait \
             ended skipped and are not seen: the wait fit counts them among those that waited \
             past it"
                .into(),
        );
    }
    if !no_claims {
        n.push(
            "inference is measured only for claims their claimant answered; a claimant that \
             lost and aborted shows none (its inference is independent of losing, so the \
             winners' are an unbiased sample)"
                .into(),
        );
        if groups
            .iter()
            .any(|g| g.wait.fit.as_ref().is_some_and(|f| f.ridge))
        {
            n.push(
                "the window's upper end and respond_p trade off along a ridge: agents that \
                 defer to the first claim hide how late they would have started. Their \
                 intervals are long; the rate p / (max - min) is what the data fix. If you \
                 know your agents' window, give it (--csma-ms MIN..MAX)"
                    .into(),
            );
        }
    }
    if settings.csma_ms.is_some() {
        n.push("the CSMA window was given (--csma-ms), not fitted".into());
    }
    if view.clocks.iter().flatten().any(|c| !c.steady) {
        n.push(
            "some agents' started_at does not keep the server's time (it runs at another rate, \
             or jumps): their starts are read from their claims' arrival instead (biased by the \
             uplink's jitter)"
                .into(),
        );
    }
    if view.cascade_replies > 0 {
        n.push(format!(
            "{} replies to replies (cascades) are not fitted (workload.reply_to_agent_p stays 0)",
            view.cascade_replies
        ));
    }
    if groups.iter().any(|g| !g.inference.censored.is_empty()) {
        n.push("inferences still running when the log ended are right-censored in the fit".into());
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_keeps_alike_agents_together_and_splits_others() {
        let mut r = stats::rng(1, "group");
        use rand::RngExt;
        let mk = |r: &mut rand_chacha::ChaCha8Rng, p: f64, scale: f64| AgentStats {
            opps: 400,
            claims: (0..400).filter(|_| r.random::<f64>() < p).count() as u64,
            answers: 0,
            first_claims: 0,
            inference: (0..60).map(|_| scale * (1.0 + r.random::<f64>())).collect(),
        };
        let alike: Vec<AgentStats> = (0..5).map(|_| mk(&mut r, 0.3, 1000.0)).collect();
        assert_eq!(group(&alike, 1), vec![vec![0, 1, 2, 3, 4]]);
        let mut mixed = alike.clone();
        mixed.push(mk(&mut r, 0.3, 3000.0));
        mixed.push(mk(&mut r, 0.8, 1000.0));
        assert_eq!(
            group(&mixed, 1),
            vec![vec![0, 1, 2, 3, 4], vec![5], vec![6]]
        );
    }

    /// The first claim of each question (the earliest of the wanting
    /// agents' uniform waits) passes the test under the true window and
    /// fails under a wrong one, and a plain uniform test of the same waits
    /// (what a test of the waits seen against the window does) rejects
    /// the true window: the reason calibrate tests first claims.
    #[test]
    fn first_claims_test_the_window_where_the_seen_waits_cannot() {
        use rand::RngExt;
        let mut r = stats::rng(3, "first-claims");
        let (k, p, lo, hi) = (5usize, 0.6, 2000.0, 8000.0);
        let mut firsts = Vec::new();
        while firsts.len() < 1000 {
            let mut t = f64::INFINITY;
            for _ in 0..k {
                let wants = r.random::<f64>() < p;
                let w = lo + (hi - lo) * r.random::<f64>();
                if wants {
                    t = t.min(w);
                }
            }
            if t.is_finite() {
                firsts.push((t, (0..k).collect::<Vec<_>>()));
            }
        }
        let truth = vec![Some((p, lo, hi)); k];
        let fc = first_claims_under(&firsts, &truth);
        assert_eq!(fc.waits.len(), 1000);
        assert!(fc.ks_p > ALPHA, "true window rejected: p = {}", fc.ks_p);
        // The averaged curve is the closed form: at the window's middle,
        // (1 - (1 - p/2)^5) / (1 - 0.4^5).
        let mid = fc
            .cdf
            .iter()
            .min_by(|a, b| (a.0 - 5000.0).abs().total_cmp(&(b.0 - 5000.0).abs()));
        let (x, y) = mid.copied().unwrap_or_default();
        let want = (1.0 - (1.0 - p * (x - lo) / (hi - lo)).powi(5)) / (1.0 - 0.4_f64.powi(5));
        assert!((y - want).abs() < 1e-9, "{y} {want}");
        let narrow = vec![Some((p, lo, 5000.0)); k];
        assert!(first_claims_under(&firsts, &narrow).ks_p < ALPHA);
        let one = vec![Some((1.0, lo, hi)); 1];
        let seen: Vec<(f64, Vec<usize>)> = firsts.iter().map(|(t, _)| (*t, vec![0])).collect();
        assert!(first_claims_under(&seen, &one).ks_p < ALPHA);
    }
}
