//! A plan: a scenario loaded, its overrides applied and checked, its sweep
//! expanded into points. Every problem is bad input ([`Error::Input`]),
//! found before anything runs or is written.

use super::{Error, memory};
use crate::floor::PolicyKind;
use crate::scenario::{Loaded, Point};
use std::path::{Path, PathBuf};

/// Everything a run needs once the input is checked.
pub struct Plan {
    pub loaded: Loaded,
    pub points: Vec<Point>,
    pub policies: Vec<PolicyKind>,
    pub reps: u32,
    pub seed: u64,
    pub name: String,
    /// The scenario file (none: the built-in default scenario).
    pub source: Option<PathBuf>,
}

impl Plan {
    /// Load `scenario` (none: the built-in default), apply the `sets`
    /// (`KEY=VALUE`, as `--set`), then `seed` and `reps` (named as the
    /// options `--seed` and `--reps` in messages), and expand the sweep,
    /// refusing a plan whose points and replications would not fit in
    /// `budget` bytes before its points are expanded.
    pub fn load(
        scenario: Option<&Path>,
        sets: &[String],
        seed: Option<u64>,
        reps: Option<u32>,
        budget: u64,
    ) -> Result<Plan, Error> {
        let overrides = overrides(sets, seed, reps);
        let loaded = Loaded::load_with(scenario, &overrides)?;
        Plan::from_loaded(loaded, scenario.map(Path::to_path_buf), budget)
    }

    /// [`Plan::load`] of scenario text rather than a file (a Python dict
    /// written as TOML): `file` names it in messages, `base_dir` is where
    /// its relative paths point.
    pub fn load_text(
        file: &str,
        text: &str,
        base_dir: &Path,
        overridden: (&[String], Option<u64>, Option<u32>),
        budget: u64,
    ) -> Result<Plan, Error> {
        let (sets, seed, reps) = overridden;
        let overrides = overrides(sets, seed, reps);
        let loaded = Loaded::load_text_with(file, text, base_dir, &overrides)?;
        Plan::from_loaded(loaded, None, budget)
    }

    fn from_loaded(loaded: Loaded, source: Option<PathBuf>, budget: u64) -> Result<Plan, Error> {
        let base = loaded.base()?;
        let n_points = loaded.point_count() as u64;
        let (need, key) = memory::plan_bytes(
            &loaded,
            n_points,
            base.policies.len() as u64,
            u64::from(base.reps),
        );
        if need > budget {
            return Err(loaded
                .error_at(
                    &key,
                    format!(
                        "{n_points} points x {} policies x {} replications need about {} of \
                         memory, more than the {} this run may use (--max-memory; default: \
                         what the machine, ulimit -v and the cgroup leave); split the plan with --shard or fewer \
                         replications",
                        base.policies.len(),
                        base.reps,
                        memory::show(need),
                        memory::show(budget)
                    ),
                )
                .into());
        }
        let points = loaded.points()?;
        Ok(Plan {
            policies: base.policy_kinds(),
            reps: base.reps,
            seed: base.seed,
            name: base.name.clone(),
            loaded,
            points,
            source,
        })
    }

    /// `<out>/<name>`: where a run of this plan writes its results.
    pub fn results_dir(&self, out: &Path) -> PathBuf {
        out.join(&self.name)
    }

    /// The policies' names, comma-separated.
    pub fn policy_names(&self) -> String {
        let names: Vec<&str> = self.policies.iter().map(|k| k.name()).collect();
        names.join(", ")
    }
}

/// The `--set`s, then `--seed` and `--reps`, as overrides: applied in
/// this order; a value of the file they replace is never validated.
fn overrides(sets: &[String], seed: Option<u64>, reps: Option<u32>) -> Vec<(String, String)> {
    let mut overrides: Vec<(String, String)> = sets
        .iter()
        .map(|s| (s.clone(), format!("--set {s}")))
        .collect();
    if let Some(seed) = seed {
        overrides.push((format!("seed={seed}"), format!("--seed {seed}")));
    }
    if let Some(reps) = reps {
        overrides.push((format!("reps={reps}"), format!("--reps {reps}")));
    }
    overrides
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_and_a_small_budget_is_refused() {
        let sets = ["sweep.server.ttl_ms=[1000, 2000]".to_string()];
        let p = Plan::load(None, &sets, Some(5), Some(3), u64::MAX).expect("loads");
        assert_eq!((p.seed, p.reps, p.points.len()), (5, 3, 2));
        assert!(p.source.is_none());
        assert_eq!(p.results_dir(Path::new("r")), Path::new("r").join(&p.name));
        match Plan::load(None, &[], None, None, 1) {
            Err(e) if e.exit_code() == 2 => {
                let m = e.to_string();
                assert!(m.contains("--max-memory"), "{m}");
            }
            _ => panic!("a 1-byte budget must be refused as bad input"),
        }
        let bad = ["nonsense=1".to_string()];
        assert!(matches!(
            Plan::load(None, &bad, None, None, u64::MAX),
            Err(e) if e.exit_code() == 2
        ));
    }
}
