//! `--shard K/N`: split a sweep's points between N processes, and the
//! `shard.toml` file a finished shard leaves for `herdsim merge`.
//!
//! Points are numbered 0.. in grid order (row-major over the sweep axes,
//! the last axis fastest). Shard `K` of `N` (0 <= K < N, zero-based, as
//! Slurm's `SLURM_ARRAY_TASK_ID` with `--array=0-(N-1)` and Kubernetes'
//! `JOB_COMPLETION_INDEX` are) runs the points `p` with `p % N == K`, every
//! policy and replication of each. Seeds depend on the point index, not on
//! the shard, so the shards together compute exactly the single run.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Name of the metadata file a finished sharded run writes beside its CSVs.
pub const SHARD_FILE: &str = "shard.toml";

/// Version of the `shard.toml` format (2: the build, the data hash and the
/// resolved scenario, so that `merge` can check every row against the plan).
pub const SHARD_FORMAT: u32 = 2;

/// Shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Whether this shard runs point `p`.
    pub fn covers(&self, point: usize) -> bool {
        point % self.count == self.index
    }

    /// The points of a grid of `total` this shard runs, ascending.
    pub fn points(&self, total: usize) -> Vec<usize> {
        (self.index..total).step_by(self.count).collect()
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let usage = || format!("`{s}` is not K/N with 0 <= K < N (e.g. 0/4; K counts from 0)");
        let (k, n) = s.split_once('/').ok_or_else(usage)?;
        let index: usize = k.trim().parse().map_err(|_| usage())?;
        let count: usize = n.trim().parse().map_err(|_| usage())?;
        if count == 0 || index >= count {
            return Err(usage());
        }
        Ok(Shard { index, count })
    }
}

/// What `--shard` says: a fixed `K/N`, or `auto` / `auto/N`: K (and N,
/// unless given) read from the batch scheduler's environment when the run
/// starts ([`ShardSpec::resolve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSpec {
    /// `K/N`.
    Fixed(Shard),
    /// `auto` (count `None`: the Slurm array's size) or `auto/N`.
    Auto { count: Option<usize> },
}

/// The environment variables `--shard auto` reads.
pub const SLURM_TASK: &str = "SLURM_ARRAY_TASK_ID";
pub const SLURM_MIN: &str = "SLURM_ARRAY_TASK_MIN";
pub const SLURM_MAX: &str = "SLURM_ARRAY_TASK_MAX";
pub const SLURM_COUNT: &str = "SLURM_ARRAY_TASK_COUNT";
pub const K8S_INDEX: &str = "JOB_COMPLETION_INDEX";

impl FromStr for ShardSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<ShardSpec, String> {
        let usage = || {
            format!(
                "`{s}` is not K/N with 0 <= K < N (e.g. 0/4; K counts from 0), `auto` (K and N \
                 from a Slurm array task) or `auto/N` (K from SLURM_ARRAY_TASK_ID or \
                 JOB_COMPLETION_INDEX)"
            )
        };
        match s.trim().strip_prefix("auto") {
            Some("") => Ok(ShardSpec::Auto { count: None }),
            Some(rest) => {
                let n = rest.strip_prefix('/').ok_or_else(usage)?;
                match n.trim().parse::<usize>() {
                    Ok(count) if count > 0 => Ok(ShardSpec::Auto { count: Some(count) }),
                    _ => Err(usage()),
                }
            }
            None => s
                .parse::<Shard>()
                .map(ShardSpec::Fixed)
                .map_err(|_| usage()),
        }
    }
}

/// One variable of the environment as a shard number: `Ok(None)` when unset.
fn env_number(env: &dyn Fn(&str) -> Option<String>, var: &str) -> Result<Option<usize>, String> {
    match env(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map(Some)
            .map_err(|_| format!("{var}={v:?} is not a task index (a whole number from 0)")),
    }
}

impl ShardSpec {
    /// The shard this process runs: a fixed one as given; `auto` from the
    /// environment (`env` looks a variable up), checked against the
    /// scheduler's array and the plan's `points` (an `auto` run refuses
    /// more shards than the sweep has points: some tasks would compute
    /// nothing, a sign the array was sized for another sweep). Returns the
    /// shard and, for `auto`, where it came from (for a note). An error is
    /// the message of a bad `--shard` (exit 2).
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        points: usize,
    ) -> Result<(Shard, Option<String>), String> {
        let given = match *self {
            ShardSpec::Fixed(s) => return Ok((s, None)),
            ShardSpec::Auto { count } => count,
        };
        let arg = match given {
            Some(n) => format!("--shard auto/{n}"),
            None => "--shard auto".to_string(),
        };
        let fail = |why: String| format!("{arg}: {why}");
        let slurm = env_number(env, SLURM_TASK).map_err(fail)?;
        let k8s = env_number(env, K8S_INDEX).map_err(fail)?;
        let (index, count, source) = match (slurm, k8s) {
            (Some(s), Some(k)) if s != k => {
                return Err(fail(format!(
                    "{SLURM_TASK}={s} and {K8S_INDEX}={k} disagree: which one is this task's \
                     shard? Unset the other"
                )));
            }
            (Some(id), _) => {
                let min = env_number(env, SLURM_MIN).map_err(fail)?;
                let max = env_number(env, SLURM_MAX).map_err(fail)?;
                let n = env_number(env, SLURM_COUNT).map_err(fail)?;
                let array = match (min, max, n) {
                    (Some(lo), Some(hi), Some(n)) => {
                        format!("array {lo}-{hi}, {n} task{}", if n == 1 { "" } else { "s" })
                    }
                    _ => "array size unknown".to_string(),
                };
                let count = match given {
                    Some(count) => {
                        if let Some(hi) = max.filter(|hi| *hi >= count) {
                            return Err(fail(format!(
                                "the Slurm array runs tasks up to {hi} ({SLURM_MAX}), but \
                                 {count} shards are numbered 0 to {}: submit with --array \
                                 within 0-{} or give the right count",
                                count - 1,
                                count - 1
                            )));
                        }
                        count
                    }
                    None => match (min, max, n) {
                        (Some(0), Some(hi), Some(n)) if n == hi + 1 => n,
                        (Some(_), Some(_), Some(_)) => {
                            return Err(fail(format!(
                                "the Slurm array ({array}) is not 0-(N-1) with every task, so \
                                 it does not say how many shards there are (a resubmitted \
                                 subset, or a step): give the count, --shard auto/N"
                            )));
                        }
                        _ => {
                            return Err(fail(format!(
                                "{SLURM_TASK} is set but not {SLURM_MIN}, {SLURM_MAX} and \
                                 {SLURM_COUNT} (Slurm before 18.08?): give the count, \
                                 --shard auto/N"
                            )));
                        }
                    },
                };
                (id, count, format!("{SLURM_TASK}={id}, {array}"))
            }
            (None, Some(k)) => match given {
                Some(count) => (k, count, format!("{K8S_INDEX}={k}")),
                None => {
                    return Err(fail(format!(
                        "{K8S_INDEX}={k} is set (a Kubernetes indexed Job), which does not say \
                         how many shards there are: give the Job's completions, --shard auto/N"
                    )));
                }
            },
            (None, None) => {
                let slurm_job = env("SLURM_JOB_ID")
                    .map(|j| format!(" (this is Slurm job {j}, but not an array task: submit with sbatch --array=0-(N-1))"))
                    .unwrap_or_default();
                return Err(fail(format!(
                    "neither {SLURM_TASK} (a Slurm array task) nor {K8S_INDEX} (a Kubernetes \
                     indexed Job) is set{slurm_job}; outside a scheduler give the shard as K/N"
                )));
            }
        };
        if index >= count {
            return Err(fail(format!(
                "{source}: task {index} is not a shard of {count} (0 to {})",
                count - 1
            )));
        }
        if count > points {
            return Err(fail(format!(
                "{count} shards ({source}), but the sweep has {points} point{}: {} task{} \
                 would compute nothing; use at most {points} shards (--array=0-{})",
                if points == 1 { "" } else { "s" },
                count - points,
                if count - points == 1 { "" } else { "s" },
                points.saturating_sub(1)
            )));
        }
        Ok((Shard { index, count }, Some(source)))
    }
}

/// `shard.toml`: what `herdsim merge` needs to put a shard's rows back in
/// place and to check that all shards belong to one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardMeta {
    /// [`SHARD_FORMAT`].
    pub format: u32,
    /// herdsim version that wrote it.
    pub herdsim: String,
    /// [`crate::BUILD`] of the herdsim that ran it.
    pub build: String,
    /// Scenario name (the results folder's name; `merge` checks it with
    /// the rule for a scenario's `name` before using it as a folder).
    pub scenario: String,
    /// Fingerprint of the resolved scenario and plan; equal for all shards
    /// of one run (see [`super::journal::fingerprint`]): the one of
    /// `build`, `resolved` and `data`.
    pub fingerprint: String,
    /// Hash of the empirical data files ([`super::journal::data_hash`]).
    pub data: String,
    /// K of `--shard K/N`.
    pub shard: usize,
    /// N of `--shard K/N`.
    pub shards: usize,
    /// Points in the whole grid.
    pub points_total: usize,
    /// The points this shard ran, ascending: `summary.csv` holds one block
    /// of `policies.len()` rows per point, `runs.csv` one block of
    /// `policies.len() * reps` rows, in this order.
    pub points: Vec<usize>,
    /// Policies, in row order within a point.
    pub policies: Vec<String>,
    /// Replications per point and policy.
    pub reps: u32,
    /// Sweep keys: the parameter columns after `scenario,policy`.
    pub sweep_keys: Vec<String>,
    /// The resolved scenario (sweep included), as `herdsim validate`
    /// prints it: the plan (seed, points, policies, reps) every row is
    /// checked against.
    pub resolved: String,
}

impl ShardMeta {
    /// The file text.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(format!(
            "# Written by `herdsim run --shard {}/{}` when the shard finished; read by `herdsim merge`.\n{}",
            self.shard,
            self.shards,
            toml::to_string(self)?
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("0/4".parse::<Shard>(), Ok(Shard { index: 0, count: 4 }));
        assert_eq!("3/4".parse::<Shard>(), Ok(Shard { index: 3, count: 4 }));
        for bad in ["4/4", "1/0", "a/2", "2", "-1/3", "1/2/3", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shards_partition_the_grid() {
        let n = 3;
        let mut all: Vec<usize> = (0..n)
            .flat_map(|k| Shard { index: k, count: n }.points(10))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(Shard { index: 1, count: 3 }.points(10), vec![1, 4, 7]);
        assert!(Shard { index: 1, count: 3 }.covers(7));
        assert!(Shard { index: 5, count: 8 }.points(2).is_empty());
    }

    fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        }
    }

    fn slurm(id: &str, min: &str, max: &str, count: &str) -> Vec<(&'static str, String)> {
        vec![
            (SLURM_TASK, id.into()),
            (SLURM_MIN, min.into()),
            (SLURM_MAX, max.into()),
            (SLURM_COUNT, count.into()),
        ]
    }

    fn resolve(spec: &str, vars: &[(&str, String)], points: usize) -> Result<Shard, String> {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let spec: ShardSpec = spec.parse()?;
        spec.resolve(&env_of(&vars), points).map(|(s, _)| s)
    }

    #[test]
    fn specs_parse() {
        assert_eq!("auto".parse(), Ok(ShardSpec::Auto { count: None }));
        assert_eq!("auto/8".parse(), Ok(ShardSpec::Auto { count: Some(8) }));
        assert_eq!(
            "1/4".parse(),
            Ok(ShardSpec::Fixed(Shard { index: 1, count: 4 }))
        );
        for bad in ["auto/0", "auto/", "auto8", "autox", "auto/-1", "4/4", "x"] {
            let e = bad.parse::<ShardSpec>().expect_err(bad);
            assert!(e.contains("auto/N"), "{e}");
        }
    }

    #[test]
    fn auto_reads_a_whole_slurm_array() {
        let s = |k: usize| Shard { index: k, count: 8 };
        assert_eq!(resolve("auto", &slurm("3", "0", "7", "8"), 8), Ok(s(3)));
        assert_eq!(resolve("auto", &slurm("0", "0", "7", "8"), 100), Ok(s(0)));
        // The count given: a resubmitted subset of the array.
        assert_eq!(resolve("auto/8", &slurm("3", "3", "3", "1"), 8), Ok(s(3)));
        assert_eq!(resolve("auto/8", &[(SLURM_TASK, "5".into())], 8), Ok(s(5)));
        // A fixed shard ignores the environment.
        assert_eq!(resolve("2/8", &slurm("3", "0", "7", "8"), 8), Ok(s(2)));
        let (_, source) = "auto"
            .parse::<ShardSpec>()
            .expect("spec")
            .resolve(
                &env_of(&[
                    (SLURM_TASK, "1"),
                    (SLURM_MIN, "0"),
                    (SLURM_MAX, "1"),
                    (SLURM_COUNT, "2"),
                ]),
                2,
            )
            .expect("resolves");
        assert_eq!(
            source.as_deref(),
            Some("SLURM_ARRAY_TASK_ID=1, array 0-1, 2 tasks")
        );
    }

    #[test]
    fn auto_reads_a_kubernetes_index_with_the_count() {
        let k = vec![(K8S_INDEX, "6".to_string())];
        assert_eq!(resolve("auto/8", &k, 8), Ok(Shard { index: 6, count: 8 }));
        let e = resolve("auto", &k, 8).expect_err("no count");
        assert!(
            e.contains("JOB_COMPLETION_INDEX=6") && e.contains("auto/N"),
            "{e}"
        );
    }

    #[test]
    fn auto_refuses_what_does_not_fit() {
        type Case = (
            &'static str,
            Vec<(&'static str, String)>,
            usize,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            ("auto", vec![], 8, "neither SLURM_ARRAY_TASK_ID"),
            (
                "auto/8",
                vec![("SLURM_JOB_ID", "12".into())],
                8,
                "Slurm job 12, but not an array task",
            ),
            // A subset, a step, a start above 0: the count is unknown.
            (
                "auto",
                slurm("3", "3", "3", "1"),
                8,
                "give the count, --shard auto/N",
            ),
            ("auto", slurm("4", "0", "14", "8"), 8, "is not 0-(N-1)"),
            (
                "auto",
                vec![(SLURM_TASK, "3".into())],
                8,
                "SLURM_ARRAY_TASK_COUNT",
            ),
            // The array runs past the count given.
            ("auto/4", slurm("2", "0", "7", "8"), 8, "tasks up to 7"),
            (
                "auto/8",
                vec![(K8S_INDEX, "8".into())],
                8,
                "task 8 is not a shard of 8",
            ),
            // More shards than points.
            (
                "auto",
                slurm("1", "0", "7", "8"),
                6,
                "the sweep has 6 points: 2 tasks would compute nothing",
            ),
            (
                "auto/4",
                vec![(K8S_INDEX, "0".into())],
                1,
                "the sweep has 1 point:",
            ),
            // Unreadable or contradictory values.
            (
                "auto",
                slurm("x", "0", "7", "8"),
                8,
                "SLURM_ARRAY_TASK_ID=\"x\"",
            ),
            (
                "auto/8",
                vec![(SLURM_TASK, "2".into()), (K8S_INDEX, "3".into())],
                8,
                "disagree",
            ),
        ];
        for (spec, vars, points, want) in cases {
            let e = resolve(spec, &vars, points).expect_err(spec);
            assert!(e.starts_with(&format!("--shard {spec}: ")), "{e}");
            assert!(e.contains(want), "{spec} {vars:?}: {e}");
        }
        // Both set and equal: one shard.
        let both = vec![(SLURM_TASK, "2".into()), (K8S_INDEX, "2".into())];
        assert_eq!(
            resolve("auto/4", &both, 4),
            Ok(Shard { index: 2, count: 4 })
        );
    }
}
