//! Paired comparisons on common random numbers, and the Student t CDF the
//! confidence statements need (statrs).
//!
//! Every candidate runs replication `r` with the same seed, so two
//! candidates are compared on the per-replication differences
//! `d_r = a_r - b_r`: mean, Student-t 95% half-width, and the one-sided
//! confidence that the true mean difference is below zero.

use crate::metrics::stats::{Summary, mean, sample_sd};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A paired comparison of two candidates on their common replications.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// Replications compared (pairs where both values are numbers).
    pub n: usize,
    /// Mean of `a - b`.
    pub mean: f64,
    /// Half-width of the 95% CI of that mean (0 when n < 2).
    pub ci95: f64,
    /// One-sided confidence that the true mean of `a - b` is below zero
    /// (paired t test): 0.5 when the data cannot tell, near 1 when `a` is
    /// clearly lower. With no spread at all it is 1, 0 or 0.5 by the sign
    /// of the mean.
    pub conf_lower: f64,
}

impl Paired {
    /// Compare `a` with `b` replication by replication (the first
    /// `min(len)` of each; pairs with a NaN are left out).
    pub fn of(a: &[f64], b: &[f64]) -> Paired {
        let d: Vec<f64> = a
            .iter()
            .zip(b)
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| x - y)
            .collect();
        let s = Summary::of(&d);
        let conf_lower = confidence_below(&d, 0.0);
        Paired {
            n: d.len(),
            mean: s.mean,
            ci95: s.ci95,
            conf_lower,
        }
    }

    /// The comparison the other way round (`b - a`).
    pub fn negate(&self) -> Paired {
        Paired {
            n: self.n,
            mean: -self.mean,
            ci95: self.ci95,
            conf_lower: 1.0 - self.conf_lower,
        }
    }

    /// True when the 95% CI of the difference excludes zero.
    pub fn resolved(&self) -> bool {
        self.n >= 2 && self.mean.is_finite() && self.mean.abs() > self.ci95
    }
}

/// One-sided confidence (one-sample t test) that the true mean of `xs` is
/// below `bound`. NaN for no data.
pub fn confidence_below(xs: &[f64], bound: f64) -> f64 {
    let n = xs.len();
    if n == 0 {
        return f64::NAN;
    }
    let m = mean(xs);
    let sd = if n >= 2 { sample_sd(xs) } else { 0.0 };
    if sd == 0.0 || !sd.is_finite() {
        return if m < bound {
            1.0
        } else if m > bound {
            0.0
        } else {
            0.5
        };
    }
    let t = (bound - m) / (sd / (n as f64).sqrt());
    t_cdf(t, (n - 1) as f64)
}

/// CDF of Student's t with `dof` degrees of freedom (`dof > 0`), from
/// statrs (regularized incomplete beta). NaN for a NaN `t` or a `dof` that
/// is NaN or not positive.
pub fn t_cdf(t: f64, dof: f64) -> f64 {
    if t.is_nan() {
        return f64::NAN;
    }
    match StudentsT::new(0.0, 1.0, dof) {
        Ok(d) => d.cdf(t),
        Err(_) => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::stats::t975;

    #[test]
    fn t_cdf_matches_known_values() {
        // t = 1, dof = 1 (Cauchy): 0.75.
        assert!((t_cdf(1.0, 1.0) - 0.75).abs() < 1e-12);
        // t = 2, dof = 10: 0.963305982...
        assert!((t_cdf(2.0, 10.0) - 0.963_305_982_614_3).abs() < 1e-9);
        assert!((t_cdf(-2.0, 10.0) - (1.0 - 0.963_305_982_614_3)).abs() < 1e-9);
        assert_eq!(t_cdf(0.0, 5.0), 0.5);
        assert_eq!(t_cdf(f64::INFINITY, 3.0), 1.0);
        assert_eq!(t_cdf(f64::NEG_INFINITY, 3.0), 0.0);
        assert!(t_cdf(f64::NAN, 3.0).is_nan());
        assert!(t_cdf(1.0, 0.0).is_nan());
        assert!(t_cdf(1.0, f64::NAN).is_nan());
        // The 97.5% quantiles of the crate's table invert.
        for dof in [1u64, 2, 5, 19, 30, 79, 200] {
            let p = t_cdf(t975(dof), dof as f64);
            assert!((p - 0.975).abs() < 1e-7, "dof {dof}: {p}");
        }
    }

    #[test]
    fn paired_differences() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [1.5, 2.4, 3.6, 4.5];
        let p = Paired::of(&a, &b);
        assert_eq!(p.n, 4);
        assert!((p.mean + 0.5).abs() < 1e-12);
        assert!(p.resolved(), "{p:?}");
        assert!(p.conf_lower > 0.99, "{p:?}");
        let same = Paired::of(&a, &a);
        assert_eq!(same.mean, 0.0);
        assert!(!same.resolved());
        assert_eq!(same.conf_lower, 0.5);
        let nan = Paired::of(&[f64::NAN, 1.0, 2.0], &[0.0, 0.5, 1.0]);
        assert_eq!(nan.n, 2);
    }

    #[test]
    fn confidence_below_a_bound() {
        assert_eq!(confidence_below(&[1.0, 1.0], 2.0), 1.0);
        assert_eq!(confidence_below(&[3.0, 3.0], 2.0), 0.0);
        let c = confidence_below(&[1.0, 2.0, 3.0], 2.0);
        assert!((c - 0.5).abs() < 1e-12);
        assert!(confidence_below(&[], 1.0).is_nan());
    }
}
