//! A sweep's progress for its [`Observer`]: points and replications done,
//! weighed by cost.

use super::Job;
use crate::progress::Observer;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Progress of a sweep: points and replications done, weighed by cost. The
/// meter advances by each replication's expected cost (agents x posts,
/// [`crate::model::Prepared::expected_cost`]) rather than by one, so an
/// ETA does not say "0 s" while the costliest points are still to run.
pub struct Tally<'o> {
    obs: &'o dyn Observer,
    /// The run's points, ascending.
    points: Vec<usize>,
    /// Jobs per point (policies x reps).
    per_point: u32,
    /// Expected cost of one job of each point, by position in `points`.
    cost: Vec<u64>,
    /// Finished jobs of each point, by position in `points`.
    done: Vec<AtomicU32>,
    points_done: AtomicUsize,
    jobs_done: AtomicUsize,
    jobs_total: usize,
}

impl<'o> Tally<'o> {
    /// `points` is the run's point list (ascending); `cost` the expected
    /// cost of one job of each (same order); `finished` the jobs already
    /// done (resumed from a journal); `per_point` = policies x reps.
    pub fn new(
        obs: &'o dyn Observer,
        points: &[usize],
        cost: &[u64],
        per_point: u32,
        finished: &[Job],
    ) -> Tally<'o> {
        let cost: Vec<u64> = (0..points.len())
            .map(|i| cost.get(i).copied().unwrap_or(1).max(1))
            .collect();
        let total: u64 = cost.iter().map(|c| c * u64::from(per_point)).sum();
        obs.length(total);
        let done: Vec<AtomicU32> = points.iter().map(|_| AtomicU32::new(0)).collect();
        let mut pos = 0u64;
        for job in finished {
            if let Ok(i) = points.binary_search(&job.point) {
                done[i].fetch_add(1, Ordering::Relaxed);
                pos += cost[i];
            }
        }
        let points_done = done
            .iter()
            .filter(|d| d.load(Ordering::Relaxed) >= per_point)
            .count();
        let t = Tally {
            obs,
            points: points.to_vec(),
            per_point,
            cost,
            done,
            points_done: AtomicUsize::new(points_done),
            jobs_done: AtomicUsize::new(finished.len()),
            jobs_total: points.len() * per_point as usize,
        };
        obs.message(t.text(points_done, finished.len()));
        obs.resumed_at(pos);
        t
    }

    fn text(&self, points_done: usize, jobs_done: usize) -> String {
        format!(
            "points {points_done}/{}, replications {jobs_done}/{}",
            self.points.len(),
            self.jobs_total
        )
    }

    /// One job of `point` finished.
    pub fn job_done(&self, point: usize) {
        let slot = self.points.binary_search(&point).ok();
        let finished_point = slot
            .and_then(|s| self.done.get(s))
            .is_some_and(|d| d.fetch_add(1, Ordering::Relaxed) + 1 == self.per_point);
        if finished_point {
            self.points_done.fetch_add(1, Ordering::Relaxed);
        }
        let jobs = self.jobs_done.fetch_add(1, Ordering::Relaxed) + 1;
        self.obs
            .message(self.text(self.points_done.load(Ordering::Relaxed), jobs));
        self.obs
            .advance(slot.and_then(|s| self.cost.get(s)).copied().unwrap_or(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::PolicyKind;
    use std::sync::Mutex;

    /// Records length, position and the last message.
    #[derive(Default)]
    struct Meter(Mutex<(u64, u64, String)>);

    impl Observer for Meter {
        fn length(&self, total: u64) {
            self.0.lock().expect("lock").0 = total;
        }
        fn resumed_at(&self, done: u64) {
            self.0.lock().expect("lock").1 = done;
        }
        fn advance(&self, units: u64) {
            self.0.lock().expect("lock").1 += units;
        }
        fn message(&self, text: String) {
            self.0.lock().expect("lock").2 = text;
        }
    }

    #[test]
    fn tally_weighs_replications_by_cost() {
        // Points 3 and 8: a cheap one and one 100 times dearer; 2 jobs each;
        // one job of the dear point already done (resumed).
        let m = Meter::default();
        let done = super::super::plan(1, &[8], &[PolicyKind::Spec], 1);
        let t = Tally::new(&m, &[3, 8], &[1, 100], 2, &done);
        assert_eq!(m.0.lock().expect("lock").0, 2 + 200);
        assert_eq!(m.0.lock().expect("lock").1, 100);
        t.job_done(3);
        assert_eq!(m.0.lock().expect("lock").1, 101);
        t.job_done(8);
        let (_, pos, text) = m.0.lock().expect("lock").clone();
        assert_eq!(pos, 201);
        assert_eq!(text, "points 1/2, replications 3/4");
        // A zero or missing cost counts as 1.
        let m = Meter::default();
        let _ = Tally::new(&m, &[0, 1], &[0], 1, &[]);
        assert_eq!(m.0.lock().expect("lock").0, 2);
    }
}
