//! Picking up the replications an interrupted run left in its journal:
//! whether the journal may be used (same build, scenario, options, data
//! and shard) and which of the plan's jobs it already holds.

use super::journal::{self, Contents, Header};
use super::{Error, Job, Plan, Row, Shard};
use crate::progress::Observer;
use std::path::Path;

/// What to do with the journal of an interrupted run in the results folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JournalMode {
    /// Refuse to start over it (unless it holds the whole run: a finished
    /// run stopped before removing it), naming `--resume` and `--fresh`.
    #[default]
    Refuse,
    /// Complete the run from it (`--resume`); none: run from the start.
    Resume,
    /// Discard it and start over (`--fresh`).
    Fresh,
}

/// The jobs of a plan over `points` (its points or one shard's), in order.
pub struct Jobs<'p> {
    pub plan: &'p Plan,
    pub points: &'p [usize],
    pub jobs: &'p [Job],
}

impl Jobs<'_> {
    /// Index of `job` in the jobs, if it is one of them with the right seed.
    pub fn index(&self, job: &Job) -> Option<usize> {
        let slot = self.points.binary_search(&job.point).ok()?;
        let pol = self.plan.policies.iter().position(|p| *p == job.policy)?;
        if job.rep >= self.plan.reps {
            return None;
        }
        let per_point = self.plan.policies.len() * self.plan.reps as usize;
        let i = slot * per_point + pol * self.plan.reps as usize + job.rep as usize;
        (self.jobs.get(i) == Some(job)).then_some(i)
    }
}

/// The rows a run described by `header` over `jobs` starts with: those of
/// the journal at `jpath` when `mode` says to use it (or it holds the
/// whole run), none when there is no journal or `mode` is `Fresh`.
pub fn finished_rows(
    jobs: &Jobs,
    header: &Header,
    jpath: &Path,
    mode: JournalMode,
    obs: &dyn Observer,
) -> Result<Vec<Row>, Error> {
    let dir = jpath.parent().unwrap_or(Path::new("."));
    if !jpath.exists() || mode == JournalMode::Fresh {
        if mode == JournalMode::Resume {
            obs.info(&format!(
                "herdsim: no journal in {}: nothing to resume, running from the start",
                dir.display()
            ));
        }
        return Ok(Vec::new());
    }
    let old = journal::read(jpath);
    // A run killed after writing its results but before removing its
    // journal left a complete one: use it, whatever the flags.
    let complete = mode != JournalMode::Resume
        && old.as_ref().is_ok_and(|c| {
            c.header.fingerprint == header.fingerprint
                && c.header.shard == header.shard
                && c.rows.len() == jobs.jobs.len()
                && c.rows.iter().all(|r| jobs.index(&r.job).is_some())
        });
    if mode != JournalMode::Resume && !complete {
        let n = old.map_or(0, |c| c.rows.len());
        return Err(Error::Input(format!(
            "{}: an interrupted run left its journal here ({n} replications finished); \
             add --resume to complete it, or --fresh to discard it and start over",
            jpath.display()
        )));
    }
    let old = old.map_err(|m| Error::Input(format!("{}: {m}", jpath.display())))?;
    let rows = usable_rows(jobs, header, &old, jpath)?;
    if complete {
        obs.warn(&format!(
            "herdsim: {} holds every replication of this run (a finished run stopped \
             before removing it): writing the results from it",
            jpath.display()
        ));
    } else {
        obs.info(&format!(
            "herdsim: resuming {}: {} of {} replications already done{}",
            dir.display(),
            rows.len(),
            jobs.jobs.len(),
            if old.dropped > 0 {
                format!(" ({} torn or repeated journal lines dropped)", old.dropped)
            } else {
                String::new()
            }
        ));
    }
    Ok(rows)
}

/// The journal's rows, once it is known to belong to this run and each
/// row to be one of its jobs.
fn usable_rows(
    jobs: &Jobs,
    header: &Header,
    old: &Contents,
    jpath: &Path,
) -> Result<Vec<Row>, Error> {
    check_resumable(&old.header, header, jobs.plan, jpath)?;
    for row in &old.rows {
        if jobs.index(&row.job).is_none() {
            return Err(Error::Input(format!(
                "{}: a row (point {}, {}, rep {}) is not a job of this run; \
                 add --fresh to discard the journal and start over",
                jpath.display(),
                row.job.point,
                row.job.policy.name(),
                row.job.rep
            )));
        }
    }
    Ok(old.rows.clone())
}

/// Refuse to resume a journal written for another scenario, plan or shard,
/// naming what changed.
fn check_resumable(old: &Header, new: &Header, plan: &Plan, jpath: &Path) -> Result<(), Error> {
    let j = jpath.display();
    if old.build != new.build {
        return Err(Error::Input(format!(
            "{j}: key `build`: the interrupted run was computed by another build of herdsim \
             (build {}, this is build {}); replications of two builds must not mix in one \
             result: finish it with the herdsim that started it, or add --fresh to discard \
             the journal and start over",
            old.build, new.build
        )));
    }
    if old.fingerprint == new.fingerprint && old.shard == new.shard {
        return Ok(());
    }
    let hint = "resume with the same scenario and options, or add --fresh to discard the journal and start over";
    let shard_name =
        |s: Option<Shard>| s.map_or_else(|| "not sharded".to_string(), |s| format!("--shard {s}"));
    if old.shard != new.shard {
        return Err(Error::Input(format!(
            "{j}: key `--shard`: the interrupted run was {}, this one is {}; {hint}",
            shard_name(old.shard),
            shard_name(new.shard)
        )));
    }
    let parsed = (
        toml::from_str::<toml::Table>(&old.scenario),
        toml::from_str::<toml::Table>(&new.scenario),
    );
    if let (Ok(a), Ok(b)) = parsed
        && let Some((key, was, now)) = journal::first_difference(&a, &b)
    {
        let why = format!(
            "differs from the interrupted run whose journal is {j} (there {was}, now {now}); {hint}"
        );
        return Err(plan.loaded.error_at(&key, why).into());
    }
    let why = if old.data != new.data {
        format!(
            "an empirical data file the scenario reads changed since the interrupted run; {hint}"
        )
    } else if old.herdsim != new.herdsim {
        format!(
            "written by herdsim {}, this is herdsim {}; {hint}",
            old.herdsim, new.herdsim
        )
    } else {
        format!(
            "the run changed since it was interrupted (fingerprint {}, now {}); {hint}",
            old.fingerprint, new.fingerprint
        )
    };
    Err(Error::Input(format!("{j}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::PolicyKind;

    #[test]
    fn job_index_finds_only_the_plans_jobs() {
        let sets = ["sweep.server.ttl_ms=[1000, 2000, 3000]".to_string()];
        let plan = Plan::load(None, &sets, None, Some(2), u64::MAX).expect("loads");
        let points = [0, 2];
        let all = super::super::plan(plan.seed, &points, &plan.policies, plan.reps);
        let jobs = Jobs {
            plan: &plan,
            points: &points,
            jobs: &all,
        };
        for (i, j) in all.iter().enumerate() {
            assert_eq!(jobs.index(j), Some(i));
        }
        let mut other = all[1];
        other.seed ^= 1;
        assert_eq!(jobs.index(&other), None, "another seed");
        other = all[1];
        other.point = 1;
        assert_eq!(jobs.index(&other), None, "another point");
        other = all[1];
        other.policy = PolicyKind::Spec;
        other.rep = 9;
        assert_eq!(jobs.index(&other), None, "another replication");
    }
}
