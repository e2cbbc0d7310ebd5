//! A tuning request, as `herdsim tune` takes it: checked into a search
//! ([`Request::check`]) before anything runs, then run and written
//! ([`run`]) to `<out>/<scenario name>/tune/`: `candidates.csv`,
//! `pareto.png` and `recommended.env`, each atomically.

use super::schemes::{self, SchemeSearch, SchemesOutcome};
use super::space::{Space, parse_param};
use super::{Outcome, Settings, TuneError, Weights, report, tune};
use crate::floor::PolicyKind;
use crate::progress::Observer;
use crate::report::plot::pareto::{ParetoChart, pareto_figure};
use crate::report::write_atomic;
use crate::scenario::Loaded;
use crate::sweep;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Most candidates a grid may have.
pub const MAX_GRID: usize = 20_000;

/// What to tune, as given (each field is a `herdsim tune` option).
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Scenario file (none: the built-in default scenario, unless `text`).
    pub scenario: Option<PathBuf>,
    /// Scenario text instead of a file (a Python dict's TOML).
    pub text: Option<Text>,
    /// `--set KEY=VALUE`, applied first.
    pub sets: Vec<String>,
    /// `--objective` weights.
    pub objective: String,
    /// `--max-ttfr-p95-ms`.
    pub max_ttfr_p95_ms: Option<f64>,
    /// `--param KEY=LO..HI[:STEP]`.
    pub params: Vec<String>,
    /// `--policy`.
    pub policy: String,
    pub seed: Option<u64>,
    pub reps: Option<u32>,
    pub max_reps: Option<u32>,
    /// `--grid` levels.
    pub grid: Option<usize>,
    /// Worker threads.
    pub threads: usize,
    /// `--max-memory` (none: what the system leaves, as for `herdsim run`).
    pub max_memory: Option<u64>,
    /// `--schemes`: `all` or scheme names (none: the scenario's scheme only,
    /// as before schemes existed).
    pub schemes: Option<String>,
}

/// Scenario text that is not a file: what names it in messages, the
/// TOML, and where its relative paths point.
#[derive(Debug, Clone)]
pub struct Text {
    pub label: String,
    pub toml: String,
    pub base_dir: PathBuf,
}

/// A checked request: the scenario, the space searched and the settings.
pub struct Search {
    pub loaded: Loaded,
    pub space: Space,
    pub settings: Settings,
    /// The scenario's name.
    pub name: String,
    pub source: Option<PathBuf>,
    /// With `--schemes`: one search per scheme (the scenario's own among
    /// them), run instead of `space`; empty otherwise.
    pub schemes: Vec<SchemeSearch>,
}

/// A finished search, its files written.
pub struct Tuned {
    pub outcome: Outcome,
    /// `recommended.env`'s text (also when nothing met the budget).
    pub text: String,
    /// `<out>/<name>/tune`.
    pub dir: PathBuf,
    /// Seconds the search took.
    pub elapsed: f64,
    /// With `--schemes`: each scheme's part of `outcome`.
    pub schemes: Vec<schemes::SchemeResult>,
}

fn bad(msg: impl Into<String>) -> TuneError {
    TuneError::Input(msg.into())
}

impl Request {
    /// Every check of the input, before anything runs.
    pub fn check(&self) -> Result<Search, TuneError> {
        let sets: Vec<(String, String)> = self
            .sets
            .iter()
            .map(|s| (s.clone(), format!("--set {s}")))
            .collect();
        let loaded = match &self.text {
            Some(t) => Loaded::load_text_with(&t.label, &t.toml, &t.base_dir, &sets)?,
            None => Loaded::load_with(self.scenario.as_deref(), &sets)?,
        };
        if let Some(axis) = loaded.sweep.first() {
            let why = format!(
                "herdsim tune searches its own grid and does not run a [sweep]; remove the \
                 sweep or pin the key with --set {}=VALUE",
                axis.key
            );
            return Err(loaded.error_at(&format!("sweep.{}", axis.key), why).into());
        }
        let base = loaded.base()?;
        let policy = self
            .policy
            .parse::<PolicyKind>()
            .map_err(|e| bad(format!("--policy {}: {e}", self.policy)))?;
        let weights = parse_weights(&self.objective).map_err(bad)?;
        if let Some(b) = self
            .max_ttfr_p95_ms
            .filter(|b| !(b.is_finite() && *b > 0.0))
        {
            return Err(bad(format!(
                "--max-ttfr-p95-ms {b}: must be a positive number of milliseconds"
            )));
        }
        let (reps, max_reps) = self.reps(&loaded, base.reps)?;
        let threads = self.threads;
        if threads == 0 || threads > sweep::MAX_THREADS {
            return Err(bad(format!(
                "--jobs {threads}: must be from 1 to {} worker threads",
                sweep::MAX_THREADS
            )));
        }
        let params = self
            .params
            .iter()
            .map(|p| parse_param(p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        let space = Space::new(&loaded, &params).map_err(bad)?;
        let levels = self.levels(&space)?;
        // The current settings run under the scenario's own policy: the one
        // searched when the scenario lists it, else the first it lists.
        let listed = base.policy_kinds();
        let current_policy = if listed.contains(&policy) {
            policy
        } else {
            listed.first().copied().unwrap_or(policy)
        };
        let mut settings = Settings {
            policy,
            current_policy,
            seed: self.seed.unwrap_or(base.seed),
            reps,
            max_reps,
            levels,
            weights,
            budget_ms: self.max_ttfr_p95_ms,
            threads,
            max_pending: usize::MAX,
        };
        settings.max_pending = memory_check(
            &loaded,
            &base,
            &space,
            &settings,
            self.max_memory,
            self.reps,
        )?;
        let schemes = match &self.schemes {
            Some(text) => self.scheme_searches(text, &loaded, &params, &settings)?,
            None => Vec::new(),
        };
        Ok(Search {
            name: base.name.clone(),
            loaded,
            space,
            settings,
            source: self.scenario.clone(),
            schemes,
        })
    }

    /// `--schemes`: one search per scheme named, and the scenario's own
    /// scheme (for the current settings only when not named), each over the
    /// settings that matter under it ([`schemes::scheme_params`]).
    fn scheme_searches(
        &self,
        text: &str,
        loaded: &Loaded,
        params: &[super::space::ParamSpec],
        settings: &Settings,
    ) -> Result<Vec<SchemeSearch>, TuneError> {
        let asked = schemes::parse_schemes(text).map_err(bad)?;
        if settings.weights.unanswered == 0.0 {
            return Err(bad(format!(
                "--objective {}: with --schemes the unanswered rate must weigh (a scheme that \
                 answers nothing, e.g. mentions with no mentions, would score 0)",
                self.objective
            )));
        }
        let own = loaded.base()?.schemes.scheme;
        let mut list: Vec<(crate::agent::Scheme, bool)> =
            asked.iter().map(|&x| (x, true)).collect();
        if !asked.contains(&own) {
            list.push((own, false));
        }
        let mut out = Vec::new();
        for (scheme, named) in list {
            let l = schemes::scheme_loaded(loaded, scheme)?;
            let p = schemes::scheme_params(scheme, params, &l, !named)?;
            let space = schemes::scheme_space(&l, &p).map_err(bad)?;
            let levels = self.levels(&space)?;
            let mut st = settings.clone();
            st.levels = levels;
            // Only the scenario's own scheme has current settings of its
            // own; another scheme's start from them under the policy searched.
            if scheme != own {
                st.current_policy = st.policy;
            }
            let base = l.base()?;
            st.max_pending = memory_check(&l, &base, &space, &st, self.max_memory, self.reps)?;
            out.push(SchemeSearch {
                scheme,
                asked: named,
                loaded: l,
                space,
                settings: st,
            });
        }
        Ok(out)
    }

    /// `--reps` (at least 2) and `--max-reps` (at least `--reps`).
    fn reps(&self, loaded: &Loaded, file_reps: u32) -> Result<(u32, u32), TuneError> {
        let reps = self.reps.unwrap_or(file_reps);
        if reps < 2 {
            let origin = match self.reps {
                Some(r) => format!("--reps {r}"),
                None => format!("{}: key `reps` ({reps})", loaded.file),
            };
            return Err(bad(format!(
                "{origin}: tune needs at least 2 replications per candidate to compare them"
            )));
        }
        let max_reps = self.max_reps.unwrap_or(reps.saturating_mul(4));
        if max_reps < reps {
            return Err(bad(format!(
                "--max-reps {max_reps}: must be at least --reps ({reps})"
            )));
        }
        Ok((reps, max_reps))
    }

    /// `--grid` levels: at least 2, at most [`MAX_GRID`] candidates.
    fn levels(&self, space: &Space) -> Result<usize, TuneError> {
        let levels = self.grid.unwrap_or_else(|| space.default_levels());
        if levels < 2 {
            return Err(bad(format!("--grid {levels}: must be at least 2")));
        }
        let grid_size = space
            .dims
            .iter()
            .filter(|d| d.free())
            .try_fold(1usize, |n, _| n.checked_mul(levels))
            .unwrap_or(usize::MAX);
        if grid_size > MAX_GRID {
            return Err(bad(format!(
                "--grid {levels}: {levels} levels over {} parameters is more than {MAX_GRID} \
                 candidates; use fewer levels",
                space.free_count()
            )));
        }
        Ok(levels)
    }
}

/// The limits `herdsim run` applies, before anything runs: the candidates
/// (each holds its prepared world) and `threads` replications of the
/// scenario's agents must fit the memory budget (exit 2 naming the agent
/// count, `--max-memory` and `--jobs`); returns each replication's share of
/// the rest, in pending events (docs/limits.md, "Memory").
fn memory_check(
    loaded: &Loaded,
    base: &crate::scenario::Scenario,
    space: &Space,
    s: &Settings,
    max_memory: Option<u64>,
    reps_flag: Option<u32>,
) -> Result<usize, TuneError> {
    use crate::sweep::memory::{self, JOB_BYTES, Need, POINT_AGENT_BYTES, POINT_BYTES};
    let budget = memory::budget(max_memory);
    let grid = space.grid(s.levels).len();
    let candidates = 1 + grid as u64 + super::estimated_refine(space, s.levels);
    let runs = super::estimated_runs(space, s, grid);
    let agents = base.agent_count();
    let per_candidate = POINT_BYTES.saturating_add(agents.saturating_mul(POINT_AGENT_BYTES));
    let (cand_bytes, run_bytes) = (
        candidates.saturating_mul(per_candidate),
        runs.saturating_mul(JOB_BYTES),
    );
    let held = memory::PROCESS_BYTES
        .saturating_add(cand_bytes)
        .saturating_add(run_bytes);
    // What the search holds (its replications, its candidates) alone is too
    // much: that is the replications' or the grid's doing, not the agents'.
    if held > budget {
        let what = if run_bytes >= cand_bytes {
            let origin = match reps_flag {
                Some(r) => format!("--reps {r}"),
                None => format!("{}: key `reps` ({})", loaded.file, s.reps),
            };
            format!(
                "{origin} (up to --max-reps {}): the search's {runs} replications need about \
                 {} of memory to hold, more than the {} this run may use (--max-memory); \
                 lower --reps and --max-reps",
                s.max_reps,
                memory::show(held),
                memory::show(budget)
            )
        } else {
            format!(
                "--grid {}: the search's {candidates} candidates need about {} of memory to \
                 hold, more than the {} this run may use (--max-memory); use fewer levels or \
                 parameters",
                s.levels,
                memory::show(held),
                memory::show(budget)
            )
        };
        return Err(bad(what));
    }
    let need = Need {
        held,
        agents,
        jobs: runs,
        threads: s.threads,
    };
    need.check(loaded, &memory::agents_key(base), budget)
}

/// Run `search` and write its files into `<out>/<name>/tune/` (checked
/// first: a folder, not an input, and this process's alone). When `stop`
/// is set the search fails before anything is written ([`super::tune`]).
pub fn run(
    search: &Search,
    out: &Path,
    obs: &dyn Observer,
    stop: &AtomicBool,
) -> Result<Tuned, TuneError> {
    let dir = out.join(&search.name).join("tune");
    let files = ["candidates.csv", "pareto.png", "recommended.env"];
    sweep::outputs::check_folders(out, &dir, &files)?;
    if let Some(input) = &search.source
        && files
            .iter()
            .any(|f| crate::report::same_path(&dir.join(f), input))
    {
        return Err(bad(format!(
            "--out {}: tune would overwrite its input {} with its results; choose another --out",
            out.display(),
            input.display()
        )));
    }
    let _lock = sweep::outputs::lock_results(&dir, obs)?;
    let done = compute(search, obs, stop)?;
    write_atomic(&dir.join("candidates.csv"), &done.candidates_csv)?;
    pareto_figure(&done.chart, &dir.join("pareto.png"))?;
    let env = dir.join("recommended.env");
    if done.outcome.chosen.is_some() {
        write_atomic(&env, done.text.as_bytes())?;
    } else if env.exists() {
        // A stale recommendation would read as this run's.
        std::fs::remove_file(&env)?;
    }
    Ok(Tuned {
        outcome: done.outcome,
        text: done.text,
        dir,
        elapsed: done.elapsed,
        schemes: done.schemes,
    })
}

/// A finished search in memory: what [`run`] writes.
pub struct Computed {
    pub outcome: Outcome,
    /// `recommended.env`'s text, what `herdsim tune` prints.
    pub text: String,
    /// `candidates.csv`.
    pub candidates_csv: Vec<u8>,
    /// `pareto.png`'s figure.
    pub chart: ParetoChart,
    /// Seconds the search took.
    pub elapsed: f64,
    /// With `--schemes`: each scheme's part of `outcome`.
    pub schemes: Vec<schemes::SchemeResult>,
}

/// Run `search`, writing nothing: the results [`run`] writes. When `stop`
/// is set the search fails ([`super::tune`]).
pub fn compute(
    search: &Search,
    obs: &dyn Observer,
    stop: &AtomicBool,
) -> Result<Computed, TuneError> {
    let started = Instant::now();
    let (name, space, s) = (&search.name, &search.space, &search.settings);
    let (outcome, parts, text) = if search.schemes.is_empty() {
        let outcome = tune(&search.loaded, space, s, obs, stop)?;
        let text = report::recommendation(name, space, &outcome, s);
        (outcome, Vec::new(), text)
    } else {
        let base = search.loaded.base()?;
        let so = schemes::tune_schemes(
            &search.schemes,
            base.schemes.scheme,
            base.schemes.default_agent.clone(),
            obs,
            stop,
        )?;
        let text = report::recommendation_schemes(name, &so, s);
        let SchemesOutcome {
            merged, schemes, ..
        } = so;
        (merged, schemes, text)
    };
    let elapsed = started.elapsed().as_secs_f64();
    // Across schemes every scheme's space has the same keys in the same
    // order: the first names the columns.
    let columns = search.schemes.first().map_or(space, |x| &x.space);
    let candidates_csv = report::candidates_csv(name, columns, &outcome, s)?;
    let mut chart = report::pareto_chart(name, &outcome, s);
    if !parts.is_empty() {
        let names: Vec<&str> = parts.iter().map(|p| p.scheme.name()).collect();
        chart.title = format!(
            "herdsim tune: {name} ({}; schemes {})",
            s.policy.name(),
            names.join(", ")
        );
    }
    Ok(Computed {
        outcome,
        text,
        candidates_csv,
        chart,
        elapsed,
        schemes: parts,
    })
}

/// Why a finished search recommends nothing (the command line's
/// error, exit 1), or None when it recommends a setting.
pub fn unmet(search: &Search, done: &Tuned) -> Option<String> {
    if done.outcome.chosen.is_some() {
        return None;
    }
    Some(match search.settings.budget_ms {
        Some(b) => format!(
            "no setting in the searched ranges meets --max-ttfr-p95-ms {}",
            crate::report::num(b)
        ),
        // Without a budget only a candidate that answered nothing is
        // infeasible.
        None => "no setting in the searched ranges answered anything".to_string(),
    })
}

/// Parse `--objective`: `W_DUP,W_WASTE,W_UNANS`, or named
/// (`dup=1,waste=0.5,unanswered=4`; unnamed ones stay 1).
pub fn parse_weights(text: &str) -> Result<Weights, String> {
    let flag = format!("--objective {text}");
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let w = if parts.iter().any(|p| p.contains('=')) {
        named_weights(&parts, &flag)?
    } else {
        if parts.len() != 3 {
            return Err(format!(
                "{flag}: expected three weights W_DUP,W_WASTE,W_UNANS (e.g. 1,1,1), got {}",
                parts.len()
            ));
        }
        Weights {
            duplicate: weight(parts[0], &flag)?,
            wasted: weight(parts[1], &flag)?,
            unanswered: weight(parts[2], &flag)?,
        }
    };
    if w.duplicate + w.wasted + w.unanswered == 0.0 {
        return Err(format!("{flag}: at least one weight must be positive"));
    }
    Ok(w)
}

fn named_weights(parts: &[&str], flag: &str) -> Result<Weights, String> {
    let mut w = Weights::default();
    let mut seen = [false; 3];
    for p in parts {
        let Some((k, v)) = p.split_once('=') else {
            return Err(format!(
                "{flag}: `{p}` is not NAME=WEIGHT (names: dup, waste, unanswered)"
            ));
        };
        let slot = match k.trim() {
            "dup" | "duplicate" | "duplicate_rate" => 0,
            "waste" | "wasted" | "wasted_inference_rate" => 1,
            "unans" | "unanswered" | "unanswered_rate" => 2,
            other => {
                return Err(format!(
                    "{flag}: unknown name `{other}` (names: dup, waste, unanswered)"
                ));
            }
        };
        if seen[slot] {
            return Err(format!("{flag}: `{}` is given twice", k.trim()));
        }
        seen[slot] = true;
        let x = weight(v, flag)?;
        match slot {
            0 => w.duplicate = x,
            1 => w.wasted = x,
            _ => w.unanswered = x,
        }
    }
    Ok(w)
}

/// Largest weight of `--objective`. Only the weights' ratios matter; the
/// objective's spread is formed from squares of weighted rates, which a
/// weight near 1e154 overflows (and then nothing can be ranked or drawn).
pub const MAX_WEIGHT: f64 = 1e6;

fn weight(v: &str, flag: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=MAX_WEIGHT).contains(&x) => Ok(x),
        Ok(x) if x.is_finite() && x > MAX_WEIGHT => Err(format!(
            "{flag}: weight `{}` is above {MAX_WEIGHT:e}; only the weights' ratios matter, \
             so divide them all by the same number",
            v.trim()
        )),
        _ => Err(format!(
            "{flag}: weight `{}` must be a number >= 0",
            v.trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A weight whose squares overflow is refused, naming the flag and
    /// saying what to do; the largest accepted one is 1e6.
    #[test]
    fn weights_that_overflow_are_refused() {
        for text in ["1,1e200,1", "dup=1e7", "1,1,1e308"] {
            let e = parse_weights(text).expect_err(text);
            assert!(e.contains("--objective") && e.contains("ratios"), "{e}");
        }
        assert!(parse_weights("1,1e6,1").is_ok());
    }

    #[test]
    fn weights_parse_both_ways() {
        let w = parse_weights("1,0.5,4").expect("ok");
        assert_eq!((w.duplicate, w.wasted, w.unanswered), (1.0, 0.5, 4.0));
        let w = parse_weights("waste=2, unanswered=0").expect("ok");
        assert_eq!((w.duplicate, w.wasted, w.unanswered), (1.0, 2.0, 0.0));
        for bad in [
            "1,1",
            "1,-1,1",
            "0,0,0",
            "dup=1,dup=2",
            "speed=1",
            "1,x,1",
            "1,inf,1",
        ] {
            let e = parse_weights(bad).expect_err(bad);
            assert!(e.starts_with("--objective"), "{e}");
        }
    }

    fn request() -> Request {
        Request {
            objective: "1,1,1".into(),
            policy: "spec".into(),
            threads: 1,
            ..Request::default()
        }
    }

    #[test]
    fn a_request_is_checked_before_anything_runs() {
        let r = request();
        let s = r.check().expect("the default scenario tunes");
        assert_eq!(s.settings.max_reps, 4 * s.settings.reps);
        let cases: [(&str, Request); 4] = [
            (
                "--reps 1",
                Request {
                    reps: Some(1),
                    ..request()
                },
            ),
            (
                "--max-reps 2",
                Request {
                    reps: Some(3),
                    max_reps: Some(2),
                    ..request()
                },
            ),
            (
                "--grid 1",
                Request {
                    grid: Some(1),
                    ..request()
                },
            ),
            (
                "--policy nope",
                Request {
                    policy: "nope".into(),
                    ..request()
                },
            ),
        ];
        for (start, r) in cases {
            match r.check() {
                Err(TuneError::Input(m)) => assert!(m.starts_with(start), "{m}"),
                _ => panic!("{start}: must be refused as bad input"),
            }
        }
    }

    /// `herdsim tune` applies `herdsim run`'s memory limits before it
    /// starts: 100 000 agents do not fit 1 GiB (they aborted at 2.8 GB).
    #[test]
    fn a_search_that_does_not_fit_the_memory_budget_is_refused() {
        let r = Request {
            sets: vec!["agents.0.count=100000".into()],
            max_memory: Some(1 << 30),
            ..request()
        };
        match r.check() {
            Err(e) if e.exit_code() == 2 => {
                let m = e.to_string();
                assert!(m.contains("key `agents.0.count`"), "{m}");
                assert!(m.contains("--max-memory"), "{m}");
            }
            _ => panic!("100 000 agents in 1 GiB must be refused as bad input"),
        }
        // The same search with room for it passes, its events capped.
        let r = Request {
            sets: vec!["agents.0.count=100000".into()],
            max_memory: Some(64 << 30),
            ..request()
        };
        let s = r.check().expect("fits 64 GiB");
        assert!(s.settings.max_pending < usize::MAX);
    }

    /// A search too large to hold because of its replications names
    /// `--reps`, not an agent count it did not change.
    #[test]
    fn too_many_replications_name_reps() {
        let r = Request {
            reps: Some(100_000_000),
            max_memory: Some(1 << 30),
            ..request()
        };
        match r.check() {
            Err(e) if e.exit_code() == 2 => {
                let m = e.to_string();
                assert!(m.contains("--reps 100000000"), "{m}");
                assert!(!m.contains("agents"), "{m}");
            }
            _ => panic!("1e8 replications must be refused as bad input"),
        }
    }

    #[test]
    fn a_small_search_writes_its_files() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let r = Request {
            sets: vec!["workload.count=5".into(), "reps=2".into()],
            params: vec![
                "agents.csma.min_ms=0".into(),
                "agents.csma.max_ms=1000..3000".into(),
                "server.ttl_ms=30000".into(),
            ],
            grid: Some(2),
            max_reps: Some(2),
            ..request()
        };
        let search = r.check().expect("checks");
        let done = run(&search, tmp.path(), &(), &AtomicBool::new(false)).expect("runs");
        assert!(done.outcome.chosen.is_some());
        for f in ["candidates.csv", "pareto.png", "recommended.env"] {
            assert!(done.dir.join(f).is_file(), "{f}");
        }
        assert_eq!(done.dir, tmp.path().join(&search.name).join("tune"));
    }

    /// Told to stop, a search fails naming it and writes nothing (its
    /// folder is left as it was: no candidates of a search cut short).
    #[test]
    fn a_stopped_search_writes_nothing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let r = Request {
            sets: vec!["workload.count=5".into(), "reps=2".into()],
            grid: Some(2),
            max_reps: Some(2),
            ..request()
        };
        let search = r.check().expect("checks");
        match run(&search, tmp.path(), &(), &AtomicBool::new(true)) {
            Err(e) => assert_eq!(e.to_string(), super::super::INTERRUPTED),
            Ok(_) => panic!("a stopped search must fail"),
        }
        let dir = tmp.path().join(&search.name).join("tune");
        for f in ["candidates.csv", "pareto.png", "recommended.env"] {
            assert!(!dir.join(f).exists(), "{f}");
        }
    }
}
