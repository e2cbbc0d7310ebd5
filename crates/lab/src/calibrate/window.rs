//! The wait before starting (the CSMA window) and the answer probability
//! (`respond_p`) of a group of agents, fitted by maximum likelihood to
//! what members see: who claimed each question and when, with the waits
//! they could not have shown (docs/observe.md, "The wait and respond_p").
//!
//! Each (agent, question) is an *opportunity*. The agent wants to answer
//! with probability p; if it does, its wait W is uniform on [min, max]
//! (what an agentchat client draws, `AGENTCHAT_CSMA_MIN_MS..MAX_MS`). A
//! wait that ends while the agent knows of a live claim or an answer makes
//! it skip, and under agentchat a claim that loses is never announced:
//! those waits fall in the opportunity's *blocked set* U, built from the
//! others' claims and the first answer. So an agent that did not claim
//! either did not want to (1 - p) or waited into U (p P(W in U)); an agent
//! that claimed after a wait w contributes p f(w). The log-likelihood is
//!
//!   l(p, min, max) = sum_claims [ln p - ln(max - min)]
//!                  + sum_others ln(1 - p + p |U n [min, max]| / (max - min)).
//!
//! Its maximum has min at the shortest wait seen (a smaller min only
//! spreads the density), so min, then max and p are found in one
//! dimension each. Intervals are profile-likelihood sets: a drop of
//! chi2_1(0.95)/2 = 1.92 for p; for the window's ends, whose likelihood is
//! not regular (an end sits on a sample extreme), a drop of ln 40 = 3.69,
//! which for uncensored waits is exactly the 95% interval of a sample
//! extreme and is wider (at least 95%) otherwise.
//!
//! What is not identified: when agents defer to the first claim, the late
//! waiters are never seen, and the likelihood depends on p and max mostly
//! through p / (max - min), the rate at which wanting agents' waits end at
//! the front of the window. The intervals then are long along that ridge,
//! and say so. A window known from the agents' configuration
//! (`--csma-ms`) pins min and max and leaves p well determined.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Sorted, disjoint half-open intervals [lo, hi) (hi may be infinite).
/// A clone shares the intervals: the agents that did nothing about a
/// question share one set, so memory is linear in the claims.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Set(Arc<[(f64, f64)]>);

impl Set {
    /// The union of `parts` (empty and reversed intervals dropped).
    pub fn union(mut parts: Vec<(f64, f64)>) -> Set {
        parts.retain(|(a, b)| b > a);
        parts.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut out: Vec<(f64, f64)> = Vec::with_capacity(parts.len());
        for (a, b) in parts {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        Set(out.into())
    }

    /// The same intervals (shared, not copied) as `other`.
    pub fn shares(&self, other: &Set) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The length of the set inside [a, b].
    pub fn measure_in(&self, a: f64, b: f64) -> f64 {
        self.0
            .iter()
            .map(|&(x, y)| (y.min(b) - x.max(a)).max(0.0))
            .sum()
    }

    pub fn contains(&self, x: f64) -> bool {
        self.0.iter().any(|&(a, b)| a <= x && x < b)
    }

    pub fn parts(&self) -> &[(f64, f64)] {
        &self.0
    }
}

/// One (agent, question).
#[derive(Debug, Clone, PartialEq)]
pub enum Opp {
    /// It claimed after waiting `w`.
    Claimed { w: f64 },
    /// It did not claim.
    NotClaimed { blocked: Set },
    /// It answered without claiming (a mention, a rude agent): it wanted to.
    Wanted,
}

/// Likelihood drop of a 95% profile interval for a regular parameter.
pub const DROP_REGULAR: f64 = 1.920_729_410_347_062;
/// Likelihood drop for an end of the window (ln 40; see the module doc).
pub const DROP_END: f64 = 3.688_879_454_113_936;

/// A fitted window and answer probability, with their intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    pub p: f64,
    pub min: f64,
    pub max: f64,
    pub loglik: f64,
    pub p_ci: (f64, f64),
    pub min_ci: (f64, f64),
    pub max_ci: (f64, f64),
    /// Opportunities, claims among them.
    pub opps: usize,
    pub claims: usize,
    /// The window was given (`--csma-ms`), not fitted.
    pub pinned: bool,
    /// p / (max - min) per second, and its interval (the identified part).
    pub rate: f64,
    pub rate_ci: (f64, f64),
    /// The ends' intervals run along the p-max ridge (weakly identified).
    pub ridge: bool,
}

/// The shortest window a fit allows (ms): below the stamps' resolution.
pub const MIN_WIDTH: f64 = 1.0;

struct Data {
    claims: Vec<f64>,
    wanted: usize,
    /// The non-claimants' blocked sets, each distinct set once, in the
    /// order first met, with how many opportunities have it: the
    /// likelihood's time is linear in the distinct sets (at most one per
    /// question; fewer where times are whole ms, as a server's stamps).
    others: Vec<Set>,
    weight: Vec<f64>,
}

impl Data {
    fn of(opps: &[Opp]) -> Data {
        let mut d = Data {
            claims: Vec::new(),
            wanted: 0,
            others: Vec::new(),
            weight: Vec::new(),
        };
        // A set by its intervals' bits: only to find it again (the order
        // is the order met). The last one met is checked first: the
        // agents idle on one question share one set.
        let mut index: BTreeMap<Vec<(u64, u64)>, usize> = BTreeMap::new();
        let mut last: Option<usize> = None;
        for o in opps {
            match o {
                Opp::Claimed { w } => d.claims.push(w.max(0.0)),
                Opp::Wanted => d.wanted += 1,
                Opp::NotClaimed { blocked } => {
                    if let Some(i) = last.filter(|&i| d.others[i].shares(blocked)) {
                        d.weight[i] += 1.0;
                        continue;
                    }
                    let key: Vec<(u64, u64)> = blocked
                        .parts()
                        .iter()
                        .map(|&(a, b)| (a.to_bits(), b.to_bits()))
                        .collect();
                    let i = *index.entry(key).or_insert_with(|| {
                        d.others.push(blocked.clone());
                        d.weight.push(0.0);
                        d.others.len() - 1
                    });
                    d.weight[i] += 1.0;
                    last = Some(i);
                }
            }
        }
        d
    }

    fn n1(&self) -> usize {
        self.claims.len() + self.wanted
    }

    /// The complements 1 - P(W in U) of the non-claimants, for a window.
    fn c(&self, a: f64, b: f64) -> Vec<f64> {
        let w = (b - a).max(MIN_WIDTH);
        self.others
            .iter()
            .map(|u| (1.0 - u.measure_in(a, a + w) / w).clamp(0.0, 1.0))
            .collect()
    }

    /// The log-likelihood at (p, a, b) given the complements `c`.
    fn ll_with(&self, p: f64, a: f64, b: f64, c: &[f64]) -> f64 {
        let w = (b - a).max(MIN_WIDTH);
        if self
            .claims
            .iter()
            .any(|&x| x < a - 1e-9 || x > a + w + 1e-9)
        {
            return f64::NEG_INFINITY;
        }
        let n1 = self.n1() as f64;
        let mut l = -(self.claims.len() as f64) * w.ln();
        if n1 > 0.0 {
            l += n1 * p.ln();
        }
        for (&ci, &k) in c.iter().zip(&self.weight) {
            l += k * (1.0 - p * ci).max(0.0).ln();
        }
        l
    }

    /// The best p for a window, and the log-likelihood there.
    fn profile_p(&self, a: f64, b: f64) -> (f64, f64) {
        let c = self.c(a, b);
        let n1 = self.n1() as f64;
        if n1 == 0.0 {
            return (0.0, self.ll_with(0.0, a, b, &c));
        }
        // g'(p) = n1 / p - sum c / (1 - p c), decreasing in p: Newton's
        // method inside a shrinking bracket (bisection when a step leaves it).
        let dg = |p: f64| -> (f64, f64) {
            let mut d1 = n1 / p;
            let mut d2 = -n1 / (p * p);
            for (&ci, &k) in c.iter().zip(&self.weight) {
                let q = 1.0 - p * ci;
                d1 -= k * ci / q;
                d2 -= k * ci * ci / (q * q);
            }
            (d1, d2)
        };
        let top = 1.0 - 1e-12;
        let p = if dg(top).0 >= 0.0 {
            1.0
        } else {
            let (mut lo, mut hi) = (1e-12, top);
            let sum_c: f64 = c.iter().zip(&self.weight).map(|(c, k)| c * k).sum();
            let mut p = (n1 / (n1 + sum_c)).clamp(lo, hi);
            for _ in 0..100 {
                let (d1, d2) = dg(p);
                if d1 > 0.0 {
                    lo = p;
                } else {
                    hi = p;
                }
                let next = p - d1 / d2;
                let next = if next > lo && next < hi {
                    next
                } else {
                    0.5 * (lo + hi)
                };
                if (next - p).abs() < 1e-12 || hi - lo < 1e-12 {
                    p = next;
                    break;
                }
                p = next;
            }
            p
        };
        (p, self.ll_with(p, a, b, &c))
    }

    fn wmin(&self) -> f64 {
        self.claims.iter().copied().fold(f64::INFINITY, f64::min)
    }

    fn wmax(&self) -> f64 {
        self.claims
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// The largest max worth looking at: far beyond every wait and every
    /// finite end of a blocked set.
    fn bhi(&self) -> f64 {
        let ends = self
            .others
            .iter()
            .flat_map(|u| u.parts().iter().flat_map(|&(a, b)| [a, b]))
            .filter(|x| x.is_finite())
            .fold(0.0_f64, f64::max);
        let (lo, hi) = (self.wmin(), self.wmax());
        hi + 100.0 * (hi - lo).max(1000.0) + ends
    }

    /// The best max (and p) for a given min, by a log-spaced grid then a
    /// golden-section refinement. `f(b)` is the profile to maximise.
    fn best_b(&self, a: f64, f: &dyn Fn(f64) -> f64) -> (f64, f64) {
        let lo = self.wmax().max(a + MIN_WIDTH);
        let grid = b_grid(lo, self.bhi());
        let vals: Vec<f64> = grid.iter().map(|&b| f(b)).collect();
        let (i, _) = vals
            .iter()
            .enumerate()
            .fold(
                (0, f64::NEG_INFINITY),
                |acc, (i, &v)| if v > acc.1 { (i, v) } else { acc },
            );
        let l = grid[i.saturating_sub(1)];
        let h = grid[(i + 1).min(grid.len() - 1)];
        let b = golden(l, h, f);
        let (b, v) = if f(b) >= vals[i] {
            (b, f(b))
        } else {
            (grid[i], vals[i])
        };
        (b, v)
    }
}

/// Candidate values of max: lo, then lo + d for d log-spaced up to hi - lo.
fn b_grid(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(1.0);
    let mut g = vec![lo];
    let n = 60;
    for k in 0..=n {
        let d = (0.1_f64).max(span * 1e-6)
            * (span / (0.1_f64).max(span * 1e-6)).powf(k as f64 / n as f64);
        g.push(lo + d);
    }
    g
}

/// The maximum of a unimodal-enough f on [lo, hi] (golden section).
fn golden(mut lo: f64, mut hi: f64, f: &dyn Fn(f64) -> f64) -> f64 {
    let r = 0.618_033_988_749_894_9;
    let mut x1 = hi - r * (hi - lo);
    let mut x2 = lo + r * (hi - lo);
    let (mut f1, mut f2) = (f(x1), f(x2));
    for _ in 0..60 {
        if f1 < f2 {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + r * (hi - lo);
            f2 = f(x2);
        } else {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - r * (hi - lo);
            f1 = f(x1);
        }
        if hi - lo < 1e-6 * (1.0 + hi.abs()) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// The ends of the superlevel set {x : f(x) >= level} around `best` on a
/// monotone-enough profile, searched by bisection between `best` and each
/// bound (an end that reaches the bound is the bound).
fn level_ends(best: f64, lo: f64, hi: f64, level: f64, f: &dyn Fn(f64) -> f64) -> (f64, f64) {
    let end = |to: f64| -> f64 {
        if f(to) >= level {
            return to;
        }
        let (mut inside, mut outside) = (best, to);
        // To a millionth of the distance searched (at most 40 halvings).
        let tol = 1e-6 * (to - best).abs();
        for _ in 0..40 {
            if (outside - inside).abs() <= tol {
                break;
            }
            let mid = 0.5 * (inside + outside);
            if f(mid) >= level {
                inside = mid;
            } else {
                outside = mid;
            }
        }
        inside
    };
    (end(lo), end(hi))
}

/// Fit p, min and max to `opps`; with `pinned`, min and max are given and
/// only p is fitted. None when nobody ever claimed (nothing to fit).
pub fn fit(opps: &[Opp], pinned: Option<(f64, f64)>) -> Option<Fit> {
    let d = Data::of(opps);
    if d.claims.is_empty() && pinned.is_none() {
        return None;
    }
    if let Some((a, b)) = pinned {
        let c = d.c(a, b);
        let (p, ll) = d.profile_p(a, b);
        let f = |p: f64| d.ll_with(p, a, b, &c);
        let (plo, phi) = level_ends(p, 1e-9, 1.0, ll - DROP_REGULAR, &f);
        let w = (b - a).max(MIN_WIDTH) / 1000.0;
        return Some(Fit {
            p,
            min: a,
            max: b,
            loglik: ll,
            p_ci: (plo, phi),
            min_ci: (a, a),
            max_ci: (b, b),
            opps: opps.len(),
            claims: d.claims.len(),
            pinned: true,
            rate: p / w,
            rate_ci: (plo / w, phi / w),
            ridge: false,
        });
    }
    let a = d.wmin();
    let prof_b = |b: f64| d.profile_p(a, b).1;
    let (b, ll) = d.best_b(a, &prof_b);
    let (p, _) = d.profile_p(a, b);
    // min: the profile over max and p, for each min below the shortest wait.
    let prof_a = |x: f64| d.best_b(x, &|bb: f64| d.profile_p(x, bb).1).1;
    let (min_lo, _) = level_ends(a, 0.0_f64.min(a), a, ll - DROP_END, &prof_a);
    // max: the profile over p (min at its best).
    let (_, max_hi) = level_ends(b, b, d.bhi(), ll - DROP_END, &prof_b);
    let (max_lo, _) = level_ends(b, d.wmax().max(a + MIN_WIDTH), b, ll - DROP_END, &prof_b);
    // p: the profile over max (min at its best).
    let prof_p = |pp: f64| {
        d.best_b(a, &|bb: f64| {
            let c = d.c(a, bb);
            d.ll_with(pp, a, bb, &c)
        })
        .1
    };
    let (p_lo, p_hi) = level_ends(p, 1e-9, 1.0, ll - DROP_REGULAR, &prof_p);
    // The identified rate p / (max - min), over the same profile of p:
    // at each p, the best max.
    let rate_at = |pp: f64| {
        let bb = d
            .best_b(a, &|bb: f64| {
                let c = d.c(a, bb);
                d.ll_with(pp, a, bb, &c)
            })
            .0;
        pp / ((bb - a).max(MIN_WIDTH) / 1000.0)
    };
    let w = (b - a).max(MIN_WIDTH) / 1000.0;
    let (r1, r2) = (rate_at(p_lo), rate_at(p_hi));
    let ridge = (max_hi - max_lo) > 0.5 * (b - a) || (p_hi - p_lo) > 0.4;
    Some(Fit {
        p,
        min: a,
        max: b,
        loglik: ll,
        p_ci: (p_lo, p_hi),
        min_ci: (min_lo, a),
        max_ci: (max_lo, max_hi),
        opps: opps.len(),
        claims: d.claims.len(),
        pinned: false,
        rate: p / w,
        rate_ci: (r1.min(r2).min(p / w), r1.max(r2).max(p / w)),
        ridge,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::stats;
    use rand::RngExt;

    #[test]
    fn sets_merge_and_measure() {
        let s = Set::union(vec![
            (5.0, 7.0),
            (1.0, 3.0),
            (2.0, 4.0),
            (9.0, f64::INFINITY),
            (6.0, 6.0),
        ]);
        assert_eq!(s.parts(), &[(1.0, 4.0), (5.0, 7.0), (9.0, f64::INFINITY)]);
        assert_eq!(s.measure_in(0.0, 10.0), 3.0 + 2.0 + 1.0);
        assert_eq!(s.measure_in(3.5, 5.5), 1.0);
        assert!(s.contains(1.0) && !s.contains(4.0) && s.contains(1e9));
    }

    /// Opportunities of agents that never see each other (no censoring):
    /// the fit is the closed form: p the share that claimed, min and max
    /// the extremes, and the ends' intervals the exact ones of a uniform
    /// sample's extremes.
    #[test]
    fn uncensored_waits_give_the_closed_form() {
        let mut r = stats::rng(1, "window");
        let (a, b, p) = (2000.0, 8000.0, 0.6);
        let mut opps = Vec::new();
        let mut waits = Vec::new();
        for _ in 0..500 {
            if r.random::<f64>() < p {
                let w = a + (b - a) * r.random::<f64>();
                waits.push(w);
                opps.push(Opp::Claimed { w });
            } else {
                opps.push(Opp::NotClaimed {
                    blocked: Set::default(),
                });
            }
        }
        let f = fit(&opps, None).expect("fits");
        let n = waits.len() as f64;
        let lo = waits.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = waits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert!((f.p - n / 500.0).abs() < 1e-6, "{f:?}");
        assert!(
            (f.min - lo).abs() < 1e-9 && (f.max - hi).abs() < 1e-3,
            "{f:?}"
        );
        // The exact 97.5% bound of an extreme: width x (40^(1/n) - 1).
        let width = hi - lo;
        let exact = width * (40f64.powf(1.0 / n) - 1.0);
        assert!(
            ((hi - f.max_ci.1 + exact).abs()) < 0.02 * exact + 1.0,
            "{f:?} {exact}"
        );
        assert!(
            ((lo - f.min_ci.0) - exact).abs() < 0.02 * exact + 1.0,
            "{f:?} {exact}"
        );
        // p's interval is the binomial one (Wilson-like, within 0.01).
        let (wl, wh) = stats::wilson(waits.len() as u64, 500);
        assert!(
            (f.p_ci.0 - wl).abs() < 0.01 && (f.p_ci.1 - wh).abs() < 0.01,
            "{f:?}"
        );
        assert!(f.min_ci.0 <= a && a <= f.min_ci.1 && f.max_ci.0 <= b && b <= f.max_ci.1);
    }

    /// Five agents racing for each question, only the first claim seen
    /// (agentchat): the truth is inside every interval, and the identified
    /// rate p / width is close to the truth's.
    #[test]
    fn first_claims_only_cover_the_truth() {
        let (a, b, p, n) = (1000.0, 6000.0, 0.6, 5);
        let mut covered = [0; 3];
        let reps = 40;
        for rep in 0..reps {
            let mut r = stats::rng(rep, "race");
            let mut opps = Vec::new();
            for _ in 0..300 {
                let waits: Vec<Option<f64>> = (0..n)
                    .map(|_| (r.random::<f64>() < p).then(|| a + (b - a) * r.random::<f64>()))
                    .collect();
                let first = waits
                    .iter()
                    .enumerate()
                    .filter_map(|(i, w)| w.map(|w| (i, w)))
                    .min_by(|x, y| x.1.total_cmp(&y.1));
                for i in 0..n {
                    match first {
                        Some((j, w)) if j == i => opps.push(Opp::Claimed { w }),
                        Some((_, w)) => opps.push(Opp::NotClaimed {
                            blocked: Set::union(vec![(w, f64::INFINITY)]),
                        }),
                        None => opps.push(Opp::NotClaimed {
                            blocked: Set::default(),
                        }),
                    }
                }
            }
            let f = fit(&opps, None).expect("fits");
            covered[0] += usize::from(f.p_ci.0 <= p && p <= f.p_ci.1);
            covered[1] += usize::from(f.min_ci.0 <= a && a <= f.min_ci.1);
            covered[2] += usize::from(f.max_ci.0 <= b && b <= f.max_ci.1);
            let truth = p / ((b - a) / 1000.0);
            assert!(
                f.rate_ci.0 <= truth * 1.3 && truth * 0.7 <= f.rate_ci.1,
                "{f:?}"
            );
            // With the window known, p is well determined.
            let pinned = fit(&opps, Some((a, b))).expect("fits");
            assert!((pinned.p - p).abs() < 0.1, "{pinned:?}");
        }
        // 95% intervals: at least 34 of 40 (binomial 2.5% point is 35).
        assert!(covered.iter().all(|&c| c >= 34), "{covered:?}");
    }

    /// Opportunities that share one blocked set (the agents idle on one
    /// question), and opportunities with equal sets of their own, fit
    /// alike: the likelihood counts each distinct set once, weighted.
    #[test]
    fn shared_and_equal_sets_fit_as_the_opportunities_they_stand_for() {
        let mut r = stats::rng(3, "shared");
        let (mut shared, mut own) = (Vec::new(), Vec::new());
        for _ in 0..200 {
            let first = 1000.0 + 5000.0 * r.random::<f64>();
            let set = Set::union(vec![(first, f64::INFINITY)]);
            shared.push(Opp::Claimed { w: first });
            own.push(Opp::Claimed { w: first });
            for _ in 0..4 {
                shared.push(Opp::NotClaimed {
                    blocked: set.clone(),
                });
                own.push(Opp::NotClaimed {
                    blocked: Set::union(vec![(first, f64::INFINITY)]),
                });
            }
        }
        let a = fit(&shared, None).expect("fits");
        let b = fit(&own, None).expect("fits");
        assert_eq!(a, b);
        assert_eq!(Data::of(&shared).others.len(), 200);
        assert_eq!(Data::of(&shared).weight.iter().sum::<f64>(), 800.0);
    }
}
