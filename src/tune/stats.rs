//! Paired comparisons on common random numbers, and the Student t CDF the
//! confidence statements need.
//!
//! Every candidate runs replication `r` with the same seed, so two
//! candidates are compared on the per-replication differences
//! `d_r = a_r - b_r`: mean, Student-t 95% half-width, and the one-sided
//! confidence that the true mean difference is below zero.

use crate::metrics::stats::{Summary, mean, sample_sd};

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

/// CDF of Student's t with `dof` degrees of freedom (`dof > 0`).
pub fn t_cdf(t: f64, dof: f64) -> f64 {
    if t.is_nan() || dof.is_nan() || dof <= 0.0 {
        return f64::NAN;
    }
    if t.is_infinite() {
        return if t > 0.0 { 1.0 } else { 0.0 };
    }
    let x = dof / (dof + t * t);
    let tail = 0.5 * inc_beta(dof / 2.0, 0.5, x);
    if t > 0.0 { 1.0 - tail } else { tail }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; relative error ~1e-15).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(π x).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b), by its continued
/// fraction (modified Lentz), using the symmetry for x > (a+1)/(a+b+2).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-15;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < EPS {
            break;
        }
    }
    h
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
