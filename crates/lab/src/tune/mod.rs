//! `herdsim tune`: search the CSMA window and the claim TTL (and any other
//! numeric keys) for the settings that minimise a weighted sum of the
//! duplicate, wasted-inference and unanswered rates, subject to a budget on
//! the mean p95 time to first response.
//!
//! The method, in four steps, all on **common random numbers**: every
//! candidate runs replication `r` with the seed `sweep::rep_seed(master, 0,
//! r)`, so two candidates differ only by their settings, and they are
//! compared on per-replication (paired) differences.
//!
//! 1. **Current settings**: the scenario as it is, for reference (and as a
//!    candidate when its values lie in the searched ranges).
//! 2. **Grid**: a coarse full-factorial grid over the searched ranges
//!    (windows with min > max left out).
//! 3. **Refinement**: a compass (pattern) search from the best grid point:
//!    try one step up and down in every parameter, move to the best if it
//!    beats the incumbent, else halve the steps, down to the resolution of
//!    each parameter. On fixed seeds this is a deterministic search of the
//!    sample-average problem.
//! 4. **Duel**: while the best two feasible candidates are too close to
//!    call (the 95% CI of their paired objective difference includes 0),
//!    both get twice the replications, up to `max_reps`.
//!
//! Ranking: feasible (mean p95 within the budget) before infeasible; then
//! the mean objective (infeasible ones: the mean p95, so that a search that
//! starts outside the budget walks into it); then the mean p95; then the
//! distance to the scenario's own values (a parameter the objective cannot
//! see stays where the user had it); then evaluation order.
//!
//! Runs go to a rayon pool of `threads` threads in batches; results are
//! stored by (candidate, replication), and every decision depends on
//! results only, so the outcome is the same for any thread count.

pub mod report;
pub mod request;
pub mod schemes;
pub mod space;
pub mod stats;

use crate::agent::Scheme;
use crate::floor::PolicyKind;
use crate::metrics::stats::Summary;
use crate::metrics::{METRICS, RunResult};
use crate::model::Prepared;
use crate::progress::Observer;
use crate::scenario::Loaded;
use crate::sweep::{self, Job, rep_seed};
use space::Space;
use stats::Paired;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// Weights of the objective. Each rate is a fraction in 0..1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub duplicate: f64,
    pub wasted: f64,
    pub unanswered: f64,
}

impl Default for Weights {
    /// Equal weights: one duplicate answer, one wasted inference (as a share
    /// of inference time) and one unanswered message count the same.
    fn default() -> Self {
        Weights {
            duplicate: 1.0,
            wasted: 1.0,
            unanswered: 1.0,
        }
    }
}

/// The metrics the objective weighs, in [`Weights`] order.
pub const OBJECTIVE_METRICS: [&str; 3] =
    ["duplicate_rate", "wasted_inference_rate", "unanswered_rate"];

/// The latency metric the budget bounds.
pub const BUDGET_METRIC: &str = "ttfr_p95_ms";

fn metric_index(name: &str) -> usize {
    METRICS.iter().position(|m| *m == name).unwrap_or(0)
}

impl Weights {
    /// The objective of one replication.
    pub fn objective(&self, r: &RunResult) -> f64 {
        let v = |m: &str| r.values[metric_index(m)];
        self.duplicate * v(OBJECTIVE_METRICS[0])
            + self.wasted * v(OBJECTIVE_METRICS[1])
            + self.unanswered * v(OBJECTIVE_METRICS[2])
    }

    /// `1 x duplicate_rate + 0.5 x wasted_inference_rate + ...`, zero
    /// weights left out.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [self.duplicate, self.wasted, self.unanswered]
            .iter()
            .zip(OBJECTIVE_METRICS)
            .filter(|(w, _)| **w != 0.0)
            .map(|(w, m)| format!("{w} x {m}"))
            .collect();
        parts.join(" + ")
    }
}

/// How to tune.
#[derive(Debug, Clone)]
pub struct Settings {
    pub policy: PolicyKind,
    /// The policy the current settings run under: the scenario's own
    /// (`policies`: `policy` when the scenario lists it, else the first it
    /// lists). When it differs from `policy`, the current settings are a
    /// reference only, never recommended.
    pub current_policy: PolicyKind,
    /// Master seed: replication `r` of every candidate uses `rep_seed(seed, 0, r)`.
    pub seed: u64,
    /// Replications of every candidate.
    pub reps: u32,
    /// Most replications the duel may give the best two.
    pub max_reps: u32,
    /// Grid levels per searched parameter.
    pub levels: usize,
    pub weights: Weights,
    /// Bound on the mean `ttfr_p95_ms` (none: unconstrained).
    pub budget_ms: Option<f64>,
    pub threads: usize,
    /// Events one replication may hold pending (its share of the memory
    /// budget, [`crate::sweep::memory::Need::check`]); `usize::MAX`: no cap.
    pub max_pending: usize,
}

/// Where a candidate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The scenario's own settings.
    Current,
    Grid,
    Refine,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Current => "current",
            Source::Grid => "grid",
            Source::Refine => "refine",
        }
    }
}

/// One evaluated setting.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Evaluation order (0-based).
    pub id: usize,
    pub source: Source,
    /// One value per parameter of the space; `None` for current settings
    /// that the space cannot express (a non-uniform or per-group window).
    pub values: Option<Vec<f64>>,
    /// May be recommended (in the searched ranges).
    pub eligible: bool,
    /// One result per replication, in replication order.
    pub runs: Vec<RunResult>,
    /// The scheme it ran under, when `tune` searched across schemes
    /// (`--schemes`); `None` otherwise.
    pub scheme: Option<Scheme>,
    /// The policy it ran under when not the one searched
    /// ([`Settings::policy`]): the current settings of a scenario whose own
    /// policy is another ([`Settings::current_policy`]).
    pub own_policy: Option<PolicyKind>,
    prepared: Prepared,
}

impl Candidate {
    /// The policy it ran under, `searched` unless it has its own.
    pub fn policy(&self, searched: PolicyKind) -> PolicyKind {
        self.own_policy.unwrap_or(searched)
    }

    /// Replications run.
    pub fn reps(&self) -> usize {
        self.runs.len()
    }

    /// A metric's value in every replication.
    pub fn metric(&self, name: &str) -> Vec<f64> {
        let i = metric_index(name);
        self.runs.iter().map(|r| r.values[i]).collect()
    }

    /// A metric's mean and CI over replications (NaN values left out, as in
    /// `summary.csv`).
    pub fn summary(&self, name: &str) -> Summary {
        let xs: Vec<f64> = self
            .metric(name)
            .into_iter()
            .filter(|x| !x.is_nan())
            .collect();
        Summary::of(&xs)
    }

    /// The objective in every replication.
    pub fn objective(&self, w: &Weights) -> Vec<f64> {
        self.runs.iter().map(|r| w.objective(r)).collect()
    }

    /// The objective's mean and CI.
    pub fn objective_summary(&self, w: &Weights) -> Summary {
        Summary::of(&self.objective(w))
    }

    /// True when some replication answered something (has a time to first
    /// response): a candidate that answered nothing measured no latency,
    /// and is never feasible, with or without a budget.
    pub fn answered(&self) -> bool {
        self.metric(BUDGET_METRIC).iter().any(|x| x.is_finite())
    }

    /// Mean p95 within the budget (with no budget: answered anything).
    pub fn feasible(&self, budget: Option<f64>) -> bool {
        match budget {
            None => self.answered(),
            Some(b) => {
                let m = self.summary(BUDGET_METRIC).mean;
                m.is_finite() && m <= b
            }
        }
    }
}

/// Why tuning stopped: bad input (a flag, a parameter value the scenario
/// rejects: exit 2) or a failure; the error type of every sweep.
pub use crate::sweep::Error as TuneError;

/// The failure of a search that was told to stop.
pub const INTERRUPTED: &str =
    "interrupted: the search stopped before it finished; nothing was written";

/// Everything tuning found.
#[derive(Debug)]
pub struct Outcome {
    /// Every candidate, in evaluation order.
    pub candidates: Vec<Candidate>,
    /// The recommendation: the best feasible eligible candidate.
    pub chosen: Option<usize>,
    /// The best feasible candidate that is not a tie with the chosen one,
    /// and the paired objective difference chosen - runner-up on their
    /// common replications.
    pub runner_up: Option<(usize, Paired)>,
    /// Feasible candidates ranked between the chosen one and the runner-up:
    /// the same objective as the chosen one on every common replication
    /// (they lost on the tie-breaks: p95, then distance to the current
    /// settings).
    pub ties: Vec<usize>,
    /// The scenario's own settings.
    pub current: usize,
    /// Candidates by source.
    pub grid_count: usize,
    pub refine_count: usize,
    /// Replications evaluated (candidates x replications).
    pub runs: u64,
    /// Of those, simulated; the others were taken from a candidate that
    /// differs only in the claim TTL, in a replication in which no claim
    /// lived as long as either TTL (see docs/tune.md, "How it searches").
    pub simulated: u64,
}

impl Outcome {
    /// The candidate nearest to the budget when none meets it (lowest mean p95).
    pub fn fastest(&self) -> Option<usize> {
        self.candidates
            .iter()
            .filter(|c| c.eligible)
            .min_by(|a, b| {
                let (x, y) = (a.summary(BUDGET_METRIC).mean, b.summary(BUDGET_METRIC).mean);
                nan_last(x).total_cmp(&nan_last(y)).then(a.id.cmp(&b.id))
            })
            .map(|c| c.id)
    }
}

fn nan_last(x: f64) -> f64 {
    if x.is_nan() { f64::INFINITY } else { x }
}

/// Search `space` over `loaded` (the scenario with `--set` applied),
/// telling `obs` how far it is (in runs, against an estimate). When
/// `stop` is set no further replication starts and the search fails with
/// [`INTERRUPTED`] (a search cut short has no answer to give).
pub fn tune(
    loaded: &Loaded,
    space: &Space,
    s: &Settings,
    obs: &dyn Observer,
    stop: &AtomicBool,
) -> Result<Outcome, TuneError> {
    let pool = sweep::pool(s.threads).map_err(|m| TuneError::Failure(anyhow::anyhow!(m)))?;
    let mut t = Tuner {
        loaded,
        space,
        s,
        pool,
        obs,
        stop,
        length: 0,
        cands: Vec::new(),
        seen: BTreeMap::new(),
        runs: 0,
        simulated: 0,
        same_runs: BTreeMap::new(),
    };
    let result = t.search();
    obs.finish();
    result
}

/// About how many candidates the compass search adds: about `2 x free
/// dims` polls per round for `log2(grid spacing / step) + 3` rounds.
pub fn estimated_refine(space: &Space, levels: usize) -> u64 {
    let levels = levels.max(2) as f64;
    let (mut free, mut rounds) = (0u64, 0f64);
    for d in space.dims.iter().filter(|d| d.free()) {
        free += 1;
        let ratio = (d.hi - d.lo) / (levels - 1.0) / 2.0 / d.step.max(1e-12);
        rounds = rounds.max(ratio.max(1.0).log2() + 3.0);
    }
    2 * free * rounds.ceil() as u64
}

/// About how many runs the search takes: the current settings and the
/// grid of `grid` candidates at `reps`, the compass search
/// ([`estimated_refine`]) at `reps`, the best two doubled up to `max_reps`.
pub fn estimated_runs(space: &Space, s: &Settings, grid: usize) -> u64 {
    let reps = u64::from(s.reps);
    let refine = estimated_refine(space, s.levels);
    let duel = 2 * u64::from(s.max_reps.saturating_sub(s.reps));
    (1 + grid as u64 + refine) * reps + duel
}

struct Tuner<'a> {
    loaded: &'a Loaded,
    space: &'a Space,
    s: &'a Settings,
    pool: rayon::ThreadPool,
    obs: &'a dyn Observer,
    /// Set: start no further replication (the search then fails).
    stop: &'a AtomicBool,
    /// The length the progress meter was given (runs).
    length: u64,
    cands: Vec<Candidate>,
    /// Snapped values (as bits) -> candidate id.
    seen: BTreeMap<Vec<u64>, usize>,
    runs: u64,
    /// Of those, simulated (the others were taken from `same_runs`).
    simulated: u64,
    /// Replications no decision of which turned on a claim's TTL running
    /// out, by family (the candidate's values but the TTL) and
    /// replication: the least TTL from which the replication is the same
    /// (see [`crate::model::simulate_ttl`]) and its result.
    same_runs: BTreeMap<Family, Vec<(u64, RunResult)>>,
}

type RankKey = (u8, f64, f64, f64, usize);

/// A candidate's values but the TTL (as bits), and a replication.
type Family = (Vec<u64>, u32);

impl Tuner<'_> {
    fn search(&mut self) -> Result<Outcome, TuneError> {
        // 1. The scenario as it is.
        let current = self.add_current()?;
        // 2. The grid.
        self.grid(current)?;
        // 3. Compass search from the best.
        self.refine()?;
        // 4. The duel.
        let dueled = self.duel()?;
        let ranked = self.representatives(&dueled);
        let chosen = ranked.first().copied();
        let (mut ties, mut runner_up) = (Vec::new(), None);
        if let Some(a) = chosen {
            // Every feasible candidate tied with the chosen one, clones included.
            ties = self
                .ranked(true)
                .into_iter()
                .filter(|&b| b != a && self.tied(a, b))
                .collect();
            runner_up = ranked[1..]
                .iter()
                .find(|&&b| !self.tied(a, b))
                .map(|&b| (b, self.paired(a, b)));
            // The current settings on the recommendation's replications.
            let n = self.cands[a].reps() as u32;
            self.obs.message("current settings".into());
            self.ensure(&[current], n)?;
        }
        let count = |src: Source| self.cands.iter().filter(|c| c.source == src).count();
        Ok(Outcome {
            grid_count: count(Source::Grid),
            refine_count: count(Source::Refine),
            candidates: std::mem::take(&mut self.cands),
            chosen,
            runner_up,
            ties,
            current,
            runs: self.runs,
            simulated: self.simulated,
        })
    }

    /// The paired objective differences of `a` and `b`.
    fn paired(&self, a: usize, b: usize) -> Paired {
        Paired::of(
            &self.cands[a].objective(&self.s.weights),
            &self.cands[b].objective(&self.s.weights),
        )
    }

    /// Step 2: the current settings and the grid, at `reps` each.
    fn grid(&mut self, current: usize) -> Result<(), TuneError> {
        let grid = self.space.grid(self.s.levels);
        self.obs
            .message(format!("grid of {} candidates", grid.len()));
        // The bar's length is an estimate made now (the refinement and the
        // duel decide their own length as they go), so the ETA means
        // something from the start; it is raised only if the search outgrows it.
        self.length = self.estimated_runs(grid.len()).max(self.runs);
        self.obs.length(self.length);
        let mut batch = vec![current];
        for v in grid {
            batch.push(self.add(v, Source::Grid)?);
        }
        self.ensure(&batch, self.s.reps)
    }

    /// Step 3: a compass search from the best candidate so far.
    fn refine(&mut self) -> Result<(), TuneError> {
        let Some(mut inc) = self.ranked(false).first().copied() else {
            return Err(TuneError::Input(
                "no candidate in the searched ranges is a valid window (min <= max)".into(),
            ));
        };
        let free: Vec<usize> = (0..self.space.dims.len())
            .filter(|&d| self.space.dims[d].free())
            .collect();
        let levels = self.s.levels.max(2) as f64;
        let mut steps: Vec<u64> = self
            .space
            .dims
            .iter()
            .map(|d| {
                let spacing = (d.hi - d.lo) / (levels - 1.0);
                ((spacing / 2.0 / d.step).round() as u64).max(1)
            })
            .collect();
        for round in 1..=200 {
            let Some(base) = self.cands[inc].values.clone() else {
                break;
            };
            self.obs.message(format!("refining, round {round}"));
            let mut polls = Vec::new();
            for &d in &free {
                let dim = &self.space.dims[d];
                for sign in [-1.0, 1.0] {
                    let mut v = base.clone();
                    v[d] = dim.snap(base[d] + sign * steps[d] as f64 * dim.step);
                    if v[d] != base[d] && self.space.valid(&v) {
                        polls.push(self.add(v, Source::Refine)?);
                    }
                }
            }
            self.ensure(&polls, self.s.reps)?;
            let best = polls
                .iter()
                .copied()
                .min_by(|a, b| cmp_key(&self.key(*a), &self.key(*b)));
            match best {
                Some(b) if cmp_key(&self.key(b), &self.key(inc)) == Ordering::Less => inc = b,
                _ => {
                    if free.iter().all(|&d| steps[d] <= 1) {
                        break;
                    }
                    for &d in &free {
                        steps[d] = (steps[d] / 2).max(1);
                    }
                }
            }
        }
        Ok(())
    }

    /// Step 4: the best against the best candidate that is not an exact
    /// tie with it (a tie is the same objective on every common
    /// replication: more replications of it would be wasted), until the
    /// difference is resolved or `max_reps` is reached. Returns the
    /// candidates dueled.
    fn duel(&mut self) -> Result<Vec<usize>, TuneError> {
        self.obs.message("comparing the best two".into());
        // Candidates already given more replications stand for their clones
        // (tied on the clone's fewer replications): a clone is not extended
        // in turn.
        let mut dueled: Vec<usize> = Vec::new();
        loop {
            let ranked = self.representatives(&dueled);
            let Some(&a) = ranked.first() else { break };
            let Some(b) = ranked[1..].iter().copied().find(|&b| !self.tied(a, b)) else {
                break;
            };
            for id in [a, b] {
                if !dueled.contains(&id) {
                    dueled.push(id);
                }
            }
            let (na, nb) = (self.cands[a].reps(), self.cands[b].reps());
            let n = na.max(nb) as u32;
            if na != nb {
                self.ensure(&[a, b], n)?;
                continue;
            }
            if self.paired(a, b).resolved() || n >= self.s.max_reps {
                break;
            }
            self.ensure(&[a, b], (2 * n).min(self.s.max_reps))?;
        }
        Ok(dueled)
    }

    /// The scenario's own settings as candidate 0.
    fn add_current(&mut self) -> Result<usize, TuneError> {
        let scenario = self
            .loaded
            .base()
            .map_err(|e| TuneError::Input(e.to_string()))?;
        let mut prepared =
            Prepared::with_cache(&scenario, &self.loaded.base_dir, &self.loaded.data)
                .map_err(|e| TuneError::Input(format!("{}: {e}", self.loaded.file)))?;
        prepared.set_max_pending(self.s.max_pending);
        let values = self.space.current();
        // Under another policy than the one searched, the current settings
        // are the reference the recommendation is measured against, not a
        // point of the search.
        let own_policy = Some(self.s.current_policy).filter(|p| *p != self.s.policy);
        let eligible = own_policy.is_none()
            && values
                .as_ref()
                .is_some_and(|v| self.space.valid(v) && self.space.contains(v));
        let id = self.cands.len();
        if let Some(v) = values.as_ref().filter(|_| own_policy.is_none()) {
            // Only an exact match on the lattice is the same candidate.
            if self.space.snap(v) == *v {
                self.seen.insert(bits(v), id);
            }
        }
        self.cands.push(Candidate {
            id,
            source: Source::Current,
            values,
            eligible,
            runs: Vec::new(),
            scheme: None,
            own_policy,
            prepared,
        });
        Ok(id)
    }

    /// The candidate with values `v` (snapped), added if new.
    fn add(&mut self, v: Vec<f64>, source: Source) -> Result<usize, TuneError> {
        let v = self.space.snap(&v);
        let key = bits(&v);
        if let Some(&id) = self.seen.get(&key) {
            return Ok(id);
        }
        let l = self
            .space
            .apply(self.loaded, &v)
            .map_err(|e| TuneError::Input(e.to_string()))?;
        let scenario = l.base().map_err(|e| TuneError::Input(e.to_string()))?;
        let mut prepared = Prepared::with_cache(&scenario, &l.base_dir, &l.data)
            .map_err(|e| TuneError::Input(format!("{}: {e}", l.file)))?;
        prepared.set_max_pending(self.s.max_pending);
        let id = self.cands.len();
        self.seen.insert(key, id);
        self.cands.push(Candidate {
            id,
            source,
            values: Some(v),
            eligible: true,
            runs: Vec::new(),
            scheme: None,
            own_policy: None,
            prepared,
        });
        Ok(id)
    }

    /// About how many runs the search takes ([`estimated_runs`]).
    fn estimated_runs(&self, grid: usize) -> u64 {
        estimated_runs(self.space, self.s, grid)
    }

    /// Run candidates `ids` up to `n` replications each, in parallel, as
    /// a sweep runs its jobs ([`sweep::execute`]): a candidate is a point.
    ///
    /// A replication is simulated only when no other candidate's stands
    /// for it: two candidates that differ only in the claim TTL run the
    /// same replication, event for event, when in it no claim lived to
    /// either TTL and no agent's decision turned on one running out
    /// ([`crate::model::simulate_ttl`] says from which TTL on). So the
    /// replications of a batch are run in two rounds: first, of each family
    /// (candidates alike but for the TTL), the one with the longest TTL,
    /// which is the likeliest to have no claim outlive it; then only those
    /// that no finished replication stands for. Which replication stands
    /// for which depends on results only, so the outcome is the same for
    /// any thread count, and the same as simulating every one.
    fn ensure(&mut self, ids: &[usize], n: u32) -> Result<(), TuneError> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let seed = self.s.seed;
        let jobs: Vec<Job> = ids
            .iter()
            .flat_map(|&id| {
                let policy = self.cands[id].policy(self.s.policy);
                (self.cands[id].reps() as u32..n).map(move |rep| Job {
                    point: id,
                    policy,
                    rep,
                    seed: rep_seed(seed, 0, rep),
                })
            })
            .collect();
        if jobs.is_empty() {
            return Ok(());
        }
        let need = self.runs + jobs.len() as u64;
        if need > self.length {
            self.length = need;
            self.obs.length(need);
        }
        let keys: Vec<Option<Family>> = jobs
            .iter()
            .map(|j| self.family(j.point).map(|f| (f, j.rep)))
            .collect();
        let ttl = |j: &Job| self.cands[j.point].prepared.ttl_ms();
        let mut results: Vec<Option<RunResult>> = vec![None; jobs.len()];
        // Round 1: every job without a family, and of each family's
        // jobs the one with the longest TTL, unless a result stands for it.
        let mut longest: BTreeMap<&Family, usize> = BTreeMap::new();
        for (k, j) in jobs.iter().enumerate() {
            if let Some(key) = &keys[k] {
                let e = longest.entry(key).or_insert(k);
                if ttl(j) > ttl(&jobs[*e]) {
                    *e = k;
                }
            }
        }
        let first: Vec<usize> = (0..jobs.len())
            .filter(|&k| match &keys[k] {
                None => true,
                Some(key) => longest.get(key) == Some(&k),
            })
            .collect();
        drop(longest);
        self.round(&first, &jobs, &keys, &mut results)?;
        let rest: Vec<usize> = (0..jobs.len()).filter(|&k| results[k].is_none()).collect();
        self.round(&rest, &jobs, &keys, &mut results)?;
        // Jobs are in candidate, then replication order.
        for (j, r) in jobs.iter().zip(results) {
            let r = r.ok_or_else(|| {
                TuneError::Failure(anyhow::anyhow!(
                    "internal: candidate {} replication {} was not run",
                    j.point,
                    j.rep
                ))
            })?;
            self.cands[j.point].runs.push(r);
        }
        self.runs += jobs.len() as u64;
        Ok(())
    }

    /// One round of [`Tuner::ensure`]: jobs `ks` of `jobs`, each taken
    /// from a finished replication that stands for it or else simulated.
    fn round(
        &mut self,
        ks: &[usize],
        jobs: &[Job],
        keys: &[Option<Family>],
        results: &mut [Option<RunResult>],
    ) -> Result<(), TuneError> {
        let mut todo = Vec::new();
        for &k in ks {
            let ttl = self.cands[jobs[k].point].prepared.ttl_ms();
            match self.standing_for(&keys[k], ttl) {
                Some(r) => {
                    results[k] = Some(r);
                    self.obs.advance(1);
                }
                None => todo.push(k),
            }
        }
        let batch: Vec<Job> = todo.iter().map(|&k| jobs[k]).collect();
        for (&k, (row, same_from)) in todo.iter().zip(self.simulate(&batch)?) {
            if let (Some(key), Some(least)) = (&keys[k], same_from) {
                self.same_runs
                    .entry(key.clone())
                    .or_default()
                    .push((least, row.result.clone()));
            }
            results[k] = Some(row.result);
        }
        self.simulated += batch.len() as u64;
        Ok(())
    }

    /// The candidate's values but the TTL, as bits: candidates with the
    /// same family differ only in the TTL. `None` for the scenario's own
    /// settings (prepared from the scenario as written, not from values).
    fn family(&self, id: usize) -> Option<Vec<u64>> {
        let c = &self.cands[id];
        if c.source == Source::Current {
            return None;
        }
        let t = self
            .space
            .dims
            .iter()
            .position(|d| d.role == space::Role::Ttl)?;
        let mut v = c.values.clone()?;
        v[t] = 0.0;
        Some(bits(&v))
    }

    /// A finished replication of the family that is the same as this
    /// one's under `ttl`.
    fn standing_for(&self, key: &Option<Family>, ttl: u64) -> Option<RunResult> {
        let runs = self.same_runs.get(key.as_ref()?)?;
        runs.iter()
            .find(|(least, _)| *least <= ttl)
            .map(|(_, r)| r.clone())
    }

    /// Simulate `jobs`; the rows in job order, with the least TTL from
    /// which each is the same.
    fn simulate(&self, jobs: &[Job]) -> Result<Vec<(sweep::Row, Option<u64>)>, TuneError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let cands = &self.cands;
        let world = |id: usize| cands.get(id).map(|c| &c.prepared);
        let obs = self.obs;
        let done = |_: &sweep::Row| {
            obs.advance(1);
            Ok(())
        };
        let rows = sweep::execute_ttl(jobs, &world, &self.pool, &done, self.stop).map_err(|e| {
            match e.downcast_ref::<crate::model::RunLimit>() {
                Some(limit) => TuneError::Input(limit.to_string()),
                None => TuneError::from(e),
            }
        })?;
        // Stopped: some replications never ran, and nothing can be ranked.
        if self.stop.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(TuneError::Failure(anyhow::anyhow!(INTERRUPTED)));
        }
        Ok(rows)
    }

    /// Feasible candidates best first, leaving out those that a candidate
    /// of `dueled` with more replications stands for (tied with it on the
    /// fewer replications they have): their means rest on less data.
    fn representatives(&self, dueled: &[usize]) -> Vec<usize> {
        self.ranked(true)
            .into_iter()
            .filter(|&c| {
                !dueled.iter().any(|&d| {
                    d != c && self.cands[d].reps() > self.cands[c].reps() && self.tied(d, c)
                })
            })
            .collect()
    }

    /// True when `a` and `b` have the same objective on every replication
    /// both have run.
    fn tied(&self, a: usize, b: usize) -> bool {
        let w = &self.s.weights;
        let (x, y) = (self.cands[a].objective(w), self.cands[b].objective(w));
        x.iter().zip(&y).all(|(p, q)| p == q)
    }

    fn key(&self, id: usize) -> RankKey {
        let c = &self.cands[id];
        let p95 = nan_last(c.summary(BUDGET_METRIC).mean);
        let dist = c
            .values
            .as_ref()
            .map_or(f64::INFINITY, |v| self.space.distance_to_current(v));
        if !c.eligible {
            return (2, 0.0, p95, dist, id);
        }
        if c.feasible(self.s.budget_ms) {
            let obj = nan_last(c.objective_summary(&self.s.weights).mean);
            (0, obj, p95, dist, id)
        } else {
            (1, p95, p95, dist, id)
        }
    }

    /// Eligible candidates with runs, best first (`feasible_only`: those
    /// within the budget).
    fn ranked(&self, feasible_only: bool) -> Vec<usize> {
        let mut ids: Vec<(RankKey, usize)> = self
            .cands
            .iter()
            .filter(|c| c.eligible && c.reps() > 0)
            .filter(|c| !feasible_only || c.feasible(self.s.budget_ms))
            .map(|c| (self.key(c.id), c.id))
            .collect();
        ids.sort_by(|a, b| cmp_key(&a.0, &b.0));
        ids.into_iter().map(|(_, id)| id).collect()
    }
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn cmp_key(a: &RankKey, b: &RankKey) -> Ordering {
    a.0.cmp(&b.0)
        .then(a.1.total_cmp(&b.1))
        .then(a.2.total_cmp(&b.2))
        .then(a.3.total_cmp(&b.3))
        .then(a.4.cmp(&b.4))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::simulate;
    use std::path::Path;

    /// Every replication `tune` stores, simulated or taken from another
    /// candidate's, is what simulating that candidate gives, to the bit;
    /// and some were taken (the TTLs of the default grid beyond every
    /// claim's life).
    #[test]
    fn every_result_is_the_candidates_own_and_some_were_not_simulated() {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/default.toml"),
        )
        .expect("default scenario");
        let text = text.replace("count = 1000", "count = 150");
        let loaded = Loaded::from_text("default.toml", &text, Path::new(".")).expect("valid");
        let space = Space::new(&loaded, &[]).expect("space");
        let settings = Settings {
            policy: PolicyKind::Spec,
            current_policy: PolicyKind::Spec,
            seed: 7,
            reps: 4,
            max_reps: 8,
            levels: 4,
            weights: Weights::default(),
            budget_ms: Some(15_000.0),
            threads: 2,
            max_pending: usize::MAX,
        };
        let out = tune(&loaded, &space, &settings, &(), &AtomicBool::new(false)).expect("tunes");
        // Deterministic: of each family, the longest TTL runs first, and
        // only what it does not stand for runs after it (running the
        // shortest first, or every TTL, simulates more).
        assert_eq!((out.simulated, out.runs), (198, 380));
        let bits = |r: &RunResult| r.values.map(f64::to_bits);
        let mut checked = 0;
        for c in &out.candidates {
            for (rep, r) in c.runs.iter().enumerate() {
                let own = simulate(
                    &c.prepared,
                    PolicyKind::Spec,
                    rep_seed(7, 0, rep as u32),
                    None,
                )
                .expect("runs");
                assert_eq!(bits(r), bits(&own), "candidate {} replication {rep}", c.id);
                checked += 1;
            }
        }
        assert_eq!(checked, out.runs);
    }
}
